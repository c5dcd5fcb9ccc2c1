package sdma_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestSetFaultsFromEngineGoroutine: a fault schedule driven by what the engine does (a Sink or a
// completion callback that sets the next plan) calls sdmatest.SetFaults on the engine's own
// goroutine, with the hardware lock held. SetFaults took the lock and waited for itself: the
// engine hung, and Close with it; it was then refused with ErrInvalid. It now returns nil at
// once, and the plan applies from the next pass: the next packet halts (HaltAt 1).
func TestSetFaultsFromEngineGoroutine(t *testing.T) {
	for _, where := range []string{"sink", "completion"} {
		t.Run(where, func(t *testing.T) {
			var dev *sdma.Device
			var got atomic.Pointer[error]
			try := func() {
				if got.Load() == nil {
					err := sdmatest.SetFaults(dev.Engine(0), sdmatest.FaultPlan{HaltAt: 1})
					got.Store(&err)
				}
			}
			var sink sdma.Sink = sdma.SinkFunc(func(int, [][]byte) error {
				if where == "sink" {
					try()
				}
				return nil
			})
			var err error
			dev, err = sdma.NewDevice(sdma.Config{RingSize: 64, Sink: sink})
			require.NoError(t, err)
			e := dev.Engine(0)
			done := make(chan sdma.Status, 2)
			payload := make([]byte, 64)
			send := func() {
				var tx sdma.TxReq
				require.NoError(t, tx.Init(0, len(payload), sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
					if where == "completion" {
						try()
					}
					done <- st
				})))
				require.NoError(t, tx.AddKVAddr(dev, payload))
				require.NoError(t, e.Send(nil, &tx, false))
			}
			send()
			select {
			case st := <-done:
				require.Equal(t, sdma.StatusOK, st)
			case <-time.After(10 * time.Second):
				t.Fatal("SetFaults from the engine's goroutine hung the engine") // (Close would hang too)
			}
			perr := got.Load()
			require.NotNil(t, perr)
			require.NoError(t, *perr, "SetFaults from the engine's goroutine")
			// The plan applies from the next pass: the next packet halts. (That HaltAt halts once is
			// TestSetFaultsUnderProcessAndPoll's: here a send right after the halt may find the
			// engine still recovering.)
			send()
			select {
			case st := <-done:
				require.Equal(t, sdma.StatusAborted, st)
			case <-time.After(10 * time.Second):
				t.Fatal("packet did not complete")
			}
			require.EqualValues(t, 1, e.Stats().Faults)
			var h *sdma.HaltError
			require.ErrorAs(t, e.HaltCause(), &h)
			require.Contains(t, h.Detail, "HaltAt")
			require.NoError(t, dev.Close())
		})
	}
}

// TestInjectedMemReadHaltHasNoFault: HaltError's doc promised the mapper's *dma.Fault for every
// CauseMemRead halt; an injected one (InjectHalt, a FaultPlan) has none, a real read fault has
// it. The doc now says so; this holds both halves.
func TestInjectedMemReadHaltHasNoFault(t *testing.T) {
	fi := dma.NewFaultInjector(nil)
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Mapper: fi})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	require.NoError(t, sdmatest.InjectHalt(e, sdma.CauseMemRead))
	var h *sdma.HaltError
	require.ErrorAs(t, e.HaltCause(), &h)
	require.Equal(t, sdma.CauseMemRead, h.Cause)
	require.Nil(t, h.Err)
	require.NotErrorIs(t, e.HaltCause(), dma.ErrFault)

	var tx sdma.TxReq
	buf := make([]byte, 16)
	require.NoError(t, tx.Init(0, len(buf), nil))
	require.NoError(t, tx.AddKVAddr(dev, buf))
	require.NoError(t, e.Send(nil, &tx, false))
	fi.FailTranslate(true)
	_, err = e.Process()
	fi.FailTranslate(false)
	require.ErrorAs(t, err, &h)
	require.Equal(t, sdma.CauseMemRead, h.Cause)
	require.ErrorIs(t, err, dma.ErrFault)
}

// TestStopCompletesDeliveredOK: Stop's doc said everything in flight completes aborted; as the
// kernel's sw clean (sdma_make_progress before sdma_flush) and as Close, a txreq whose packet
// the hardware already sent completes StatusOK (visible when its completion had not run yet:
// CompletePoll), the rest StatusAborted. The doc now says so; this holds the behaviour.
func TestStopCompletesDeliveredOK(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Completion: sdma.CompletePoll})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	var sts []sdma.Status
	send := func() {
		var tx sdma.TxReq
		buf := make([]byte, 32)
		require.NoError(t, tx.Init(0, len(buf), sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) { sts = append(sts, st) })))
		require.NoError(t, tx.AddKVAddr(dev, buf))
		require.NoError(t, e.Send(nil, &tx, false))
	}
	send()
	n, err := e.Process()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	send() // in the ring, not sent
	require.Empty(t, sts, "CompletePoll: nothing completes before a Poll")
	require.NoError(t, e.Stop())
	require.Equal(t, []sdma.Status{sdma.StatusOK, sdma.StatusAborted}, sts)
}

// TestSetFaultsFromHostedCallback: a completion that Stop's sw clean runs on the caller's own
// goroutine (hwMu held) calls SetFaults: it waited for itself, was then refused with ErrInvalid,
// and now returns nil, the plan applying from the next pass (after Start: its first packet halts).
func TestSetFaultsFromHostedCallback(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	got := make(chan error, 1)
	var tx sdma.TxReq
	buf := make([]byte, 32)
	require.NoError(t, tx.Init(0, len(buf), sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) {
		got <- sdmatest.SetFaults(e, sdmatest.FaultPlan{HaltAt: 1})
	})))
	require.NoError(t, tx.AddKVAddr(dev, buf))
	require.NoError(t, e.Send(nil, &tx, false))
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop() }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Stop hung: SetFaults in its sw clean's callback waited for Stop's lock")
	}
	require.NoError(t, <-got)
	require.NoError(t, e.Start())
	var tx2 sdma.TxReq
	require.NoError(t, tx2.Init(0, len(buf), nil))
	require.NoError(t, tx2.AddKVAddr(dev, buf))
	require.NoError(t, e.Send(nil, &tx2, false))
	n, err := e.Process()
	var h *sdma.HaltError
	require.ErrorAs(t, err, &h)
	require.Contains(t, h.Detail, "HaltAt")
	require.Zero(t, n)
}
