package sdma

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/sdma/internal/sm"
	"github.com/stretchr/testify/require"
)

// TestManualDirectCallbackClose: a completion callback that calls Close, Shutdown or Stop inside
// a direct Process (its idle interrupt's pass) or Poll of a Manual engine is refused with
// ErrInvalid, as on an engine with a goroutine, and nothing changes: the engine goes on and every
// txreq completes once. Before, those passes recorded no caller and Close waited for the lock its
// own goroutine held (Process and Poll never returned). The caller is known from hwMu itself
// (ticketLock.heldBy) where the build has getg, and from its stack elsewhere (inManualPass).
func TestManualDirectCallbackClose(t *testing.T) {
	for _, poll := range []bool{false, true} {
		cfg := Config{Manual: true}
		if poll {
			cfg.Completion = CompletePoll
		}
		dev, err := NewDevice(cfg)
		require.NoError(t, err)
		e := dev.Engine(0)
		errs := make(chan [3]error, 1)
		var calls atomic.Int32
		c := &completions{}
		cb := CompleterFunc(func(tx *TxReq, st Status) {
			c.Complete(tx, st)
			if calls.Add(1) == 1 {
				errs <- [3]error{dev.Close(), dev.Shutdown(context.Background()), e.Stop()}
			}
		})
		txs := goexitTxs(t, dev, e, nil, 4, cb)
		ended := runReturned(func() {
			_, _ = e.Process()
			e.Poll()
		})
		require.True(t, dumpGuard(t, ended, "Process/Poll did not return: a Close from its callback waited for itself"))
		got := dumpGuard(t, errs, "no callback ran")
		for i, op := range []string{"Close", "Shutdown", "Stop"} {
			require.ErrorIs(t, got[i], ErrInvalid, op)
		}
		require.EqualValues(t, len(txs), c.n.Load(), "poll %v", poll)
		requireManualGoesOn(t, dev, e, c)
		closeGuarded(t, dev)
		require.EqualValues(t, len(txs)+1, c.n.Load())
		require.Zero(t, c.dup.Load())
	}
}

// requireManualGoesOn checks that a refused call changed nothing: Manual engine e still runs and
// completes one more txreq (counted by c) through Process and Poll.
func requireManualGoesOn(t *testing.T, dev *Device, e *Engine, c *completions) {
	t.Helper()
	require.Equal(t, sm.S99Running, e.state())
	n := c.n.Load()
	goexitTxs(t, dev, e, nil, 1, c)
	ended := runReturned(func() {
		_, _ = e.Process()
		e.Poll()
	})
	require.True(t, dumpGuard(t, ended, "Process/Poll did not return"))
	require.EqualValues(t, n+1, c.n.Load())
}

// TestManualDirectSinkClose: the same calls from the Sink that a Manual engine's Process runs
// (hwMu held) are refused, and every txreq completes once.
func TestManualDirectSinkClose(t *testing.T) {
	var dev *Device
	errs := make(chan [3]error, 1)
	var calls atomic.Int32
	sink := SinkFunc(func(int, [][]byte) error {
		if calls.Add(1) == 1 {
			errs <- [3]error{dev.Close(), dev.Shutdown(context.Background()), dev.Engine(0).Stop()}
		}
		return nil
	})
	dev, err := NewDevice(Config{Manual: true, Sink: sink})
	require.NoError(t, err)
	e := dev.Engine(0)
	c := &completions{}
	txs := goexitTxs(t, dev, e, nil, 4, c)
	ended := runReturned(func() { _, _ = e.Process() })
	require.True(t, dumpGuard(t, ended, "Process did not return: a Close from its Sink waited for itself"))
	got := dumpGuard(t, errs, "the sink never ran")
	for i, op := range []string{"Close", "Shutdown", "Stop"} {
		require.ErrorIs(t, got[i], ErrInvalid, op)
	}
	require.EqualValues(t, len(txs), c.n.Load())
	requireManualGoesOn(t, dev, e, c)
	closeGuarded(t, dev)
	require.EqualValues(t, len(txs)+1, c.n.Load())
	require.Zero(t, c.dup.Load())
}

// TestManualDirectCallbackStopOther: a callback of engine 0's direct Poll that stops engine 1 of
// the same Manual device (whose lock nobody holds) is not refused: the refusal is for the
// caller's own pass only.
func TestManualDirectCallbackStopOther(t *testing.T) {
	dev, err := NewDevice(Config{Manual: true, Engines: 2, Completion: CompletePoll})
	require.NoError(t, err)
	e0, e1 := dev.Engine(0), dev.Engine(1)
	errs := make(chan error, 1)
	var calls atomic.Int32
	c := &completions{}
	cb := CompleterFunc(func(tx *TxReq, st Status) {
		c.Complete(tx, st)
		if calls.Add(1) == 1 {
			errs <- e1.Stop()
		}
	})
	txs := goexitTxs(t, dev, e0, nil, 2, cb)
	ended := runReturned(func() {
		_, _ = e0.Process()
		e0.Poll()
	})
	require.True(t, dumpGuard(t, ended, "Process/Poll did not return"))
	require.NoError(t, dumpGuard(t, errs, "no callback ran"))
	require.NotEqual(t, sm.S99Running, e1.state())
	require.Equal(t, sm.S99Running, e0.state())
	closeGuarded(t, dev)
	require.EqualValues(t, len(txs), c.n.Load())
	require.Zero(t, c.dup.Load())
}
