package sdma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlushWorkerWakesWaiters: the flush worker of an engine that is not running (hfi1:
// sdma_field_flush → sdma_flush) completes the flush list aborted and then wakes every waiter
// parked on the engine, as the sw clean does. A waiter queued on a stopped engine (QueueWait) is
// woken by the flush of a txreq sent meanwhile, not only by the next Start.
func TestFlushWorkerWakesWaiters(t *testing.T) {
	for _, poll := range []bool{false, true} {
		dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
		e := dev.Engine(0)
		require.NoError(t, e.Stop())
		woke := 0
		var w IOWait
		w.Init(nil, func(*IOWait, int) { woke++ }, nil)
		ok, err := e.QueueWait(&w, 1, true)
		require.NoError(t, err)
		require.True(t, ok)
		var c completions
		var tx TxReq
		engTestBuild(t, dev, &tx, 0, make([]byte, 8), &c)
		require.ErrorIs(t, e.Send(nil, &tx, false), ErrNotRunning)
		if poll {
			e.Poll()
		} else {
			_, _ = e.Process() // ErrNotRunning: the engine is stopped; the flush runs all the same
		}
		st, done := c.status(&tx)
		require.True(t, done)
		require.Equal(t, StatusAborted, st)
		require.Equal(t, 1, woke, "poll=%v: sdma_flush wakes the waiters", poll)
		require.False(t, e.Waiting(&w))
	}
}
