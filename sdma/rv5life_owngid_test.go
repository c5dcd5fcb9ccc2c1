package sdma

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCallbackCloseOnEngineGoroutineGid: a completion callback and a Sink on the engine's own
// goroutine call Close, Shutdown and Stop: each is refused with ErrInvalid (it would wait for
// itself), and where the build has getg the refusal costs no runtime.Stack (goid): the check
// compares runtime g's (gid). Without getg (purego, other ports) the same answers come from the
// goroutine ids.
func TestCallbackCloseOnEngineGoroutineGid(t *testing.T) {
	var dev *Device
	var sinkCalls atomic.Int32
	sinkErrs := make(chan [3]error, 1)
	sink := SinkFunc(func(int, [][]byte) error {
		if sinkCalls.Add(1) == 1 {
			sinkErrs <- [3]error{dev.Close(), dev.Shutdown(context.Background()), dev.Engine(0).Stop()}
		}
		return nil
	})
	dev, err := NewDevice(Config{Sink: sink})
	require.NoError(t, err)
	e := dev.Engine(0)
	for i := 0; e.hwGid.Load() == 0; i++ {
		require.Less(t, i, 1<<24, "the engine's goroutine never started")
		runtime.Gosched()
	}
	before := goidCalls.Load()
	var calls atomic.Int32
	errs := make(chan [3]error, 1)
	c := &completions{}
	cb := CompleterFunc(func(tx *TxReq, st Status) {
		c.Complete(tx, st)
		if calls.Add(1) == 1 {
			errs <- [3]error{dev.Close(), dev.Shutdown(context.Background()), e.Stop()}
		}
	})
	txs := goexitTxs(t, dev, e, nil, 4, cb)
	for _, got := range [][3]error{dumpGuard(t, errs, "no callback ran"), dumpGuard(t, sinkErrs, "the sink never ran")} {
		for i, op := range []string{"Close", "Shutdown", "Stop"} {
			require.ErrorIs(t, got[i], ErrInvalid, op)
			require.ErrorContains(t, got[i], "own goroutine", op)
		}
	}
	if haveGetg {
		require.Equal(t, before, goidCalls.Load(), "the refusals looked up goroutine ids (runtime.Stack) where getg works")
	}
	require.True(t, e.Running())
	closed := make(chan error, 1)
	go func() { closed <- dev.Close() }()
	require.NoError(t, dumpGuard(t, closed, "Close did not return"))
	require.EqualValues(t, len(txs), c.n.Load())
	require.Zero(t, c.dup.Load())
}

// TestOwnGoroutineForgottenAtExit: once an engine's goroutine has ended (Close), its identity is
// dropped, so a later goroutine that the runtime gives the same g (getg builds) is not taken for
// it: Close, Shutdown and Stop of the closed device from many fresh goroutines answer as on any
// closed device (nil, nil, ErrClosed), never ErrInvalid.
func TestOwnGoroutineForgottenAtExit(t *testing.T) {
	dev, err := NewDevice(Config{Engines: 4})
	require.NoError(t, err)
	require.NoError(t, dev.Close())
	for _, e := range dev.engines {
		require.Zero(t, e.hwGid.Load(), "engine %d's goroutine still named after it ended", e.idx)
	}
	var wg sync.WaitGroup
	var bad atomic.Value
	for i := 0; i < 256; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := dev.Close(); err != nil {
				bad.Store("Close: " + err.Error())
			}
			if err := dev.Engine(i % 4).Stop(); err != ErrClosed {
				bad.Store("Stop: " + errString(err))
			}
		}()
	}
	wg.Wait()
	require.Nil(t, bad.Load())
}
