package sdma

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dumpGuard waits for ch or fails the test with every goroutine's stack: a hang guard (a few
// seconds), not a timing assumption.
func dumpGuard[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("%s\n%s", what, buf[:runtime.Stack(buf, true)])
	}
	panic("unreachable")
}

// directCase is a direct Process or Poll of an engine with its own goroutine whose completion
// callbacks run on the caller's goroutine: setup makes the engine ready (its goroutine parked or
// done delivering), drive is the call.
type directCase struct {
	name  string
	cfg   Config
	setup func(t *testing.T, e *Engine)
	drive func(e *Engine)
}

func directCases() []directCase {
	return []directCase{
		{
			// The goroutine parks (WaitPark) and the test sends without the doorbell: the caller's
			// Process delivers, and its idle interrupt runs the completion pass (CompleteInterrupt).
			name: "Process", cfg: Config{Wait: WaitPark},
			setup: func(t *testing.T, e *Engine) {
				for i := 0; !e.hwSleeping.Load(); i++ {
					require.Less(t, i, 1<<22, "the engine's goroutine never parked")
					runtime.Gosched()
				}
				e.parks = false // the test is the only producer: no doorbell, the goroutine stays parked
			},
			drive: func(e *Engine) { _, _ = e.Process() },
		},
		{
			// The goroutine delivers; the completions wait for the caller's Poll.
			name: "Poll", cfg: Config{Completion: CompletePoll},
			setup: func(t *testing.T, e *Engine) {
				for i := 0; e.ring.HWHead() != e.ring.Tail(); i++ {
					require.Less(t, i, 1<<22, "the engine's goroutine never delivered")
					runtime.Gosched()
				}
			},
			drive: func(e *Engine) { e.Poll() },
		},
	}
}

// TestDirectCallbackGoexitGoroutineEngine: a completion callback that calls runtime.Goexit in a
// direct Process or Poll of an engine that has its own goroutine ends the caller's goroutine; the
// pass's locks must be released (the engine goes on, a Close returns), the Goexit recorded, and
// every txreq complete exactly once.
func TestDirectCallbackGoexitGoroutineEngine(t *testing.T) {
	for _, tc := range directCases() {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := NewDevice(tc.cfg)
			require.NoError(t, err)
			e := dev.Engine(0)
			tc.setup(t, e)
			var w IOWait
			var drained atomic.Int32
			w.Init(nil, nil, func(*IOWait) { drained.Add(1) })
			c := &completions{}
			txs := goexitTxs(t, dev, e, &w, 8, goexitOnce(c))
			if tc.name == "Poll" {
				tc.setup(t, e)
			}
			ended := runReturned(func() { tc.drive(e) })
			require.False(t, dumpGuard(t, ended, tc.name+"'s goroutine did not end"), "the callback did not exit")
			require.EqualValues(t, 1, c.n.Load(), "the pass stopped at the first")
			var ce *CallbackError
			require.ErrorAs(t, e.CallbackError(), &ce)
			require.True(t, ce.Goexit)
			// The engine goes on: the next Poll (or the goroutine) completes the rest.
			done := make(chan struct{})
			go func() {
				defer close(done)
				for c.n.Load() < int64(len(txs)) {
					e.Poll()
					runtime.Gosched()
				}
			}()
			dumpGuard(t, done, "the rest did not complete: a lock left held by the exited goroutine")
			closed := make(chan error, 1)
			go func() { closed <- dev.Close() }()
			require.NoError(t, dumpGuard(t, closed, "Close did not return"))
			require.EqualValues(t, len(txs), c.n.Load(), "every txreq completes")
			require.Zero(t, c.dup.Load(), "none twice")
			require.EqualValues(t, 1, drained.Load())
		})
	}
}

// TestDirectCallbackCloseGoroutineEngine: a completion callback that calls Close, Shutdown or
// Stop in a direct Process or Poll of an engine that has its own goroutine: each would wait for
// the locks its own goroutine holds, so each is refused with ErrInvalid (as from a callback that
// the engine's goroutine or a hosted call runs); the call returns, a Close afterwards returns, and
// every txreq completes exactly once.
func TestDirectCallbackCloseGoroutineEngine(t *testing.T) {
	for _, tc := range directCases() {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := NewDevice(tc.cfg)
			require.NoError(t, err)
			e := dev.Engine(0)
			tc.setup(t, e)
			errs := make(chan [3]error, 1)
			var calls atomic.Int32
			c := &completions{}
			cb := CompleterFunc(func(tx *TxReq, st Status) {
				c.Complete(tx, st)
				if calls.Add(1) == 1 {
					errs <- [3]error{dev.Close(), dev.Shutdown(context.Background()), e.Stop()}
				}
			})
			txs := goexitTxs(t, dev, e, nil, 8, cb)
			if tc.name == "Poll" {
				tc.setup(t, e)
			}
			ended := runReturned(func() { tc.drive(e) })
			require.True(t, dumpGuard(t, ended, tc.name+" did not return: a Close from its callback waited for itself"))
			got := dumpGuard(t, errs, "no callback ran")
			for i, op := range []string{"Close", "Shutdown", "Stop"} {
				require.ErrorIs(t, got[i], ErrInvalid, op)
			}
			require.True(t, e.Running(), "the refused calls changed nothing")
			closed := make(chan error, 1)
			go func() { closed <- dev.Close() }()
			require.NoError(t, dumpGuard(t, closed, "Close did not return"))
			require.EqualValues(t, len(txs), c.n.Load(), "every txreq completes")
			require.Zero(t, c.dup.Load(), "none twice")
			require.Zero(t, e.hosts.n.Load(), "no host left registered")
		})
	}
}

// TestDirectSinkCloseGoroutineEngine: a Sink that calls Close or Stop under a direct Process of
// an engine that has its own goroutine (hwMu held by the caller) is refused with ErrInvalid, not
// a deadlock.
func TestDirectSinkCloseGoroutineEngine(t *testing.T) {
	var dev *Device
	errs := make(chan [2]error, 1)
	var calls atomic.Int32
	sink := SinkFunc(func(int, [][]byte) error {
		if calls.Add(1) == 1 {
			errs <- [2]error{dev.Close(), dev.Engine(0).Stop()}
		}
		return nil
	})
	dev, err := NewDevice(Config{Wait: WaitPark, Sink: sink})
	require.NoError(t, err)
	e := dev.Engine(0)
	directCases()[0].setup(t, e)
	c := &completions{}
	txs := goexitTxs(t, dev, e, nil, 4, c)
	ended := runReturned(func() { _, _ = e.Process() })
	require.True(t, dumpGuard(t, ended, "Process did not return: a Close from its Sink waited for itself"))
	got := dumpGuard(t, errs, "the sink never ran")
	require.ErrorIs(t, got[0], ErrInvalid, "Close")
	require.ErrorIs(t, got[1], ErrInvalid, "Stop")
	closed := make(chan error, 1)
	go func() { closed <- dev.Close() }()
	require.NoError(t, dumpGuard(t, closed, "Close did not return"))
	require.EqualValues(t, len(txs), c.n.Load())
	require.Zero(t, c.dup.Load())
}
