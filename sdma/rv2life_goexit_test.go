package sdma

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStopGoexitThenStopStart: a completion callback's runtime.Goexit in a Stop's sw clean; the
// docs say the next Stop and Start clean up. Every txreq must complete exactly once after that
// Stop and Start (without a Close), and the engine must run and complete new packets.
func TestStopGoexitThenStopStart(t *testing.T) {
	type cfgCase struct {
		name string
		cfg  Config
	}
	type opCase struct {
		name string
		op   func(e *Engine) error
	}
	for _, oc := range []opCase{
		{"Stop", func(e *Engine) error { return e.Stop() }},
		{"InjectHalt", func(e *Engine) error { return e.injectHalt(CauseHalt) }},
	} {
		for _, tc := range []cfgCase{
			{"Manual", Config{Manual: true}},
			{"Poll", Config{Completion: CompletePoll}},
			{"ManualPoll", Config{Manual: true, Completion: CompletePoll}},
		} {
			t.Run(oc.name+"/"+tc.name, func(t *testing.T) {
				dev, err := NewDevice(tc.cfg)
				require.NoError(t, err)
				e := dev.Engine(0)
				c := &completions{}
				cb := goexitOnce(c)
				txs := goexitTxs(t, dev, e, nil, 16, cb)
				ended := runReturned(func() {
					_ = oc.op(e)
				})
				require.False(t, hangGuard(t, ended, "Stop's goroutine did not end"))
				require.EqualValues(t, 1, c.n.Load())
				errs := make(chan error, 1)
				go func() { errs <- e.Stop() }()
				require.NoError(t, hangGuard(t, errs, "second Stop hung"))
				go func() { errs <- e.Start() }()
				require.NoError(t, hangGuard(t, errs, "Start hung"))
				require.EqualValues(t, len(txs), c.n.Load(), "every txreq completes after Stop and Start")
				require.Zero(t, c.dup.Load())
				// The engine runs again.
				more := goexitTxs(t, dev, e, nil, 4, c)
				done := make(chan struct{})
				go func() {
					defer close(done)
					for c.n.Load() < int64(len(txs)+len(more)) && !t.Failed() {
						if tc.cfg.Manual {
							_, _ = e.Process()
						}
						e.Poll()
						runtime.Gosched()
					}
				}()
				hangGuard(t, done, "new packets did not complete")
				require.EqualValues(t, len(txs)+len(more), c.n.Load(), "new packets complete")
				closeGuarded(t, dev)
				require.EqualValues(t, len(txs)+len(more), c.n.Load())
				require.Zero(t, c.dup.Load())
			})
		}
	}
}

// TestCallerFlushGoexitRestFlushed: a completion callback's runtime.Goexit in a flush that a
// caller's Poll runs (a Manual engine, stopped, its sends on the flush list): the engine goes on,
// so the txreqs that flush took and did not complete must be completed by the next flush the
// engine runs (its next Poll or Process), not only by Close: their iowait drains before Close.
func TestCallerFlushGoexitRestFlushed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drive func(e *Engine)
	}{
		{"Poll", func(e *Engine) { e.Poll() }},
		{"Process", func(e *Engine) { _, _ = e.Process() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := NewDevice(Config{Manual: true, Completion: CompletePoll})
			require.NoError(t, err)
			e := dev.Engine(0)
			require.NoError(t, e.Stop())
			c := &completions{}
			cb := goexitOnce(c)
			var w IOWait
			w.Init(nil, nil, nil)
			txs := goexitTxs(t, dev, e, &w, 4, cb)
			ended := runReturned(func() {
				tc.drive(e)
			})
			require.False(t, hangGuard(t, ended, "the driving goroutine did not end"))
			require.EqualValues(t, 1, c.n.Load(), "the flush stopped at the first")
			for i := 0; i < 4; i++ {
				tc.drive(e)
			}
			require.EqualValues(t, len(txs), c.n.Load(), "the flush's rest completes at the engine's next flush, before Close")
			require.Zero(t, c.dup.Load())
			closeGuarded(t, dev)
			require.EqualValues(t, len(txs), c.n.Load())
		})
	}
}

// TestShutdownAfterProcessSinkGoexit: a Sink's runtime.Goexit under a caller's Process halts the
// engine (s50, no halt worker: it waits for Stop or Close) with its ring not empty. A Shutdown
// with no deadline must not wait for a drain that cannot come (as for an engine whose own
// goroutine is gone): it returns, and Close completes every txreq once.
func TestShutdownAfterProcessSinkGoexit(t *testing.T) {
	for _, manual := range []bool{true, false} {
		t.Run(map[bool]string{true: "Manual", false: "Goroutine"}[manual], func(t *testing.T) {
			sink := &goexitBatchSink{exit: "Deliver", at: 3}
			cfg := Config{Manual: manual, Sink: SinkFunc(sink.Deliver)}
			if !manual {
				cfg.Completion = CompletePoll
			}
			dev, err := NewDevice(cfg)
			require.NoError(t, err)
			e := dev.Engine(0)
			c := &completions{}
			var txs []*TxReq
			if !manual {
				e.hwMu.Lock() // the engine's goroutine waits: the caller's Process delivers
			}
			txs = goexitTxs(t, dev, e, nil, 12, c)
			ended := runReturned(func() {
				if !manual {
					e.hwMu.Unlock()
					// Process: its own hold of hwMu; the goroutine may take it first and exit
					// itself, which the test accepts (the engine is then gone).
				}
				_, _ = e.Process()
			})
			hangGuard(t, ended, "Process's goroutine did not end")
			require.False(t, e.Running())
			done := make(chan error, 1)
			go func() { done <- dev.Shutdown(context.Background()) }()
			require.NoError(t, hangGuard(t, done, "Shutdown waited for the ring of an engine halted by a Goexit"))
			require.EqualValues(t, len(txs), c.n.Load())
			require.Zero(t, c.dup.Load())
		})
	}
}

// TestShutdownAfterStopCleanGoexit: a completion callback's runtime.Goexit in Stop's sw clean
// leaves the engine down with its ring not cleaned; a Shutdown with no deadline must return
// (the engine is down: nothing drains it but a clean) and Close complete every txreq once.
func TestShutdownAfterStopCleanGoexit(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"Manual", Config{Manual: true}},
		{"Poll", Config{Completion: CompletePoll}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := NewDevice(tc.cfg)
			require.NoError(t, err)
			e := dev.Engine(0)
			c := &completions{}
			cb := goexitOnce(c)
			txs := goexitTxs(t, dev, e, nil, 16, cb)
			ended := runReturned(func() {
				_ = e.Stop()
			})
			require.False(t, hangGuard(t, ended, "Stop's goroutine did not end"))
			t.Logf("state after the exit: %v", e.state())
			done := make(chan error, 1)
			go func() { done <- dev.Shutdown(context.Background()) }()
			require.NoError(t, hangGuard(t, done, "Shutdown waited for the ring of an engine whose Stop's clean a Goexit cut short"))
			require.EqualValues(t, len(txs), c.n.Load())
			require.Zero(t, c.dup.Load())
		})
	}
}
