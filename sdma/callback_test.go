package sdma_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestCallbackPanicDoesNotWedgeEngine: a completion callback, a drained callback and a wakeup
// that panic, on a polled engine (the pass runs in Poll) and on an interrupt-driven one (the pass
// runs on the engine's goroutine): each panic is recovered and recorded (a *CallbackError,
// counted in the stats), the pass goes on, every other txreq completes exactly once, the next
// Poll, Drain and Close return, and nothing stays mapped.
func TestCallbackPanicDoesNotWedgeEngine(t *testing.T) {
	for _, mode := range []sdma.CompletionMode{sdma.CompletePoll, sdma.CompleteInterrupt} {
		t.Run("completion="+mode.String(), func(t *testing.T) {
			promNoLeak(t)
			iommu := promIOMMU(t)
			dev, err := sdma.NewDevice(sdma.Config{Mapper: iommu, RingSize: 64, Completion: mode})
			require.NoError(t, err)
			e := dev.Engine(0)
			ctx, cancel := context.WithTimeout(context.Background(), promHangGuard)
			defer cancel()

			var drainedPanics atomic.Int32
			var w sdma.IOWait
			w.Init(nil, nil, func(*sdma.IOWait) {
				drainedPanics.Add(1)
				panic("drained callback panics")
			})
			const n = 10
			led := newCloseLedger(n)
			txs := make([]sdma.TxReq, n)
			var l sdma.TxList
			buf := make([]byte, 64)
			for i := range txs {
				if i == 3 || i == 7 {
					i := i
					require.NoError(t, txs[i].Init(0, len(buf), sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) {
						led.done[i].Add(1)
						panic("completion callback panics")
					})))
					require.NoError(t, txs[i].AddKVAddr(dev, buf))
				} else {
					require.NoError(t, led.build(t, dev, &txs[i], i, buf))
				}
				l.PushBack(&txs[i])
			}
			// One SendList: the busy count rises by all ten before any completes, so the
			// drained callback runs once (ten Sends would race the interrupt-driven completions).
			sent, err := e.SendList(&w, &l)
			require.NoError(t, err)
			require.Equal(t, n, sent)
			poll := func() (panicked any) {
				defer func() { panicked = recover() }()
				e.Poll()
				return nil
			}
			promWait(t, "every txreq to complete", func() bool {
				if mode == sdma.CompletePoll {
					require.Nil(t, poll(), "a callback's panic escaped Poll")
				}
				for i := range txs {
					if led.done[i].Load() == 0 {
						return false
					}
				}
				return true
			})
			require.NoError(t, w.Drain(ctx), "the panicking callbacks' txreqs dropped the busy count")
			for i := range txs {
				assert.EqualValues(t, 1, led.done[i].Load(), "txreq %d completions", i)
			}
			// Drain's waiters are woken before the drained callback runs (iowait_drain_wakeup:
			// wake_up, then sdma_drained), so on the engine's goroutine (completion=interrupt)
			// the callback may run after Drain returned: wait for it, then require exactly one.
			promWait(t, "the drained callback", func() bool { return drainedPanics.Load() > 0 })
			assert.EqualValues(t, 1, drainedPanics.Load())
			// The drained callback's panic is recorded once it has unwound, which may be after
			// Drain returned; wait for the record so that the wakeup's below is the last one.
			promWait(t, "the drained panic's record", func() bool {
				var ce *sdma.CallbackError
				return errors.As(e.CallbackError(), &ce) && ce.Callback == "drained"
			})

			// A wakeup that panics.
			var woke atomic.Int32
			var pw sdma.IOWait
			pw.Init(nil, func(*sdma.IOWait, int) { woke.Add(1); panic("wakeup panics") }, nil)
			queued, err := e.QueueWait(&pw, 1, true)
			require.NoError(t, err)
			require.True(t, queued)
			var one sdma.TxReq
			oneLed := newCloseLedger(1)
			require.NoError(t, oneLed.build(t, dev, &one, 0, buf))
			require.NoError(t, e.Send(nil, &one, false))
			promWait(t, "the wakeup", func() bool {
				if mode == sdma.CompletePoll {
					require.Nil(t, poll(), "a wakeup's panic escaped Poll")
				}
				return woke.Load() > 0
			})
			// As for the drained callback: the wakeup's panic is recorded (and counted) once it
			// has unwound, which may be after the test saw it run.
			promWait(t, "the wakeup panic's record", func() bool {
				var ce *sdma.CallbackError
				return errors.As(e.CallbackError(), &ce) && ce.Callback == "wakeup"
			})

			st := e.Stats()
			assert.EqualValues(t, 4, st.CallbackPanics, "two completions, one drained, one wakeup")
			var ce *sdma.CallbackError
			require.ErrorAs(t, e.CallbackError(), &ce)
			assert.Equal(t, "wakeup", ce.Callback)
			assert.Equal(t, "wakeup panics", ce.Panic)
			assert.NotEmpty(t, ce.Stack)
			assert.Contains(t, ce.Error(), "wakeup panics")

			// The engine still runs, and Close returns.
			var more sdma.TxReq
			require.NoError(t, oneLed.build(t, dev, &more, 0, buf))
			require.NoError(t, e.SendWait(ctx, &more))
			require.NoError(t, dev.Close())
			assert.EqualValues(t, 2, oneLed.done[0].Load())
			assert.Zero(t, iommu.LiveCount(), "leak report: %v", iommu.Live())
		})
	}
}

