package sdmatest

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/sdma"
)

// DriveEngines starts one goroutine per engine of dev that runs the engine's completion pass
// (Engine.Poll) and, with manual (dev's engines are Manual), its hardware pass (Engine.Process)
// over and over until stop is set, sleeping 10 µs after a round that did nothing: the driver a
// test of CompletePoll or Manual engines needs beside its senders. Each goroutine is counted in
// wg (Add before it starts, Done when it returns): set stop, then wg.Wait, before closing dev.
// Process and Poll errors (a closed device) are ignored; the loop ends only at stop.
func DriveEngines(dev *sdma.Device, manual bool, stop *atomic.Bool, wg *sync.WaitGroup) {
	for i := range dev.NumEngines() {
		wg.Add(1)
		go func(e *sdma.Engine) {
			defer wg.Done()
			for !stop.Load() {
				n := 0
				if manual {
					n, _ = e.Process()
				}
				if e.Poll()+n == 0 {
					time.Sleep(10 * time.Microsecond)
				}
			}
		}(dev.Engine(i))
	}
}
