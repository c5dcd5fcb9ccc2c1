//go:build linux

package verbs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/internal/leakcheck"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
	"github.com/gosdma/gosdma/sdma/udpsink"
	"go.uber.org/goleak"
)

// TestWrappedSinkSizedForTheEnginesOnlyRefused is TestSinkSizedForTheEnginesOnlyRefused through
// the sdmatest fault wrappers (as cmd/sdmaperf's -faults sinkfail wraps -sink udp): a
// udpsink.Sink with a lane for each SDMA engine and none for the PIO contexts, wrapped in a
// FaultSink or FaultBatchSink, is refused by New (ErrInvalid, naming the sizes). The wrappers
// hid the sink's Engines, New took it, and every PIO packet was lost: Send returned nil while the
// sink refused the packet, counted only in the context's SinkErrors. With a lane for each
// context too, or under DisablePIO, it is taken.
func TestWrappedSinkSizedForTheEnginesOnlyRefused(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	r, err := udpsink.Listen(udpsink.ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wraps := map[string]func(s *udpsink.Sink) sdma.Sink{
		"FaultSink": func(s *udpsink.Sink) sdma.Sink { return &sdmatest.FaultSink{Sink: s} },
		"FaultBatchSink": func(s *udpsink.Sink) sdma.Sink {
			return &sdmatest.FaultBatchSink{FaultSink: sdmatest.FaultSink{Sink: s}, Batch: s}
		},
	}
	const engines, contexts = 2, 3
	for wname, wrap := range wraps {
		for _, tc := range []struct {
			lanes          int
			disablePIO, ok bool
		}{{engines, false, false}, {engines + contexts - 1, false, false}, {engines + contexts, false, true}, {engines, true, true}} {
			name := fmt.Sprintf("%s over a sink of %d lanes, DisablePIO %v", wname, tc.lanes, tc.disablePIO)
			us, err := udpsink.New(udpsink.Config{Addr: r.Addr().String(), Engines: tc.lanes})
			if err != nil {
				t.Fatal(err)
			}
			sd, err := sdma.NewDevice(sdma.Config{Engines: engines, Sink: wrap(us)})
			if err != nil {
				t.Fatalf("%s: sdma.NewDevice: %v", name, err)
			}
			d, err := New(Config{SDMA: sd, Contexts: contexts, DisablePIO: tc.disablePIO})
			switch {
			case tc.ok && err != nil:
				t.Errorf("%s: New: %v", name, err)
			case !tc.ok && err == nil:
				var lost uint64
				if _, serr := d.NewFlow(0, 0).Send(context.Background(), [][]byte{make([]byte, 64)}, nil); serr == nil {
					d.Close() // the chip has consumed the packet: its delivery is counted
					for i := range d.NumContexts() {
						lost += d.Context(i).Stats().SinkErrors
					}
				}
				t.Errorf("%s: New took it (a PIO packet sent: %d sink errors)", name, lost)
			case !tc.ok && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), takesEngines(tc.lanes))):
				t.Errorf("%s: New: %v, want ErrInvalid naming the sink's %d engines", name, err, tc.lanes)
			}
			if d != nil {
				d.Close()
			}
			sd.Close()
			us.Close()
		}
	}
}

// takesEngines is how New's refusal names the sink's engine numbers: "takes 1 engine;" (not
// "1 engines"), "takes 4 engines;".
func takesEngines(n int) string {
	if n == 1 {
		return "takes 1 engine;"
	}
	return fmt.Sprintf("takes %d engines;", n)
}