// closeSink calls Close (or Stop, or InjectHalt) of its device from inside Deliver, once.
type closeSink struct {
	dev  *sdma.Device
	call string // "close", "stop" or "halt"
	once sync.Once
	err  chan error
}

func (s *closeSink) Deliver(engine int, _ [][]byte) error {
	s.once.Do(func() {
		switch s.call {
		case "stop":
			s.err <- s.dev.Engine(engine).Stop()
		case "halt":
			s.err <- sdmatest.InjectHalt(s.dev.Engine(engine), sdma.CauseHalt)
		default:
			s.err <- s.dev.Close()
		}
	})
	return nil
}

// TestCloseFromSinkOrCallbackRefused: Close, Shutdown or an Event (Stop) called from the engine's
// own goroutine (a Sink, a completion callback) would wait for that goroutine: it is refused with
// ErrInvalid and changes nothing; the device then runs on and a Close from outside works.
func TestCloseFromSinkOrCallbackRefused(t *testing.T) {
	for _, stop := range []string{"close", "stop", "halt"} {
		promNoLeak(t)
		sink := &closeSink{call: stop, err: make(chan error, 1)}
		dev, err := sdma.NewDevice(sdma.Config{RingSize: 64, Sink: sink})
		require.NoError(t, err)
		sink.dev = dev
		e := dev.Engine(0)
		ctx, cancel := context.WithTimeout(context.Background(), promHangGuard)
		led := newCloseLedger(3)
		var txs [3]sdma.TxReq
		buf := make([]byte, 64)
		require.NoError(t, led.build(t, dev, &txs[0], 0, buf))
		require.NoError(t, e.SendWait(ctx, &txs[0]))
		select {
		case err := <-sink.err:
			require.ErrorIs(t, err, sdma.ErrInvalid, stop)
			assert.Contains(t, err.Error(), "own goroutine")
		case <-ctx.Done():
			t.Fatalf("%s from the Sink deadlocked", stop)
		}
		require.True(t, e.Running(), "nothing changed")

		// From a completion callback.
		cbErr := make(chan error, 2)
		require.NoError(t, txs[1].Init(0, len(buf), sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) {
			cbErr <- dev.Close()
			sctx, scancel := context.WithTimeout(context.Background(), time.Second)
			cbErr <- dev.Shutdown(sctx)
			scancel()
		})))
		require.NoError(t, txs[1].AddKVAddr(dev, buf))
		require.NoError(t, e.SendWait(ctx, &txs[1]))
		for i := 0; i < 2; i++ {
			select {
			case err := <-cbErr:
				require.ErrorIs(t, err, sdma.ErrInvalid)
			case <-ctx.Done():
				t.Fatal("a Close from a callback deadlocked")
			}
		}
		require.NoError(t, led.build(t, dev, &txs[2], 2, buf))
		require.NoError(t, e.SendWait(ctx, &txs[2]), "the device runs on")
		require.NoError(t, dev.Close())
		assert.EqualValues(t, 1, led.done[2].Load())
		cancel()
	}
}
