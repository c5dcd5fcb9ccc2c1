//go:build linux

package verbs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/internal/leakcheck"
	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
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
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
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

// TestSinkSizedForTheEnginesOnlyRefused: a sink that says how many engines it takes
// (udpsink.Sink's Engines) and has no lane for the PIO contexts, a udpsink.Sink sized for the SDMA
// engines as before 031bd41, is refused by New (ErrInvalid, naming the sizes). New took it, and
// every PIO packet was lost: Send returned nil and its Completion was told nil, while the sink
// refused the packet (ErrEngine: engine 1, sink built for 1), counted only in the context's
// SinkErrors. A sink with a lane for each engine and context, and one sized for the engines under
// DisablePIO (no PIO packet), are taken.
func TestSinkSizedForTheEnginesOnlyRefused(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	r, err := udpsink.Listen(udpsink.ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct {
		engines, contexts, lanes int
		disablePIO, ok           bool
	}{
		{1, 1, 1, false, false},
		{2, 3, 4, false, false},
		{1, 1, 2, false, true},
		{2, 3, 5, false, true},
		{2, 3, 8, false, true},
		{1, 2, 1, true, true},
	} {
		name := fmt.Sprintf("engines %d contexts %d sink lanes %d DisablePIO %v", tc.engines, tc.contexts, tc.lanes, tc.disablePIO)
		us, err := udpsink.New(udpsink.Config{Addr: r.Addr().String(), Engines: tc.lanes})
		if err != nil {
			t.Fatal(err)
		}
		sd, err := sdma.NewDevice(sdma.Config{Engines: tc.engines, Sink: us})
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(Config{SDMA: sd, Contexts: tc.contexts, DisablePIO: tc.disablePIO})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: New: %v", name, err)
		case !tc.ok && err == nil:
			var lost uint64
			if _, serr := d.NewFlow(0, 0).Send(context.Background(), [][]byte{make([]byte, 64)}, nil); serr == nil {
				d.Close() // the chip has consumed the packet: its delivery is counted
				lost = d.Context(0).Stats().SinkErrors
			}
			t.Errorf("%s: New took a sink with no lane for the PIO contexts (a PIO packet sent: %d sink errors)", name, lost)
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

// udpPkt is one packet of the udpsink soak.
type udpPkt struct {
	dones    atomic.Int32
	ok       atomic.Int32 // Done(PathSDMA, nil) calls
	accepted bool
	path     Path
	err      error
}

func (p *udpPkt) Done(path Path, err error) {
	p.dones.Add(1)
	if path == PathSDMA && err == nil {
		p.ok.Add(1)
	}
}

// runUDPSinkCloseSoak is a fault-schedule soak of a Device over an SDMA device whose sink is a
// udpsink.Sink (batching or not, GSO or not) with a lane per engine and per PIO context, into a
// Receiver on loopback: flows send packets that straddle the PIO threshold while the engines and
// contexts halt, stop, freeze and go idle, and at seeded random moments, on goroutines of their
// own, the Sink closes (twice at once in some seeds), the Device closes, and the SDMA device
// closes or shuts down, in any order, the flows sending on. The ledger: every accepted packet is
// told Done once, no refused one; the receiver got every datagram the Sink counts as sent, in
// order, once, each checksum right (a packet is never read after its completion), and the end
// markers; on the engines' lanes, the packets received and the engines' SinkErrors are the SDMA
// packets told Done(nil); on the contexts' lanes, the packets received and the contexts'
// SinkErrors are the packets the chips sent; the Sink's Errors are the engines' and contexts'
// SinkErrors; no goroutine is left.
func runUDPSinkCloseSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x0d95))
	engines, contexts := 1+rng.IntN(2), 1+rng.IntN(3)
	batch := []int{1, 8, 32}[rng.IntN(3)]
	gso := batch > 1 && rng.IntN(2) == 0 // GSO needs batching
	poll := rng.IntN(3) == 0
	desc := fmt.Sprintf("seed %d (RVSOAK_SEED=%d): engines %d contexts %d batch %d gso %v poll %v", seed, seed, engines, contexts, batch, gso, poll)
	fail := func(format string, args ...any) { t.Errorf(desc+": "+format, args...) }
	hctx, hcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer hcancel()
	hang := func(what string) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s: hang: %s\n%s", desc, what, buf)
	}
	waitFor := func(wg *sync.WaitGroup, what string) {
		ch := make(chan struct{})
		go func() { wg.Wait(); close(ch) }()
		select {
		case <-ch:
		case <-hctx.Done():
			hang(what)
		}
	}

	r, err := udpsink.Listen(udpsink.ReceiverConfig{Idle: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	us, err := udpsink.New(udpsink.Config{Addr: r.Addr().String(), Engines: engines + contexts, Batch: batch, GSO: gso})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sdma.Config{Engines: engines, RingSize: []int{64, 256}[rng.IntN(2)], Sink: us}
	if poll {
		cfg.Completion = sdma.CompletePoll
	}
	sd, err := sdma.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range engines {
		if rng.IntN(2) == 0 {
			if err := sdmatest.SetFaults(sd.Engine(i), sdmatest.FaultPlan{HaltRate: 0.005, Seed: seed + uint64(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	vc := Config{SDMA: sd, Contexts: contexts}
	if rng.IntN(2) == 0 {
		vc.PIOFaults = pio.FaultPlan{HaltRate: 0.005, Seed: seed}
	}
	d, err := New(vc)
	if err != nil {
		t.Fatal(err)
	}
	type runResult struct {
		rep udpsink.Report
		err error
	}
	repc := make(chan runResult, 1)
	go func() {
		rep, err := r.Run(hctx)
		repc <- runResult{rep, err}
	}()

	var stopWork, stopBg atomic.Bool
	var work, bg sync.WaitGroup
	var mu sync.Mutex
	var pkts []*udpPkt
	flows := make([]*Flow, 2+rng.IntN(2))
	for fl := range flows {
		flows[fl] = d.NewFlow(uint32(fl), 0)
	}
	for fl, f := range flows {
		work.Add(1)
		go func() {
			defer work.Done()
			fr := rand.New(rand.NewPCG(seed, uint64(fl)+1))
			buf := make([]byte, 1024)
			for k := range buf {
				buf[k] = byte(k + fl)
			}
			for !stopWork.Load() {
				if fr.IntN(40) == 0 {
					ctx, cancel := context.WithTimeout(hctx, time.Duration(fr.IntN(500))*time.Microsecond)
					_ = f.Drain(ctx)
					cancel()
					continue
				}
				for us.Stats().Packets > r.Received()+1000 && !stopWork.Load() { // within the receive buffer
					time.Sleep(100 * time.Microsecond)
				}
				n := 1 + fr.IntN(600)
				pk := &udpPkt{}
				ctx, cancel := context.WithTimeout(hctx, 20*time.Second)
				pk.path, pk.err = f.Send(ctx, [][]byte{buf[:n]}, pk)
				cancel()
				pk.accepted = pk.err == nil || (pk.path == PathSDMA && errors.Is(pk.err, sdma.ErrNotRunning))
				closed := errors.Is(pk.err, ErrClosed) || errors.Is(pk.err, sdma.ErrClosed)
				if !pk.accepted && !closed && !errors.Is(pk.err, sdma.ErrNotRunning) && !errors.Is(pk.err, pio.ErrNotRunning) {
					fail("flow %d: Send: %v (path %v)", fl, pk.err, pk.path)
				}
				mu.Lock()
				pkts = append(pkts, pk)
				mu.Unlock()
				if closed {
					time.Sleep(50 * time.Microsecond)
				}
			}
		}()
	}
	if poll {
		sdmatest.DriveEngines(sd, false, &stopBg, &bg)
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		cr := rand.New(rand.NewPCG(seed, 0x5c))
		for !stopBg.Load() {
			if cr.IntN(3) == 0 {
				_ = d.Context(cr.IntN(contexts)).InjectHalt()
			}
			time.Sleep(time.Duration(100+cr.IntN(400)) * time.Microsecond)
		}
	}()
	if err := (sdmatest.Chaos{Rand: rand.New(rand.NewPCG(seed, 0x99))}).Run(sd, &stopBg, &bg); err != nil {
		t.Fatal(err)
	}

	type closer struct {
		what string
		at   time.Duration
		run  func(ctx context.Context) error
		ok   func(error) bool
		err  error
	}
	var closers []*closer
	add := func(what string, run func(ctx context.Context) error, ok func(error) bool) {
		closers = append(closers, &closer{what: what, at: dur/5 + time.Duration(rng.Int64N(int64(dur-dur/5))), run: run, ok: ok})
	}
	isNil := func(err error) bool { return err == nil }
	sinkOK := func(err error) bool { return err == nil || errors.Is(err, udpsink.ErrClosed) }
	for k := range 1 + rng.IntN(2) {
		add(fmt.Sprintf("udpsink Close %d", k), func(context.Context) error { return us.Close() }, sinkOK)
	}
	add("verbs Close", func(context.Context) error { return d.Close() }, isNil)
	if rng.IntN(2) == 0 {
		add("sdma Close", func(context.Context) error { return sd.Close() }, isNil)
	} else {
		add("sdma Shutdown", sd.Shutdown, isNil)
	}
	var cw sync.WaitGroup
	for _, c := range closers {
		cw.Add(1)
		go func() {
			defer cw.Done()
			time.Sleep(c.at)
			ctx, cancel := context.WithTimeout(hctx, 30*time.Second)
			c.err = c.run(ctx)
			cancel()
		}()
	}
	time.Sleep(dur)
	waitFor(&cw, "the Closes")
	for _, c := range closers {
		if !c.ok(c.err) {
			fail("%s: %v", c.what, c.err)
		}
	}
	time.Sleep(dur / 4)
	stopWork.Store(true)
	waitFor(&work, "the flows")
	stopBg.Store(true)
	waitFor(&bg, "the drivers and the chaos")
	for fl, f := range flows {
		if err := f.Drain(hctx); err != nil {
			if hctx.Err() != nil {
				hang(fmt.Sprintf("flow %d: Drain", fl))
			}
			fail("flow %d: Drain: %v", fl, err)
		}
	}
	var rep udpsink.Report
	select {
	case res := <-repc:
		rep = res.rep
		if res.err != nil {
			fail("Receiver.Run: %v", res.err)
		}
	case <-hctx.Done():
		hang("the receiver's report")
	}

	mu.Lock()
	defer mu.Unlock()
	var sdmaOK uint64
	nbad := 0
	for i, pk := range pkts {
		want := int32(0)
		if pk.accepted {
			want = 1
		}
		if got := pk.dones.Load(); got != want && nbad < 10 {
			nbad++
			fail("packet %d (path %v, err %v): told Done %d times, want %d", i, pk.path, pk.err, got, want)
		}
		sdmaOK += uint64(pk.ok.Load())
	}
	st := us.Stats()
	if !rep.OK() || rep.Packets != st.Packets || !rep.Ended {
		fail("the receiver got %d of the %d datagrams the sink sent: %v", rep.Packets, st.Packets, rep.String())
	}
	lanes := map[int]uint64{}
	for _, e := range rep.Engines {
		lanes[e.Engine] = e.Packets
	}
	var engLanes, engErrs, ctxLanes, ctxErrs, chipSent uint64
	for i := range engines {
		engLanes += lanes[i]
		engErrs += sd.Engine(i).Stats().SinkErrors
	}
	for i := range contexts {
		ctxLanes += lanes[engines+i]
		cs := d.Context(i).Stats()
		ctxErrs += cs.SinkErrors
		chipSent += cs.Packets
	}
	if engLanes+engErrs != sdmaOK {
		fail("engines' lanes: %d received + %d sink errors; %d SDMA packets told Done(nil)", engLanes, engErrs, sdmaOK)
	}
	if ctxLanes+ctxErrs != chipSent {
		fail("contexts' lanes: %d received + %d sink errors; the chips sent %d", ctxLanes, ctxErrs, chipSent)
	}
	if st.Errors != engErrs+ctxErrs {
		fail("the sink's Errors %d; the engines' and contexts' SinkErrors %d + %d", st.Errors, engErrs, ctxErrs)
	}
	if testing.Verbose() {
		t.Logf("%s: %d packets, %d SDMA OK; sink %+v; %v", desc, len(pkts), sdmaOK, st, rep.String())
	}
}

// TestFaultSoakVerbsUDPSinkClose: see runUDPSinkCloseSoak.
func TestFaultSoakVerbsUDPSinkClose(t *testing.T) {
	soak.Seeds(t, 12, 3, 40*time.Millisecond, 15*time.Millisecond, runUDPSinkCloseSoak)
}
