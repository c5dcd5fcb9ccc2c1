package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/internal/sm"
)

// TestHaltLeavesOtherEnginesAloneAsKernel: a halt of one engine (s99 + e60) does nothing to the
// device's other engines, as in hfi1 on the B-step chips the model is: __sdma_process_event's
// s99/e60 case calls sdma_err_progress_check_schedule, whose body runs only
// "if (!is_bx(sde->dd) && HFI1_CAP_IS_KSET(SDMA_AHG))", an A-step workaround (is_bx: chip
// revision minor 0x1X). There, 10 jiffies later, sdma_err_progress_check raises e90 on every
// other running engine that has descriptors outstanding and whose descq_head has not moved
// since the halt: it halts them (their txreqs abort), it does not make progress for them.
// Here, four Manual engines each hold three txreqs the hardware has not read; engine 0 is
// halted: its three complete aborted and it recovers; the others stay in s99 with no halt in
// their history, their txreqs wait for their own hardware, and complete OK when it runs.
func TestHaltLeavesOtherEnginesAloneAsKernel(t *testing.T) {
	const engines, per = 4, 3
	dev, _ := engTestDevice(t, Config{Manual: true, Engines: engines, RingSize: 64})
	var c completions
	var txs [engines][per]TxReq
	for i := range engines {
		for j := range per {
			engTestBuild(t, dev, &txs[i][j], 0, engTestPattern(64, byte(i*per+j)), &c)
			require.NoError(t, dev.Engine(i).Send(nil, &txs[i][j], false))
		}
	}
	before := make([]int, engines)
	for i := range engines {
		before[i] = len(dev.Engine(i).history())
	}
	require.NoError(t, dev.Engine(0).injectHalt(CauseHalt))
	for j := range per {
		st, ok := c.status(&txs[0][j])
		assert.True(t, ok)
		assert.Equal(t, StatusAborted, st, "engine 0's txreq %d", j)
	}
	assert.Equal(t, sm.S99Running, dev.Engine(0).state(), "engine 0 recovered")
	for i := 1; i < engines; i++ {
		e := dev.Engine(i)
		assert.Equal(t, sm.S99Running, e.state(), "engine %d", i)
		assert.Len(t, e.history(), before[i], "engine %d: no transition (no e90 from a progress check)", i)
		assert.Zero(t, e.Stats().Faults, "engine %d", i)
		for j := range per {
			_, ok := c.status(&txs[i][j])
			assert.False(t, ok, "engine %d txreq %d: waits for its engine's hardware", i, j)
		}
	}
	for i := 1; i < engines; i++ {
		_, err := dev.Engine(i).Process()
		require.NoError(t, err)
		for j := range per {
			st, ok := c.status(&txs[i][j])
			assert.True(t, ok)
			assert.Equal(t, StatusOK, st, "engine %d txreq %d", i, j)
		}
	}
	assert.EqualValues(t, engines*per, c.n.Load())
	assert.Zero(t, c.dup.Load())
}
