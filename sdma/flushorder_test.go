package sdma

import (
	"sync"
	"testing"

	"github.com/gosdma/gosdma/sdma/internal/sm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlushAbortsRingBeforeFlushList: with the engine out of s99 and txreqs still in its ring
// (frozen: e80_hw_freeze leaves the ring as it is until e81), a txreq sent meanwhile goes to the
// flush list (ErrNotRunning), and the flush that completes it aborted must complete the ring's
// txreqs first, in submission order (hfi1: sdma_flush, "the descq ring needs to be flushed first
// followed by the flush list", which the flush worker sdma_field_flush runs whenever the engine
// is not running).
func TestFlushAbortsRingBeforeFlushList(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var mu sync.Mutex
	var order []int
	var st []Status
	mk := func(id int) *TxReq {
		tx := new(TxReq)
		require.NoError(t, tx.Init(0, 8, CompleterFunc(func(_ *TxReq, s Status) {
			mu.Lock()
			order, st = append(order, id), append(st, s)
			mu.Unlock()
		})))
		require.NoError(t, tx.AddKVAddr(dev, make([]byte, 8)))
		return tx
	}
	require.NoError(t, e.Send(nil, mk(1), false)) // in the ring, not processed
	require.NoError(t, e.event(sm.E80HwFreeze, "test"))
	require.ErrorIs(t, e.Send(nil, mk(2), false), ErrNotRunning) // to the flush list
	e.Poll()                                                     // the flush worker
	_, _ = e.Process()
	mu.Lock()
	assert.Empty(t, order, "frozen with txreq 1 in the ring: the flush waits for the sw clean (package doc)")
	mu.Unlock()
	require.NoError(t, e.event(sm.E81HwFrozen, "test")) // the sw clean
	require.NoError(t, e.event(sm.E82HwUnfreeze, "test"))
	e.Poll()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{1, 2}, order, "completion order")
	assert.Equal(t, []Status{StatusAborted, StatusAborted}, st)
}
