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

// TestDirectCallbackCloseRace: on engines with their own goroutine, producers send txreqs whose
// completion calls Close, Stop and Shutdown of their own device, while one goroutine drives the
// engine directly (Process, Poll), one runs Stop, Start and SetFaults, and the test closes the
// device from outside. Nothing deadlocks, the callbacks' calls are refused (ErrInvalid, or
// ErrClosed), and every txreq accepted completes exactly once.
func TestDirectCallbackCloseRace(t *testing.T) {
	for _, cfg := range []Config{{RingSize: 64}, {RingSize: 64, Completion: CompletePoll}, {RingSize: 64, Wait: WaitPark}} {
		for seed := 0; seed < 3; seed++ {
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
					for i := 0; i < 300; {
						select {
						case <-stop:
							return
						default:
						}
						tx := new(TxReq)
						buf := engTestPattern(64, byte(i))
						if tx.Init(0, len(buf), cb) != nil || tx.AddKVAddr(dev, buf) != nil {
							return
						}
						switch err := e.Send(nil, tx, false); {
						case err == nil, errors.Is(err, ErrNotRunning):
							sent.Add(1)
							i++
						case errors.Is(err, ErrClosed):
							_ = tx.Clean()
							return
						case errors.Is(err, ErrBusy):
							_ = tx.Clean()
							runtime.Gosched()
						default:
							bad.Store("a send: " + errString(err))
							return
						}
					}
				}()
			}
			drivers := []func(i int){
				func(int) { // the direct caller
					_, _ = e.Process()
					e.Poll()
				},
				func(i int) { // the events and the fault plan
					switch i % 3 {
					case 0:
						_ = e.Stop()
					case 1:
						_ = e.Start()
					case 2:
						_ = e.setFaults(faultPlan{HaltRate: 0.01, Seed: uint64(i)})
					}
				},
			}
			for _, drive := range drivers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						drive(i)
						runtime.Gosched()
					}
				}()
			}
			for done.Load() < 150 && bad.Load() == nil {
				runtime.Gosched()
			}
			closed := make(chan error, 1)
			go func() { closed <- dev.Close() }()
			require.NoError(t, dumpGuard(t, closed, "Close did not return"))
			close(stop)
			wg.Wait()
			require.Nil(t, bad.Load())
			require.Equal(t, sent.Load(), done.Load(), "every txreq accepted completes once")
		}
	}
}
