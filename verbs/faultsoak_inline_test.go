package verbs

// Fault-schedule soak of a Device driven by its flows alone (hunt hfault): the soaks before it
// (rvsoak_test.go, rvsoak2_test.go) drive a Manual SDMA device and ManualPIO chips from driver
// goroutines of their own. Here nothing else drives them: each flow's goroutine sends, drains
// under short contexts, and now and then runs the PIO chips (Device.Process) and a hardware and
// completion pass of any engine (Process, Poll), while halts (planned and injected, on both
// paths), Stop/Start, freezes and idle hit the engines. Then the chaos stops, every engine is
// brought back to running and every flow's Drain must return (the engines carry what was left
// when driven by the Drain alone), the flows send on, and the two devices close in a random
// order or at once. The ledger (rv2OrderSink): each flow's packets reach the sink in order, once,
// byte-identical; every accepted packet is told Done exactly once, an SDMA one Done(nil) exactly
// when it reached the sink; no refused packet is told; every wait is bounded by one context (a
// hang prints every goroutine); no goroutine is left.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// inlineRun brings e back to s99 from any resting state.
func inlineRun(e *sdma.Engine) error {
	for range 4 {
		var err error
		switch sdmatest.EngineState(e) {
		case sdmatest.S99Running:
			return nil
		case sdmatest.S80HwFreeze:
			err = sdmatest.RaiseEvent(e, sdmatest.E81HwFrozen, "inline soak: run")
		case sdmatest.S82FreezeSwClean:
			err = sdmatest.RaiseEvent(e, sdmatest.E82HwUnfreeze, "inline soak: run")
		default:
			err = e.Start()
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("engine %d stuck in %v", e.Index(), sdmatest.EngineState(e))
}

func runInlineVerbsSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x1d1e))
	sink := &rv2OrderSink{pkts: map[[2]uint32]*rv2Pkt{}, next: map[uint32]uint32{}}
	cfg := sdma.Config{Engines: 1 + rng.IntN(2), RingSize: []int{64, 256}[rng.IntN(2)], Sink: sink, Manual: true}
	sd, err := sdma.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sd.NumEngines() {
		if err := sdmatest.SetFaults(sd.Engine(i), sdmatest.FaultPlan{HaltRate: 0.01, Seed: seed}); err != nil {
			t.Fatal(err)
		}
	}
	threshold := []int{64, 256, 1024}[rng.IntN(3)]
	vc := Config{SDMA: sd, Contexts: 1 + rng.IntN(2), PIOThreshold: threshold, ManualPIO: true}
	if rng.IntN(2) == 0 {
		vc.PIOFaults = pio.FaultPlan{HaltRate: 0.01, Seed: seed}
	}
	d, err := New(vc)
	if err != nil {
		t.Fatal(err)
	}
	how := rng.IntN(3)
	desc := fmt.Sprintf("seed %d (RVSOAK_SEED=%d): engines %d ring %d threshold %d contexts %d end %d", seed, seed, cfg.Engines, cfg.RingSize, threshold, vc.Contexts, how)
	fail := func(format string, args ...any) { t.Errorf(desc+": "+format, args...) }
	hctx, hcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer hcancel()
	hang := func(what string) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s: hang: %s\n%s", desc, what, buf)
	}

	led := &rv2Ledger{sink: sink, fail: fail}

	var stopFlows, stopped atomic.Bool
	var wg, bg sync.WaitGroup
	nflows := 2 + rng.IntN(3)
	flows := make([]*Flow, nflows)
	for fl := range nflows {
		flows[fl] = d.NewFlow(uint32(fl), 0)
	}
	var seqs = make([]uint32, nflows) // each flow's next sequence (its goroutine's, then the test's)
	send := func(fl int, r *rand.Rand) bool {
		seq := seqs[fl]
		seqs[fl]++
		n := 8 + r.IntN(threshold-7)
		if r.IntN(5) == 0 {
			n = threshold + 1 + r.IntN(threshold)
		}
		return !closed(led.send(hctx, flows[fl], fl, seq, n, 1000, r))
	}
	for fl := range nflows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(fl)+1))
			for !stopFlows.Load() && hctx.Err() == nil {
				switch r.IntN(30) {
				case 0:
					ctx, cancel := context.WithTimeout(hctx, time.Duration(r.IntN(500))*time.Microsecond)
					_ = flows[fl].Drain(ctx)
					cancel()
				case 1, 2:
					d.Process()
				case 3, 4:
					e := sd.Engine(r.IntN(sd.NumEngines()))
					_, _ = e.Process()
					e.Poll()
				}
				if !send(fl, r) {
					return
				}
			}
		}()
	}
	chaos := sdmatest.Chaos{Rand: rand.New(rand.NewPCG(seed, 0x1d1f)), Memory: func(r *rand.Rand) {
		_ = d.Context(r.IntN(d.NumContexts())).InjectHalt()
	}}
	if err := chaos.Run(sd, &stopped, &bg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(dur)
	// The chaos stops and the flows with it; every engine runs again and every flow drains by
	// its Drain alone.
	stopped.Store(true)
	bg.Wait()
	stopFlows.Store(true)
	wdone := make(chan struct{})
	go func() { wg.Wait(); close(wdone) }()
	select {
	case <-wdone:
	case <-hctx.Done():
		hang("flows")
	}
	for i := range sd.NumEngines() {
		_ = sdmatest.SetFaults(sd.Engine(i), sdmatest.FaultPlan{})
		if err := inlineRun(sd.Engine(i)); err != nil {
			t.Fatalf("%s: engine %d does not run again: %v", desc, i, err)
		}
	}
	for fl, f := range flows {
		if err := f.Drain(hctx); err != nil {
			if hctx.Err() != nil {
				hang(fmt.Sprintf("flow %d: Drain", fl))
			}
			fail("flow %d: Drain: %v", fl, err)
		}
	}
	// The flows send on (each on its own goroutine, as before) while the devices close.
	stopFlows.Store(false)
	for fl := range nflows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(fl)+0x100))
			for i := 0; i < 200 && hctx.Err() == nil; i++ {
				if r.IntN(4) == 0 {
					d.Process()
					e := sd.Engine(r.IntN(sd.NumEngines()))
					_, _ = e.Process()
					e.Poll()
				}
				if !send(fl, r) {
					return
				}
			}
		}()
	}
	time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond)
	switch how {
	case 0:
		if err := d.Close(); err != nil {
			fail("Close: %v", err)
		}
		if err := sd.Close(); err != nil {
			fail("sdma Close: %v", err)
		}
	case 1:
		if err := sd.Close(); err != nil {
			fail("sdma Close: %v", err)
		}
		if err := d.Close(); err != nil {
			fail("Close: %v", err)
		}
	default:
		var cw sync.WaitGroup
		cw.Add(1)
		go func() {
			defer cw.Done()
			if err := d.Close(); err != nil {
				fail("Close: %v", err)
			}
		}()
		if err := sd.Close(); err != nil {
			fail("sdma Close: %v", err)
		}
		cw.Wait()
	}
	wdone = make(chan struct{})
	go func() { wg.Wait(); close(wdone) }()
	select {
	case <-wdone:
	case <-hctx.Done():
		hang("flows after Close")
	}
	for fl, f := range flows {
		if err := f.Drain(hctx); err != nil {
			if hctx.Err() != nil {
				hang(fmt.Sprintf("flow %d: Drain after Close", fl))
			}
			fail("flow %d: Drain after Close: %v", fl, err)
		}
	}

	accepted, bySDMA := led.check()
	t.Logf("%s: %d packets, %d accepted, %d by SDMA", desc, len(led.all), accepted, bySDMA)
}

// TestFaultSoakVerbsInline: see runInlineVerbsSoak.
func TestFaultSoakVerbsInline(t *testing.T) {
	soak.Seeds(t, 16, 4, 40*time.Millisecond, 10*time.Millisecond, runInlineVerbsSoak)
}
