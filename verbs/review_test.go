package verbs

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/pio"
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
	f, c := sendFourOn(t, sdma.Config{Completion: sdma.CompletePoll})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Drain(ctx); err != nil {
		t.Fatalf("Drain on a polled engine: %v", err)
	}
	if p, s := f.Busy(); p != 0 || s != 0 || c.n.Load() != 4 {
		t.Fatalf("after Drain: %d PIO, %d SDMA busy, %d of 4 completions", p, s, c.n.Load())
	}
}

// TestSendAfterCloseRefused: after Device.Close every packet is refused with ErrClosed, which
// also matches both paths' sentinels; nothing reaches the sink and no Completion is told. A
// packet up to the threshold used to be refused (its PIO context closed: pio.ErrClosed) while a
// larger one still went by SDMA, since Close leaves the SDMA device open.
func TestSendAfterCloseRefused(t *testing.T) {
	sink := newOrderSink()
	d := newDevice(t, sink, nil, Config{})
	f := d.NewFlow(0, 0)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var c done
	for i, n := range []int{64, 256, 257, 1024, 8192} {
		path, err := f.Send(ctx, [][]byte{packet(1, uint64(i), n)}, &c)
		if err == nil {
			t.Errorf("%d bytes: sent by %v after Close", n, path)
			continue
		}
		for _, target := range []error{ErrClosed, sdma.ErrClosed, pio.ErrClosed} {
			if !errors.Is(err, target) {
				t.Errorf("%d bytes: %v does not match %v", n, err, target)
			}
		}
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.pkts) != 0 || c.n.Load() != 0 {
		t.Fatalf("after Close: %d flows reached the sink, %d completions told", len(sink.pkts), c.n.Load())
	}
}

// countDone counts one packet's completions.
type countDone struct{ n atomic.Int32 }

func (d *countDone) Done(Path, error) { d.n.Add(1) }

// TestSendVsCloseConcurrent: flows send packets on both sides of the threshold while the Device
// closes: every packet is either accepted (Send returns nil), reaches the sink exactly once in
// its flow's order and is told Done exactly once, or refused with ErrClosed, reaching nothing
// and told nothing; every Send that starts after Close returned is refused.
func TestSendVsCloseConcurrent(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	sendVsClose(t, Config{}, rounds, 4, 200, rounds)
}

// sendVsClose runs rounds of flows senders of perFlow packets each (sizes on both sides of the
// PIO threshold) against a Close that comes after round*flows*perFlow/closeDiv sends have
// started, and checks the outcome of every packet: accepted, on the wire once in its flow's
// order and told once; or refused with ErrClosed and seen nowhere; never accepted when its Send
// started after Close returned. Every Drain returns.
func sendVsClose(t *testing.T, cfg Config, rounds, flows, perFlow, closeDiv int) {
	t.Helper()
	type rec struct {
		accepted, afterClose bool
		c                    countDone
	}
	for round := range rounds {
		sink := newOrderSink()
		d := newDevice(t, sink, nil, cfg)
		var closedAt atomic.Bool // set when Close has returned
		var started atomic.Int32
		recs := make([][]rec, flows)
		var wg sync.WaitGroup
		for fl := range flows {
			recs[fl] = make([]rec, perFlow)
			wg.Go(func() {
				f := d.NewFlow(uint32(fl), 0)
				for i := range perFlow {
					r := &recs[fl][i]
					r.afterClose = closedAt.Load()
					started.Add(1)
					n := 64 + (i*97+fl*31)%900 // both sides of 256
					_, err := f.Send(context.Background(), [][]byte{packet(uint64(fl+1), uint64(i), n)}, &r.c)
					switch {
					case err == nil:
						r.accepted = true
					case !errors.Is(err, ErrClosed):
						t.Errorf("flow %d packet %d: %v, want ErrClosed", fl, i, err)
					}
				}
				if err := f.Drain(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		for started.Load() < int32(round*flows*perFlow/closeDiv) {
			runtime.Gosched()
		}
		_ = d.Close()
		closedAt.Store(true)
		wg.Wait()
		sink.mu.Lock()
		for _, b := range sink.bad {
			t.Error(b)
		}
		for fl := range flows {
			var want []uint64
			for i := range recs[fl] {
				r := &recs[fl][i]
				if r.accepted {
					want = append(want, uint64(i))
					if r.afterClose {
						t.Errorf("flow %d packet %d: accepted though Send started after Close returned", fl, i)
					}
				}
				if n, w := r.c.n.Load(), map[bool]int32{true: 1, false: 0}[r.accepted]; n != w {
					t.Errorf("flow %d packet %d (accepted %v): told %d times", fl, i, r.accepted, n)
				}
			}
			var got []uint64
			for _, p := range sink.pkts[uint64(fl+1)] {
				got = append(got, binary.LittleEndian.Uint64(p[8:]))
			}
			if !slices.Equal(got, want) {
				t.Errorf("flow %d: sink saw %v, accepted %v", fl, got, want)
			}
		}
		sink.mu.Unlock()
		if t.Failed() {
			return
		}
	}
}

// sendFourOn makes an SDMA device of cfg (closed at the test's end) and a verbs Device over it,
// and sends four packets of stream 1 (64 to 1264 bytes: by PIO and by SDMA) on flow (0, 0), each
// telling the returned Completion.
func sendFourOn(t *testing.T, cfg sdma.Config) (*Flow, *done) {
	t.Helper()
	sd, err := sdma.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sd.Close() })
	d, err := New(Config{SDMA: sd})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	f := d.NewFlow(0, 0)
	c := new(done)
	for i := range 4 {
		if _, err := f.Send(context.Background(), [][]byte{packet(1, uint64(i), 64+i*400)}, c); err != nil {
			t.Fatal(err)
		}
	}
	return f, c
}
