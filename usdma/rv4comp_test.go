package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestCompEntryNotTornAcrossReuse: Comp reads an entry's status and then its errcode, without a
// lock, while the slot may be reused between the two loads. set_comp_state writes the errcode
// only for ERROR, so a poller that read ERROR finds that request's errcode (or a later ERROR's),
// never 0, and CompEntry promises Errcode 0 for every other state. The queue used to store
// errcode 0 with QUEUED and COMPLETE: a poller that read ERROR and then the errcode of the slot's
// next request saw {ERROR 0}, and one that read COMPLETE and then a next request's errcode saw
// {COMPLETE 70}. A test hook runs a whole request on the slot between the two loads.
func TestCompEntryNotTornAcrossReuse(t *testing.T) {
	dev := testDevice(t, sdma.Config{})
	eng := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Slots: 1})
	data := pattern(100, 1)
	info, hdr := Message(0, 4096, testTemplate, data)
	good := func() {
		waitRunning(t, eng)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
		require.NoError(t, waitSlot(t, pq, 0))
	}
	bad := func() { // the engine is stopped: ECOMM, the slot ends ERROR in Submit
		require.NoError(t, eng.Stop())
		require.ErrorIs(t, pq.Submit(context.Background(), info, &hdr, data), ErrNotRunning)
		require.NoError(t, eng.Start())
	}
	var window func()
	testHooks(pq).compWindow = func() {
		if w := window; w != nil {
			window = nil
			w()
		}
	}

	bad()
	require.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0))
	window = good
	assert.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0), "ERROR read, the slot reused and COMPLETE before the errcode load")
	assert.Equal(t, CompEntry{Status: Complete}, pq.Comp(0))
	window = bad
	assert.Equal(t, CompEntry{Status: Complete}, pq.Comp(0), "COMPLETE read, the slot reused and ERROR before the errcode load")
	assert.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0))
	window = good
	assert.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0))
	waitRunning(t, eng)
}
