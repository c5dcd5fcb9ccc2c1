package sdmatest_test

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// Manual engines driven in the background while the test's goroutine sends and waits.
func ExampleDriveEngines() {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Manual: true, Completion: sdma.CompletePoll})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	var stop atomic.Bool
	var drivers sync.WaitGroup
	sdmatest.DriveEngines(dev, true, &stop, &drivers)

	done := make(chan sdma.Status, 2)
	for i := range 2 {
		tx := new(sdma.TxReq)
		_ = tx.Init(0, 8, sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) { done <- st }))
		_ = tx.AddKVAddr(dev, make([]byte, 8))
		if err := dev.Engine(i).Send(nil, tx, false); err != nil {
			fmt.Println("send:", err)
		}
	}
	fmt.Println(<-done, <-done)
	stop.Store(true)
	drivers.Wait()
	// Output:
	// ok ok
}
