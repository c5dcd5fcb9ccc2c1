package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestSelectorFromDLIDTable: hfi1's dlid_to_selector does not use the DLID hash
// ((dlid >> 8) ^ dlid) & 0xff as the selector: it maps each hash, the first time it is seen,
// to the next of 0..127 (mapping[hash] = next; next = (next + 1) & 0x7F), and the selector is
// that number + ctxt + subctxt. So on a fresh table the first two DLIDs of distinct hashes get
// selectors 0 and 1 and, with one engine per selector value, engines 0 and 1. Submit's
// selectEngine used the hash itself (0x26 for DLID 0x1234 and 0x5b for 0x0a51: engines 2 and 3
// of 4); it asks the device's table now (sdma.Device.DLIDSelector).
func TestSelectorFromDLIDTable(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, Engines: 4, NumVLs: 1})
	pq := testQueue(t, Config{Device: dev, Slots: 2})
	data := pattern(100, 1)
	for i, dlid := range []uint16{0x1234, 0x0a51} {
		tp := testTemplate
		tp.DLID = dlid
		info, hdr := Message(i, 4096, tp, data)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
	}
	for i := range 4 {
		_, _ = dev.Engine(i).Process()
	}
	for i := range 2 {
		require.NoError(t, waitSlot(t, pq, i))
	}
	assert.EqualValues(t, 1, dev.Engine(0).Stats().Packets, "the first DLID: selector 0")
	assert.EqualValues(t, 1, dev.Engine(1).Stats().Packets, "the second hash: selector 1")
}
