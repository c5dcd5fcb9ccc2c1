package sdma_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// sizedSink takes engine numbers 0..lanes-1 and says so (Engines, as udpsink.Sink); it refuses
// a packet of any other engine, as udpsink.Sink does (ErrEngine: "engine 1, sink built for 1").
type sizedSink struct{ lanes int }

func (s *sizedSink) Engines() int { return s.lanes }

func (s *sizedSink) Deliver(engine int, _ [][]byte) error {
	if engine < 0 || engine >= s.lanes {
		return fmt.Errorf("engine %d, sink built for %d", engine, s.lanes)
	}
	return nil
}

// panickySizedSink's Engines panics (a sink's bug).
type panickySizedSink struct{}

func (panickySizedSink) Engines() int                { panic("engines: boom") }
func (panickySizedSink) Deliver(int, [][]byte) error { return nil }

// lostOnLastEngine sends one packet on dev's last engine and returns how it completed and the
// engine's sink errors: what a device over a sink too small for it does to a packet.
func lostOnLastEngine(t *testing.T, dev *sdma.Device) (sdma.Status, uint64) {
	t.Helper()
	e := dev.Engine(dev.NumEngines() - 1)
	done := make(chan sdma.Status, 1)
	var tx sdma.TxReq
	if err := tx.Init(0, 8, sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) { done <- st })); err != nil {
		t.Fatal(err)
	}
	if err := tx.AddBytes(dev, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if err := e.SendWait(context.Background(), &tx); err != nil {
		t.Fatal(err)
	}
	st := <-done
	return st, e.Stats().SinkErrors
}

// TestNewDeviceRefusesSinkWithFewerEngines: a sink that says how many engine numbers it takes
// (an Engines method, as udpsink.Sink has) and takes fewer than Config.Engines is refused by
// NewDevice, a *ConfigError for Sink (ErrInvalid) naming both sizes, also through the
// sdmatest wrappers that forward it. NewDevice took it, and every packet of the engines past it
// was lost in silence: SendWait returned nil, the txreq completed OK, and only the engine's
// SinkErrors told. A sink with enough engine numbers, one without the method, and a wrapper over
// one without it are taken as before.
func TestNewDeviceRefusesSinkWithFewerEngines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engines int
		sink    func() sdma.Sink
		lanes   int // the sink's Engines, for a refusal's message
		ok      bool
	}{
		{"1 lane, 2 engines", 2, func() sdma.Sink { return &sizedSink{1} }, 1, false},
		{"3 lanes, 4 engines", 4, func() sdma.Sink { return &sizedSink{3} }, 3, false},
		{"0 lanes, 1 engine", 1, func() sdma.Sink { return &sizedSink{0} }, 0, false},
		{"0 lanes, Engines 0 (1 engine)", 0, func() sdma.Sink { return &sizedSink{0} }, 0, false},
		{"1 lane, Engines 0 (1 engine)", 0, func() sdma.Sink { return &sizedSink{1} }, 1, true},
		{"FaultSink over 1 lane, 2 engines", 2, func() sdma.Sink { return &sdmatest.FaultSink{Sink: &sizedSink{1}} }, 1, false},
		{"FaultBatchSink over 2 lanes, 3 engines", 3, func() sdma.Sink {
			return &sdmatest.FaultBatchSink{Batch: &sizedBatchSink{sizedSink{2}}}
		}, 2, false},
		{"2 lanes, 2 engines", 2, func() sdma.Sink { return &sizedSink{2} }, 2, true},
		{"16 lanes, 4 engines", 4, func() sdma.Sink { return &sizedSink{16} }, 16, true},
		{"FaultSink over 2 lanes, 2 engines", 2, func() sdma.Sink { return &sdmatest.FaultSink{Sink: &sizedSink{2}} }, 2, true},
		{"FaultBatchSink over 4 lanes, 3 engines", 3, func() sdma.Sink {
			return &sdmatest.FaultBatchSink{Batch: &sizedBatchSink{sizedSink{4}}}
		}, 4, true},
		{"no Engines method, 4 engines", 4, func() sdma.Sink { return &sdmatest.DiscardSink{} }, 0, true},
		{"FaultSink over no Engines method", 4, func() sdma.Sink { return &sdmatest.FaultSink{Sink: &sdmatest.DiscardSink{}} }, 0, true},
		{"FaultSink over nothing", 4, func() sdma.Sink { return &sdmatest.FaultSink{} }, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := sdma.NewDevice(sdma.Config{Engines: tc.engines, Sink: tc.sink()})
			if dev != nil {
				defer dev.Close()
			}
			switch {
			case tc.ok && err != nil:
				t.Fatalf("NewDevice: %v", err)
			case tc.ok:
				if st, n := lostOnLastEngine(t, dev); st != sdma.StatusOK || n != 0 {
					t.Errorf("a packet on the last engine: %v, %d sink errors; want ok, 0", st, n)
				}
			case err == nil:
				st, n := lostOnLastEngine(t, dev)
				t.Fatalf("NewDevice took a sink of %d engine numbers for %d engines: a packet on the last engine completed %v with %d sink errors (lost)",
					tc.lanes, tc.engines, st, n)
			}
			if tc.ok {
				return
			}
			var ce *sdma.ConfigError
			if !errors.As(err, &ce) || ce.Field != "Sink" || !errors.Is(err, sdma.ErrInvalid) || !errors.Is(err, sdma.ErrConfig) {
				t.Fatalf("NewDevice: %v, want a *ConfigError for Sink matching ErrInvalid and ErrConfig", err)
			}
			for _, want := range []string{takes(tc.lanes), fmt.Sprintf("Config.Engines is %d", max(tc.engines, 1))} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("NewDevice: %q, want it to say %q", err, want)
				}
			}
		})
	}
}

// TestNewDeviceSinkEnginesPanics: a panic in the sink's Engines (its bug) refuses the device, a
// *ConfigError for Sink that quotes it, as one in BatchLimit or Validate.
func TestNewDeviceSinkEnginesPanics(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Sink: panickySizedSink{}})
	if err == nil {
		dev.Close()
		t.Fatal("NewDevice took a sink whose Engines panics")
	}
	var ce *sdma.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Sink" || !strings.Contains(err.Error(), "engines: boom") {
		t.Fatalf("NewDevice: %v, want a *ConfigError for Sink quoting the panic", err)
	}
}

// sizedBatchSink is a sizedSink that batches nothing (BatchLimit 1): a BatchSink to wrap in
// sdmatest.FaultBatchSink.
type sizedBatchSink struct{ sizedSink }

func (*sizedBatchSink) BatchLimit() (int, int)                  { return 1, 0 }
func (s *sizedBatchSink) Queue(engine int, segs [][]byte) error { return s.Deliver(engine, segs) }
func (*sizedBatchSink) Flush(int, []error)                      {}

// takes is how a refusal names a sink's engine numbers: "takes 1 engine " (not "1 engines"),
// "takes 3 engines ".
func takes(n int) string {
	if n == 1 {
		return "takes 1 engine "
	}
	return fmt.Sprintf("takes %d engines ", n)
}
