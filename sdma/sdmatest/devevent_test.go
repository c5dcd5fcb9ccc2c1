package sdmatest_test

import (
	"errors"
	"testing"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// callSink runs call from its Deliver, on the delivering engine's own goroutine, once, and
// sends call's error to res.
type callSink struct {
	call func() error
	res  chan error
}

func (s *callSink) Deliver(int, [][]byte) error {
	select {
	case s.res <- s.call():
	default:
	}
	return nil
}

// TestDeviceEventsFromEngineGoroutine: FreezeNotify, Freeze and Unfreeze called from a Sink on one
// engine's goroutine are refused with sdma.ErrInvalid and change nothing: every engine keeps its
// state. They raised the event on every other engine first and were refused only at the caller's,
// so FreezeNotify from engine 1's Sink returned ErrInvalid with engines 0 and 2 frozen (s80) and
// engine 1 running.
func TestDeviceEventsFromEngineGoroutine(t *testing.T) {
	for name, call := range map[string]func(*sdma.Device) error{
		"FreezeNotify":           func(dev *sdma.Device) error { return sdmatest.FreezeNotify(dev, false) },
		"FreezeNotify(linkDown)": func(dev *sdma.Device) error { return sdmatest.FreezeNotify(dev, true) },
		"Freeze":                 func(dev *sdma.Device) error { return sdmatest.Freeze(dev) },
		"Unfreeze":               func(dev *sdma.Device) error { return sdmatest.Unfreeze(dev) },
	} {
		t.Run(name, func(t *testing.T) {
			sink := &callSink{res: make(chan error, 1)}
			dev, err := sdma.NewDevice(sdma.Config{Engines: 3, RingSize: 64, Sink: sink})
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			sink.call = func() error { return call(dev) }
			var tx sdma.TxReq
			if err := tx.Init(0, 8, nil); err != nil {
				t.Fatal(err)
			}
			if err := tx.AddKVAddr(dev, make([]byte, 8)); err != nil {
				t.Fatal(err)
			}
			if err := dev.Engine(1).Send(nil, &tx, true); err != nil {
				t.Fatal(err)
			}
			if err := <-sink.res; !errors.Is(err, sdma.ErrInvalid) {
				t.Fatalf("from engine 1's Sink: %v, want ErrInvalid", err)
			}
			for i := range dev.NumEngines() {
				if s := sdmatest.EngineState(dev.Engine(i)); s != sdmatest.S99Running {
					t.Errorf("engine %d: %v after the refused call, want s99_running", i, s)
				}
			}
		})
	}
}
