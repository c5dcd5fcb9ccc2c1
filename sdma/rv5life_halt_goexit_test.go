package sdma

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDirectProcessHaltCallbackGoexit: a direct Process of an engine with a goroutine halts (a
// planned fault) and a completion callback of the halt's recovery calls runtime.Goexit: the
// pass's locks are released, and a Close returns with every txreq completed exactly once; so does
// a Stop and Start before it, after which the engine runs again.
func TestDirectProcessHaltCallbackGoexit(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "Close", true: "StopStart"}[restart], func(t *testing.T) {
			dev, err := NewDevice(Config{Wait: WaitPark})
			require.NoError(t, err)
			e := dev.Engine(0)
			directCases()[0].setup(t, e)
			require.NoError(t, e.setFaults(faultPlan{HaltAt: 4}))
			c := &completions{}
			txs := goexitTxs(t, dev, e, nil, 8, goexitOnce(c))
			ended := runReturned(func() { _, _ = e.Process() })
			require.False(t, dumpGuard(t, ended, "Process's goroutine did not end"), "the callback did not exit")
			require.EqualValues(t, 1, c.n.Load())
			t.Logf("state after the exit: %v", e.state())
			n := len(txs)
			if restart {
				errs := make(chan error, 2)
				go func() { errs <- e.Stop(); errs <- e.Start() }()
				require.NoError(t, dumpGuard(t, errs, "Stop hung"))
				require.NoError(t, dumpGuard(t, errs, "Start hung"))
				require.EqualValues(t, n, c.n.Load(), "every txreq completes after Stop and Start")
				e.parks = true // a producer again: ring the doorbell
				n += len(goexitTxs(t, dev, e, nil, 4, c))
				done := make(chan struct{})
				go func() {
					defer close(done)
					for c.n.Load() < int64(n) {
						runtime.Gosched()
					}
				}()
				dumpGuard(t, done, "the engine did not run again")
			}
			closed := make(chan error, 1)
			go func() { closed <- dev.Close() }()
			require.NoError(t, dumpGuard(t, closed, "Close did not return"))
			require.EqualValues(t, n, c.n.Load(), "every txreq completes")
			require.Zero(t, c.dup.Load(), "none twice")
		})
	}
}
