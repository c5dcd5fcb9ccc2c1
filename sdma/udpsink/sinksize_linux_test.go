//go:build linux

package udpsink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestNewDeviceRefusesSinkForFewerEngines: sdma.NewDevice refuses a Sink built for fewer engines
// than the device has (Config.Engines 1 for 2 engines, say), and the zero Sink, bare or wrapped
// in sdmatest.FaultSink or FaultBatchSink (as cmd/sdmaperf's -faults sinkfail wraps -sink udp),
// with ErrInvalid naming both sizes. It took them, and every packet of the engines past the
// sink's was lost in silence: SendWait returned nil and the txreq completed OK, while the sink
// refused the packet (ErrEngine: "engine 1, sink built for 1"), counted only in the engine's
// SinkErrors. A Sink built for as many engines as the device, or more, is taken.
func TestNewDeviceRefusesSinkForFewerEngines(t *testing.T) {
	r, err := Listen(ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wraps := map[string]func(s *Sink) sdma.Sink{
		"bare":      func(s *Sink) sdma.Sink { return s },
		"FaultSink": func(s *Sink) sdma.Sink { return &sdmatest.FaultSink{Sink: s} },
		"FaultBatchSink": func(s *Sink) sdma.Sink {
			return &sdmatest.FaultBatchSink{FaultSink: sdmatest.FaultSink{Sink: s}, Batch: s}
		},
	}
	for _, tc := range []struct{ lanes, engines int }{{1, 2}, {3, 4}, {0, 1}, {2, 2}, {4, 2}} {
		for wname, wrap := range wraps {
			name := fmt.Sprintf("%s Sink of %d engines, device of %d", wname, tc.lanes, tc.engines)
			s := &Sink{} // lanes 0: the zero Sink
			if tc.lanes > 0 {
				if s, err = New(Config{Addr: r.Addr().String(), Engines: tc.lanes}); err != nil {
					t.Fatal(err)
				}
			}
			dev, err := sdma.NewDevice(sdma.Config{Engines: tc.engines, Sink: wrap(s)})
			ok := tc.lanes >= tc.engines
			switch {
			case ok && err != nil:
				t.Errorf("%s: NewDevice: %v", name, err)
			case !ok && err == nil:
				t.Errorf("%s: NewDevice took it (a packet on the last engine: %s)", name, sendLast(t, dev))
			case !ok && (!errors.Is(err, sdma.ErrInvalid) || !strings.Contains(err.Error(), "takes "+engineCount(tc.lanes)+" (") ||
				!strings.Contains(err.Error(), fmt.Sprintf("Config.Engines is %d", tc.engines))):
				t.Errorf("%s: NewDevice: %v, want ErrInvalid naming the sink's %d engines and the device's %d", name, err, tc.lanes, tc.engines)
			}
			if dev != nil {
				dev.Close()
			}
			s.Close()
		}
	}
}

// sendLast sends one packet on dev's last engine and tells how it completed and the engine's
// sink errors.
func sendLast(t *testing.T, dev *sdma.Device) string {
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
		return "SendWait: " + err.Error()
	}
	st := <-done
	return fmt.Sprintf("SendWait nil, completed %v, %d sink errors, the last %v", st, e.Stats().SinkErrors, e.SinkError())
}

// engineCount is n engines as NewDevice's refusal names them: "1 engine" (not "1 engines").
func engineCount(n int) string {
	if n == 1 {
		return "1 engine"
	}
	return fmt.Sprintf("%d engines", n)
}
