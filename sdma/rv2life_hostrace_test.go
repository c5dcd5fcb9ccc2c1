package sdma

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHostedCallbackCloseRace: producers send txreqs whose completion calls Close, Stop and
// Shutdown of their own device, while other goroutines run Stop, Start, InjectHalt, SendWait and
// ProgressSchedule (the hosted calls, whose callbacks must be refused with ErrInvalid) and one
// closes the device from outside. Nothing deadlocks, no race, the callbacks' refusals are
// ErrInvalid or ErrClosed, and every txreq accepted completes exactly once.
//
// The producers retry a full ring (ErrBusy, or a cancelled SendWait's context.Canceled) and stop
// after 400 accepted each. Both matter: with 400 tries each, a full ring refused most of them
// (98 accepted of 800 in one run) and the wait for 200 completions spun forever (the hang once
// blamed on Close, seen under -race, purego and plain runs); with no bound, the producers fill
// the flush list faster than its callbacks (three refusals each, a goid lookup per refusal)
// complete it, and the Close that must complete all of it before returning took seconds (8 s
// for 28k txreqs on a loaded machine; more without getg), past closeGuarded's guard.
func TestHostedCallbackCloseRace(t *testing.T) {
	race := callbackCloseRace{
		perProducer: 400,
		sendWait:    true,
		waitDone:    200,
		drivers: func(e *Engine) []func(int) {
			return []func(int){func(i int) {
				switch i % 4 {
				case 0:
					_ = e.Stop()
				case 1:
					_ = e.Start()
				case 2:
					_ = e.injectHalt(CauseHalt)
				case 3:
					e.ProgressSchedule()
				}
			}}
		},
		closeDev: closeGuarded,
	}
	for _, cfg := range []Config{{RingSize: 64}} { // no direct Process or Poll: their callbacks may not call Close
		for seed := 0; seed < 4; seed++ {
			race.run(t, cfg)
		}
	}
}

// callbackCloseRace is the race TestHostedCallbackCloseRace and TestDirectCallbackCloseRace
// share: two producers send txreqs on engine 0 whose completion calls Close, Stop and Shutdown
// of their own device (each must be refused: ErrInvalid or ErrClosed) until perProducer are
// accepted each, retrying a full ring; each of drivers runs on its own goroutine, called with
// i = 0, 1, 2, … until the end; once waitDone txreqs have completed (or something went wrong),
// closeDev closes the device from outside. Every txreq accepted completes exactly once.
type callbackCloseRace struct {
	perProducer int   // txreqs each producer has accepted when it stops
	sendWait    bool  // every third send is a SendWait with a cancelled context (context.Canceled: no room, again)
	waitDone    int64 // completions before the device is closed
	drivers     func(e *Engine) []func(i int)
	closeDev    func(t *testing.T, dev *Device)
}

// run runs the race once on a new device of cfg.
func (r callbackCloseRace) run(t *testing.T, cfg Config) {
	t.Helper()
	dev, err := NewDevice(cfg)
	require.NoError(t, err)
	e := dev.Engine(0)
	var bad atomic.Value
	var done, sent atomic.Int64
	var seen sync.Map
	cb := CompleterFunc(func(tx *TxReq, st Status) {
		if _, dup := seen.LoadOrStore(tx, st); dup {
			bad.Store("completed twice")
		}
		done.Add(1)
		for _, err := range []error{dev.Close(), e.Stop(), dev.Shutdown(context.Background())} {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrClosed) {
				bad.Store("a callback's call: " + errString(err))
			}
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// At most perProducer accepted each (a bounded flush list), retrying a full ring:
			// the wait below for waitDone completions must not depend on the ring's room.
			for i := 0; i < r.perProducer; {
				select {
				case <-stop:
					return
				default:
				}
				tx := new(TxReq)
				buf := engTestPattern(64, byte(i))
				if tx.Init(0, len(buf), cb) != nil || tx.AddKVAddr(dev, buf) != nil {
					return // closed
				}
				var err error
				if r.sendWait && i%3 == 0 {
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					err = e.SendWait(ctx, tx)
				} else {
					err = e.Send(nil, tx, false)
				}
				switch {
				case err == nil, errors.Is(err, ErrNotRunning): // ErrNotRunning: flushed, completes aborted
					sent.Add(1)
					i++
				case errors.Is(err, ErrClosed):
					_ = tx.Clean()
					return
				case errors.Is(err, ErrBusy), r.sendWait && errors.Is(err, context.Canceled): // no room: again
					_ = tx.Clean()
					runtime.Gosched()
				default:
					bad.Store("a send: " + errString(err))
					return
				}
			}
		}()
	}
	for _, drive := range r.drivers(e) {
		engTestLoop(stop, &wg, drive)
	}
	for done.Load() < r.waitDone && bad.Load() == nil {
		runtime.Gosched()
	}
	r.closeDev(t, dev)
	close(stop)
	wg.Wait()
	require.Nil(t, bad.Load())
	require.Equal(t, sent.Load(), done.Load(), "every txreq accepted completes once")
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
