package sdmatest_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// A fault schedule beside a sender: halts, Stop/Start, freezes and idle halts, while txreqs
// go out. Each accepted txreq (nil, or ErrNotRunning: flushed) completes exactly once, with
// StatusOK or StatusAborted, by the time Close returns.
func ExampleChaos() {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2})
	if err != nil {
		panic(err)
	}
	var stop atomic.Bool
	var chaos sync.WaitGroup
	schedule := sdmatest.Chaos{Rand: rand.New(rand.NewPCG(1, 2))}
	if err := schedule.Run(dev, &stop, &chaos); err != nil {
		panic(err)
	}

	var completions, accepted atomic.Int64
	cb := sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) { completions.Add(1) })
	for i := range 200 {
		tx := new(sdma.TxReq)
		_ = tx.Init(0, 8, cb)
		_ = tx.AddKVAddr(dev, make([]byte, 8))
		for {
			err := dev.Engine(i%2).Send(nil, tx, false)
			if errors.Is(err, sdma.ErrBusy) {
				continue // the ring is full: tx is still ours
			}
			if err == nil || errors.Is(err, sdma.ErrNotRunning) {
				accepted.Add(1)
			}
			break
		}
	}
	stop.Store(true)
	chaos.Wait()
	_ = dev.Close()
	fmt.Println(accepted.Load() == 200, completions.Load() == accepted.Load())
	// Output:
	// true true
}
