package verbs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gosdma/gosdma/sdma"
	"go.uber.org/goleak"
)

// TestCrossLayerClosesHandedOffFromCallbacks: the way out that Device.Close's and sdma's
// Device.Close's docs give for two callbacks of two layers that close each other's layer at once
// (called there, each Close waits for the other's goroutine for ever): the Sink, run by the SDMA
// engine's goroutine and by the PIO context's chip goroutine at once, hands the verbs Device's
// Close (from the engine) and the SDMA device's Close (from the chip) each to a goroutine of its
// own and returns. Both Closes return nil, the sends return, and no goroutine is left.
func TestCrossLayerClosesHandedOffFromCallbacks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var d *Device
	var sd *sdma.Device
	var engOnce, chipOnce sync.Once
	var both sync.WaitGroup // the two callbacks are in the Sink at once
	both.Add(2)
	closes := make(chan error, 2)
	sink := sdma.SinkFunc(func(engine int, _ [][]byte) error {
		if engine < sd.NumEngines() {
			engOnce.Do(func() { both.Done(); both.Wait(); go func() { closes <- d.Close() }() })
		} else {
			chipOnce.Do(func() { both.Done(); both.Wait(); go func() { closes <- sd.Close() }() })
		}
		return nil
	})
	var err error
	if sd, err = sdma.NewDevice(sdma.Config{Sink: sink}); err != nil {
		t.Fatal(err)
	}
	if d, err = New(Config{SDMA: sd}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sends sync.WaitGroup
	for _, n := range []int{64, 1000} { // one by PIO, one by SDMA, on flows of their own
		f := d.NewFlow(uint32(n), 0)
		sends.Add(1)
		go func() {
			defer sends.Done()
			if _, err := f.Send(ctx, [][]byte{make([]byte, n)}, nil); err != nil {
				t.Errorf("Send of %d bytes: %v", n, err)
			}
		}()
	}
	for range 2 {
		select {
		case err := <-closes:
			if err != nil {
				t.Errorf("a Close handed off from the Sink: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("the Closes handed off from the Sink did not return in a minute")
		}
	}
	sends.Wait() // bounded by ctx
}
