package sdma

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDirectCallbackCloseRace: on engines with their own goroutine, producers send txreqs whose
// completion calls Close, Stop and Shutdown of their own device, while one goroutine drives the
// engine directly (Process, Poll), one runs Stop, Start and SetFaults, and the test closes the
// device from outside. Nothing deadlocks, the callbacks' calls are refused (ErrInvalid, or
// ErrClosed), and every txreq accepted completes exactly once.
func TestDirectCallbackCloseRace(t *testing.T) {
	race := callbackCloseRace{
		perProducer: 300,
		waitDone:    150,
		drivers: func(e *Engine) []func(int) {
			return []func(int){
				func(int) { // the direct caller
					_, _ = e.Process()
					e.Poll()
					runtime.Gosched()
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
					runtime.Gosched()
				},
			}
		},
		closeDev: func(t *testing.T, dev *Device) {
			closed := make(chan error, 1)
			go func() { closed <- dev.Close() }()
			require.NoError(t, dumpGuard(t, closed, "Close did not return"))
		},
	}
	for _, cfg := range []Config{{RingSize: 64}, {RingSize: 64, Completion: CompletePoll}, {RingSize: 64, Wait: WaitPark}} {
		for seed := 0; seed < 3; seed++ {
			race.run(t, cfg)
		}
	}
}
