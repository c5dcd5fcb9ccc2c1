package sdma

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCallbackCloseFromStopDeadlocks: a completion callback run by Stop's sw clean (on Stop's
// caller's goroutine, with hwMu held) calls Close: Close waits for the engine's goroutine, which
// waits for hwMu, and Stop never returns. Close's doc said only callbacks run by Process or Poll
// deadlock so; it now names every call that runs callbacks. Skipped: refusing such a Close with
// ErrInvalid needs the locks to know their holder's goroutine (a design call).
func TestCallbackCloseFromStopDeadlocks(t *testing.T) {
	t.Skip("bug: Close from a completion callback that Stop's (or Start's, InjectHalt's, ProgressSchedule's, SendWait's) pass runs deadlocks instead of returning ErrInvalid; documented now")
	dev, err := NewDevice(Config{Manual: true})
	require.NoError(t, err)
	e := dev.Engine(0)
	closeErr := make(chan error, 1)
	var tx TxReq
	require.NoError(t, tx.Init(0, 64, CompleterFunc(func(*TxReq, Status) { closeErr <- dev.Close() })))
	require.NoError(t, tx.AddKVAddr(dev, engTestPattern(64, 1)))
	require.NoError(t, e.Send(nil, &tx, false))
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop() }() // the sw clean aborts tx: its callback runs here
	select {
	case err := <-stopped:
		require.NoError(t, err)
		require.ErrorIs(t, <-closeErr, ErrInvalid)
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("Close from a callback that Stop runs did not return")
	}
}
