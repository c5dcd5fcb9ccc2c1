package verbs

// Fault-schedule soak of Flow.Send and Drain (review rvsoak): seeded random schedules mixing, on
// an SDMA device of either completion mode, injected and planned halts, Stop/Start, failing,
// stalling and panicking sinks, PIO halts, Completion callbacks that panic (SDMA path),
// deregistration of registered packet memory with packets in flight (and registering it again),
// context cancellation of Send and Drain, and the verbs Device's and the SDMA device's Close in
// a random order at a random point. The ledger: every packet Send accepted (nil, or
// sdma.ErrNotRunning on the SDMA path) is told Done exactly once, no refused one is; Drain
// returns once the SDMA device closed; every Deregister returns; no goroutine is left.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

type rvRec struct {
	n        atomic.Int32
	accepted bool
	path     Path
	err      error
	panicky  bool
}

func (r *rvRec) Done(p Path, err error) {
	r.n.Add(1)
	if r.panicky && p == PathSDMA {
		panic("rvsoak: completion panic")
	}
}

type rvPanicSink struct {
	inner  sdma.Sink
	period uint64
	n      atomic.Uint64
}

func (s *rvPanicSink) Deliver(engine int, segs [][]byte) error {
	if s.period > 0 && s.n.Add(1)%s.period == 0 {
		panic("rvsoak: sink panic")
	}
	return s.inner.Deliver(engine, segs)
}

func runRVVerbsSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x7e4b5))
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sdma.Config{
		Engines:  1 + rng.IntN(2),
		RingSize: []int{64, 128, 1024}[rng.IntN(3)],
		Mapper:   iommu,
		Sink: &rvPanicSink{period: uint64([]int{0, 41, 113}[rng.IntN(3)]), inner: &sdmatest.FaultSink{
			Sink: &sdmatest.DiscardSink{}, FailRate: 0.05, StallRate: 0.02, Stall: 20 * time.Microsecond, Seed: seed,
		}},
	}
	poll := rng.IntN(3) == 0
	if poll {
		cfg.Completion = sdma.CompletePoll
	}
	cfg.Manual = rng.IntN(4) == 0 // with ManualPIO: a driver goroutine and Drain drive both
	sd, err := sdma.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sd.NumEngines() {
		if rng.IntN(2) == 0 {
			_ = sdmatest.SetFaults(sd.Engine(i), sdmatest.FaultPlan{HaltRate: 0.01, Seed: seed})
		}
	}
	vc := Config{SDMA: sd, Contexts: 2, ManualPIO: cfg.Manual}
	if rng.IntN(2) == 0 {
		vc.PIOFaults = pio.FaultPlan{HaltRate: 0.01, Seed: seed}
	}
	d, err := New(vc)
	if err != nil {
		t.Fatal(err)
	}
	desc := fmt.Sprintf("seed %d: engines %d ring %d poll %v manual %v", seed, cfg.Engines, cfg.RingSize, poll, cfg.Manual)
	how := rng.IntN(3) // how it ends
	desc += fmt.Sprintf(" end %d", how)

	// Packet memory: a few buffers, each registered or not, deregistered and registered again
	// by the chaos goroutine while packets from it are in flight.
	type buf struct {
		mu  sync.Mutex
		b   []byte
		reg *dma.Registration
	}
	bufs := make([]*buf, 4)
	for i := range bufs {
		bufs[i] = &buf{b: make([]byte, 8192)}
		for k := range bufs[i].b {
			bufs[i].b[k] = byte(k + i)
		}
		if rng.IntN(2) == 0 {
			bufs[i].reg, _ = sd.Register(bufs[i].b)
		}
	}

	var mu sync.Mutex
	var recs []*rvRec
	var stopFlows, stopped atomic.Bool
	var wg, bg sync.WaitGroup
	nflows := 2 + rng.IntN(3)
	flows := make([]*Flow, nflows)
	for fl := range flows {
		flows[fl] = d.NewFlow(uint32(fl), 0)
	}
	for fl, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(fl)+1))
			for !stopFlows.Load() {
				if r.IntN(50) == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(500))*time.Microsecond)
					_ = f.Drain(ctx)
					cancel()
					continue
				}
				b := bufs[r.IntN(len(bufs))].b
				off := r.IntN(len(b) - 1)
				n := 1 + r.IntN(min(len(b)-off, 2000))
				segs := [][]byte{b[off : off+n]}
				if r.IntN(3) == 0 && n > 1 {
					k := r.IntN(n)
					segs = [][]byte{b[off : off+k], b[off+k : off+n]}
				}
				c := &rvRec{panicky: r.IntN(40) == 0}
				wait := 20 * time.Second
				if r.IntN(4) == 0 {
					wait = time.Duration(r.IntN(100)) * time.Microsecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				p, err := f.Send(ctx, segs, c)
				cancel()
				c.path, c.err = p, err
				c.accepted = err == nil || (p == PathSDMA && errors.Is(err, sdma.ErrNotRunning))
				if !c.accepted && !errors.Is(err, ErrClosed) && !errors.Is(err, sdma.ErrClosed) &&
					!errors.Is(err, sdma.ErrNotRunning) && !errors.Is(err, pio.ErrNotRunning) &&
					!errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s: flow %d: Send: %v (path %v)", desc, fl, err, p)
				}
				mu.Lock()
				recs = append(recs, c)
				mu.Unlock()
			}
		}()
	}
	if cfg.Manual {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for !stopped.Load() {
				if d.Process() == 0 {
					time.Sleep(10 * time.Microsecond)
				}
			}
		}()
	}
	if poll || cfg.Manual {
		sdmatest.DriveEngines(sd, cfg.Manual, &stopped, &bg)
	}
	chaos := sdmatest.Chaos{Rand: rand.New(rand.NewPCG(seed, 77)), Memory: func(r *rand.Rand) {
		bf := bufs[r.IntN(len(bufs))]
		bf.mu.Lock()
		if bf.reg != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(2000))*time.Microsecond)
			err := sd.Deregister(ctx, bf.reg)
			cancel()
			switch {
			case err == nil:
				bf.reg = nil
			case errors.Is(err, context.DeadlineExceeded):
			default:
				t.Errorf("%s: Deregister: %v", desc, err)
			}
		} else if reg, err := sd.Register(bf.b); err == nil {
			bf.reg = reg
		}
		bf.mu.Unlock()
	}}
	if err := chaos.Run(sd, &stopped, &bg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(dur)

	drainAll := func(what string) {
		for fl, f := range flows {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := f.Drain(ctx); err != nil {
				pb, sb := f.Busy()
				t.Errorf("%s: %s: flow %d: Drain: %v (busy pio %d sdma %d)", desc, what, fl, err, pb, sb)
			}
			cancel()
		}
	}
	switch how {
	case 0: // the verbs device first, the flows drain with the engines still faulting
		_ = d.Close()
		stopFlows.Store(true)
		wg.Wait()
		drainAll("after verbs Close")
		mu.Lock() // Drain returned: every accepted packet's Done is behind it
		for i, c := range recs {
			if c.accepted && c.n.Load() != 1 {
				t.Errorf("%s: packet %d (path %v, err %v): %d Done calls when Drain returned", desc, i, c.path, c.err, c.n.Load())
			}
		}
		mu.Unlock()
		stopped.Store(true)
		bg.Wait()
		if err := sd.Close(); err != nil {
			t.Errorf("%s: sdma Close: %v", desc, err)
		}
	case 1: // the SDMA device under the flows, then Drain, then the verbs device
		stopped.Store(true)
		bg.Wait()
		if err := sd.Close(); err != nil {
			t.Errorf("%s: sdma Close: %v", desc, err)
		}
		time.Sleep(time.Millisecond)
		stopFlows.Store(true)
		wg.Wait()
		drainAll("after sdma Close")
		_ = d.Close()
	default: // both at once, under the flows
		var cw sync.WaitGroup
		cw.Add(1)
		go func() { defer cw.Done(); _ = d.Close() }()
		stopped.Store(true)
		bg.Wait()
		if err := sd.Close(); err != nil {
			t.Errorf("%s: sdma Close: %v", desc, err)
		}
		cw.Wait()
		stopFlows.Store(true)
		wg.Wait()
		drainAll("after both")
	}
	for _, bf := range bufs {
		if bf.reg != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := sd.Deregister(ctx, bf.reg); err != nil && !errors.Is(err, dma.ErrNotMapped) && !errors.Is(err, sdma.ErrClosed) {
				t.Errorf("%s: final Deregister: %v", desc, err)
			}
			cancel()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	acc, sdmaN, aborted := 0, 0, 0
	for i, c := range recs {
		want := int32(0)
		if c.accepted {
			want = 1
			acc++
			if c.path == PathSDMA {
				sdmaN++
			}
			if c.err != nil {
				aborted++
			}
		}
		if got := c.n.Load(); got != want {
			t.Errorf("%s: packet %d (path %v, err %v): %d Done calls, want %d", desc, i, c.path, c.err, got, want)
		}
	}
	if testing.Verbose() {
		t.Logf("%s: %d packets, %d accepted, %d by SDMA, %d flushed at send", desc, len(recs), acc, sdmaN, aborted)
	}
}

// TestRVSoakVerbsFaultSchedules: see runRVVerbsSoak.
func TestRVSoakVerbsFaultSchedules(t *testing.T) {
	soak.Seeds(t, 20, 5, 40*time.Millisecond, 10*time.Millisecond, runRVVerbsSoak)
}
