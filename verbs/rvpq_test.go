package verbs

import (
	"context"
	"testing"
	"time"

	"github.com/gosdma/gosdma/sdma"
)

// TestDrainManualEngineWithoutManualPIO: Drain returns on a Manual SDMA device whose PIO chips
// run on their goroutines (ManualPIO unset), every SDMA packet delivered and its Completion told:
// it drives the flow's engine while it waits, as it does for a CompletePoll engine. It used to
// Poll only, and a Manual engine completes nothing unless someone runs its hardware pass
// (Process): the packets sat in the ring and Drain waited until its context ended, although
// New took the configuration and Send worked.
func TestDrainManualEngineWithoutManualPIO(t *testing.T) {
	sink := newOrderSink()
	f, c := sendFourOn(t, sdma.Config{Sink: sink, Manual: true})
	if f.Sent(PathSDMA) == 0 {
		t.Fatal("no packet went by SDMA")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Drain(ctx); err != nil {
		t.Fatalf("Drain on a Manual engine without ManualPIO: %v", err)
	}
	if p, s := f.Busy(); p != 0 || s != 0 || c.n.Load() != 4 || c.err.Load() != 0 {
		t.Fatalf("after Drain: %d PIO, %d SDMA busy, %d of 4 completions, %d errors", p, s, c.n.Load(), c.err.Load())
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.pkts[1]) != 4 || len(sink.bad) != 0 {
		t.Fatalf("%d of 4 packets delivered, %v", len(sink.pkts[1]), sink.bad)
	}
}
