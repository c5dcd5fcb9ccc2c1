//go:build linux

package verbs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/udpsink"
	"go.uber.org/goleak"
)

// TestPIOIntoBatchingSinkLosesNothing: a Device over an SDMA device whose sink is a batching
// udpsink.Sink with a lane for each engine and each PIO context (Config.Contexts' doc): every
// packet the flows sent, by either path, reaches the receiver once, in order on its lane, and no
// delivery fails. PIO context i delivered as engine i, the lane of SDMA engine i: while that
// engine held a batch (Queue, not yet flushed) the sink refused the PIO packet ("Deliver on
// engine 0 while it holds queued packets"), and the packet was lost, though its Send had returned
// nil and its Completion had been told nil; a context past the engines' lanes lost every packet.
func TestPIOIntoBatchingSinkLosesNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const engines, contexts, per = 1, 2, 1500
	r, err := udpsink.Listen(udpsink.ReceiverConfig{Idle: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan udpsink.Report, 1)
	go func() { rep, _ := r.Run(context.Background()); done <- rep }()
	us, err := udpsink.New(udpsink.Config{Addr: r.Addr().String(), Engines: engines + contexts, Batch: 16})
	if err != nil {
		t.Fatal(err)
	}
	sd, err := sdma.NewDevice(sdma.Config{Engines: engines, Sink: us})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{SDMA: sd, Contexts: contexts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	// Flows 0 and 1 send by PIO on contexts 0 and 1; flow 2 by SDMA on engine 0, which batches
	// beside context 0.
	flows := []*Flow{d.NewFlow(0, 0), d.NewFlow(1, 0), d.NewFlow(2, 0)}
	for fl, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1000)
			for range per {
				n := 64
				if fl == 2 {
					n = 1000
				}
				if _, err := f.Send(ctx, [][]byte{buf[:n]}, nil); err != nil {
					t.Errorf("flow %d: Send: %v", fl, err)
					return
				}
			}
			if err := f.Drain(ctx); err != nil {
				t.Errorf("flow %d: Drain: %v", fl, err)
			}
		}()
	}
	wg.Wait()
	if err := d.Close(); err != nil {
		t.Error(err)
	}
	if err := sd.Close(); err != nil {
		t.Error(err)
	}
	var sinkErrs, pioPkts uint64
	for i := range d.NumContexts() {
		st := d.Context(i).Stats()
		sinkErrs += st.SinkErrors
		pioPkts += st.Packets
	}
	if err := us.Close(); err != nil {
		t.Error(err)
	}
	var rep udpsink.Report
	select {
	case rep = <-done:
	case <-ctx.Done():
		t.Fatal("the receiver never reported")
	}
	if sinkErrs != 0 || rep.Packets != 3*per || !rep.OK() {
		t.Errorf("PIO sink errors %d (of %d PIO packets); the receiver got %d of %d packets: %v", sinkErrs, pioPkts, rep.Packets, 3*per, rep.String())
	}
	lanes := map[int]uint64{}
	for _, e := range rep.Engines {
		lanes[e.Engine] = e.Packets
	}
	if lanes[0] != per || lanes[engines] != per || lanes[engines+1] != per || flows[2].Sent(PathSDMA) != per {
		t.Errorf("lanes %v: want %d SDMA packets on 0 and %d PIO packets on each of %d and %d", lanes, per, per, engines, engines+1)
	}
}
