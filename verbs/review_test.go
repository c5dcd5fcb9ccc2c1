package verbs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/sdma"
)

// slowDone is a Completion that takes its time before it counts (it still does not block on
// anything): the window between the engine's completion and the count.
type slowDone struct{ n atomic.Int64 }

func (d *slowDone) Done(Path, error) {
	time.Sleep(2 * time.Millisecond)
	d.n.Add(1)
}

// Drain returns only after every SDMA packet's Completion was told (the kernel's complete_tx
// calls the callback, then iowait_sdma_dec and the drain wakeup): Flow.Drain is iowait_drain,
// and a caller that drains and then counts its completions must see them all. The flow's busy
// count dropped to zero before Done ran, so Drain returned with the last Done still to come.
func TestDrainAfterSDMACompletions(t *testing.T) {
	d := newDevice(t, newOrderSink(), nil, Config{DisablePIO: true})
	f := d.NewFlow(0, 0)
	ctx := context.Background()
	for round := range 5 {
		var c slowDone
		for i := range 3 {
			if _, err := f.Send(ctx, [][]byte{packet(1, uint64(round*3+i), 512)}, &c); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if n := c.n.Load(); n != 3 {
			t.Fatalf("round %d: Drain returned with %d of 3 completions told", round, n)
		}
	}
}

// Sent of a value that is not a path is 0. It used to index its counters modulo 3, so that
// Path(4) read the PIO count and Path(5) the SDMA count.
func TestSentOfNoPath(t *testing.T) {
	d := newDevice(t, newOrderSink(), nil, Config{})
	f := d.NewFlow(0, 0)
	ctx := context.Background()
	for i, n := range []int{64, 1024} {
		if _, err := f.Send(ctx, [][]byte{packet(1, uint64(i), n)}, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if f.Sent(PathPIO) != 1 || f.Sent(PathSDMA) != 1 {
		t.Fatalf("sent pio %d sdma %d, want 1 and 1", f.Sent(PathPIO), f.Sent(PathSDMA))
	}
	for _, p := range []Path{0, 3, 4, 5, 255} {
		if n := f.Sent(p); n != 0 {
			t.Errorf("Sent(%v) = %d, want 0", p, n)
		}
	}
}

// Drain returns on an SDMA device in sdma.CompletePoll mode, whose txreqs complete only when
// someone calls Poll: it polls while it waits, as sdma.Engine.SendWait and Device.Shutdown drive
// such an engine. It used to wait for a completion that nobody would run, until ctx ended.
func TestDrainPolledEngine(t *testing.T) {
	sd, err := sdma.NewDevice(sdma.Config{Completion: sdma.CompletePoll})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	d, err := New(Config{SDMA: sd})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f := d.NewFlow(0, 0)
	var c done
	for i := range 4 {
		if _, err := f.Send(context.Background(), [][]byte{packet(1, uint64(i), 64+i*400)}, &c); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Drain(ctx); err != nil {
		t.Fatalf("Drain on a polled engine: %v", err)
	}
	if p, s := f.Busy(); p != 0 || s != 0 || c.n.Load() != 4 {
		t.Fatalf("after Drain: %d PIO, %d SDMA busy, %d of 4 completions", p, s, c.n.Load())
	}
}

// TestSendAfterCloseRefused: after Device.Close, a Flow's packet up to the threshold is refused
// (its PIO context is closed: pio.ErrClosed), but a larger one still goes by SDMA and is sent,
// since Close leaves the SDMA device open: a closed device sends half of what it is given.
func TestSendAfterCloseRefused(t *testing.T) {
	t.Skip("bug: Flow.Send after Device.Close still sends packets above the threshold by SDMA; suggested fix (a design call: a verbs ErrClosed sentinel, or pio's): Send checks the device's closed flag first and refuses every packet")
	d := newDevice(t, newOrderSink(), nil, Config{})
	f := d.NewFlow(0, 0)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, n := range []int{64, 1024} {
		if path, err := f.Send(ctx, [][]byte{packet(1, uint64(i), n)}, nil); err == nil {
			t.Errorf("%d bytes: sent by %v after Close", n, path)
		}
	}
}
