package sdma

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlushResendFromCallbackDoesNotLoop: a completion callback that resends its txreq when it
// completes aborted (a retransmit policy) on a stopped engine: each resend goes to the flush list
// (ErrNotRunning). A flush must complete the txreqs that were on the list when it began (hfi1:
// sdma_flush splices the flush list once; what is sent meanwhile waits for the flush worker's
// next run), so that the call running it returns. Before the fix flushLocked looped until the
// list stayed empty: one Poll (or Stop's sw clean, holding the engine's locks) ran for as long as
// the callback resent, forever for a policy without a cap (the test caps it at 1000).
func TestFlushResendFromCallbackDoesNotLoop(t *testing.T) {
	engTestNoLeak(t)
	dev, err := NewDevice(Config{Manual: true})
	require.NoError(t, err)
	e := dev.Engine(0)
	buf := engTestPattern(64, 1)
	var tx TxReq
	resends := 0
	var cb CompleterFunc
	cb = func(tx *TxReq, st Status) {
		if st != StatusAborted || resends >= 1000 {
			return
		}
		resends++
		// Not require: a callback must not call runtime.Goexit (t.FailNow).
		err := tx.Init(0, len(buf), cb)
		if err == nil {
			err = tx.AddKVAddr(dev, buf) // ErrClosed once Close began: tx is cleaned
		}
		if err == nil {
			err = e.Send(nil, tx, false)
		}
		switch {
		case errors.Is(err, ErrNotRunning): // onto the flush list again
		case errors.Is(err, ErrClosed):
			_ = tx.Clean()
		default:
			t.Errorf("resend: %v", err)
		}
	}
	require.NoError(t, e.Stop())
	require.NoError(t, tx.Init(0, len(buf), cb))
	require.NoError(t, tx.AddKVAddr(dev, buf))
	require.ErrorIs(t, e.Send(nil, &tx, false), ErrNotRunning) // onto the flush list
	e.Poll()                                                   // one flush: one abort, one resend
	require.Equal(t, 1, resends, "one flush completes what the list held when it began")
	e.Poll()
	require.Equal(t, 2, resends)
	require.NoError(t, dev.Close()) // its flush's resend is refused (ErrClosed) and cleaned
	require.Equal(t, 3, resends)
	require.Zero(t, e.flush.Len(), "Close leaves nothing on the flush list")
}
