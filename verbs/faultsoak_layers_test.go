package verbs

// Fault-schedule soak across the layers, with Closes racing everything (hunt hunt-close): the soaks
// before it run one layer over sdma (verbs, or usdma) and close each thing from one goroutine in a
// few fixed orders. Here one SDMA device (on its goroutines, polled, or Manual and driven) carries
// a verbs Device (flows over its engines and PIO contexts) and one or two usdma packet queues at
// once, whose txreqs come from package alloc's allocators behind a wrapper that now and then
// returns nothing (or, in some seeds, panics), while the device's Mapper refuses some mappings and,
// in some seeds, panics; the sink fails and panics, the engines and PIO contexts halt (planned and
// injected), stop, freeze and go idle, and the pin caches are invalidated with packets in flight.
// At seeded random moments, on goroutines of their own, come the Closes: the verbs Device's (twice
// at once in some seeds), each queue's (twice at once in some seeds, some under contexts that end
// in microseconds), and the SDMA device's (Close, Shutdown, or both at once; in one seed in four
// only at the end), so that a lower layer closes while the upper ones are busy as often as the
// other way round, while the flows send and drain and the queues submit and wait on; in three seeds
// in four one more Close comes from a callback (the sink, run by an engine or a PIO chip; a queue's
// Done; a flow packet's Completion): the verbs Device's, the first queue's or the SDMA device's,
// which must return nil or its documented refusal (ErrInvalid; a context's end). Then whatever a
// short context cut short is closed again, and the ledger: every packet a flow's Send accepted is
// told Done exactly once, no refused one (nor one whose Send the mapper's panic ended) is; every
// queue's Requests are its Done calls and its Completed+Failed, no slot is left QUEUED, no Done
// comes after a Close of its queue returned nil, every txreq is back in its allocator, nothing
// stays pinned or mapped; the engines' Completed+Aborted are the SDMA packets the flows and the
// queues handed them, the PIO contexts' Releases+Flushed the PIO packets the flows sent (every one
// of them run when any verbs Close returned nil), and the engines' and contexts' SinkErrors the
// sink's failures and panics; the flows' Sent counters are the Sends that returned nil. Every wait
// is bounded (a hang prints every goroutine); no goroutine is left (internal/soak).
// RVSOAK_SEED replays a seed.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
	"github.com/gosdma/gosdma/usdma"
)

const (
	lyMapPanic   = "layers soak: mapper panic"
	lyAllocPanic = "layers soak: allocator panic"
	lySinkPanic  = "layers soak: sink panic"
)

// lyMapper is the device's Mapper (a plain one: every add maps through MapSingle): every
// failEvery-th map is refused with dma.ErrMapping, every panicEvery-th panics.
type lyMapper struct {
	dma.Mapper
	calls                 atomic.Uint64
	failEvery, panicEvery uint64
}

func (m *lyMapper) draw() error {
	n := m.calls.Add(1)
	if m.panicEvery > 0 && n%m.panicEvery == 0 {
		panic(lyMapPanic)
	}
	if m.failEvery > 0 && n%m.failEvery == 0 {
		return fmt.Errorf("layers soak: mapping %d refused: %w", n, dma.ErrMapping)
	}
	return nil
}

func (m *lyMapper) MapSingle(buf []byte, dir dma.Direction) (dma.Addr, error) {
	if err := m.draw(); err != nil {
		return 0, err
	}
	return m.Mapper.MapSingle(buf, dir)
}

func (m *lyMapper) MapPage(p dma.Page, off, n int, dir dma.Direction) (dma.Addr, error) {
	if err := m.draw(); err != nil {
		return 0, err
	}
	return m.Mapper.MapPage(p, off, n, dir)
}

// lyAlloc is a queue's txreq allocator: every emptyEvery-th Get, and every Get while dry is set,
// returns nothing (alloc.ErrEmpty); every panicEvery-th panics.
type lyAlloc struct {
	alloc.Allocator[usdma.TxReq]
	stats                  func() alloc.Stats
	calls                  atomic.Uint64
	emptyEvery, panicEvery uint64
	dry                    atomic.Bool
}

func (a *lyAlloc) Get() (*usdma.TxReq, error) {
	n := a.calls.Add(1)
	if a.panicEvery > 0 && n%a.panicEvery == 0 {
		panic(lyAllocPanic)
	}
	if a.dry.Load() || (a.emptyEvery > 0 && n%a.emptyEvery == 0) {
		return nil, alloc.ErrEmpty
	}
	return a.Allocator.Get()
}

// lyWaitAlloc is an lyAlloc over an alloc.List that also has the List's waiting GetCtx (which
// the queue then waits in for a txreq; the faults are Get's only).
type lyWaitAlloc struct {
	*lyAlloc
	l *alloc.List[usdma.TxReq]
}

func (a lyWaitAlloc) GetCtx(ctx context.Context) (*usdma.TxReq, error) { return a.l.GetCtx(ctx) }

// lySink is the device's sink (the engines' and the PIO contexts'): it fails every failEvery-th
// packet and panics on every panicEvery-th, counting both.
type lySink struct {
	hook                  *lyHook // nil, or the seed's Close from the sink
	n                     atomic.Uint64
	failEvery, panicEvery uint64
	failed, panicked      atomic.Uint64
}

func (s *lySink) Deliver(int, [][]byte) error {
	s.hook.call()
	n := s.n.Add(1)
	if s.panicEvery > 0 && n%s.panicEvery == 0 {
		s.panicked.Add(1)
		panic(lySinkPanic)
	}
	if s.failEvery > 0 && n%s.failEvery == 0 {
		s.failed.Add(1)
		return errors.New("layers soak: sink failure")
	}
	return nil
}

// lyHook is the seed's one Close from a callback: on its at-th call (from the sink, a queue's
// Done, or a flow packet's Done, as the seed drew) it runs fire, a Close of some layer, there.
type lyHook struct {
	at    int64
	n     atomic.Int64
	fire  atomic.Pointer[func() error]
	what  string
	fired atomic.Bool
	err   error // fire's answer, written before fired is set
}

func (h *lyHook) call() {
	if h == nil || h.n.Add(1) != h.at {
		return
	}
	if f := h.fire.Load(); f != nil {
		h.err = (*f)()
		h.fired.Store(true)
	}
}

// lyPkt is one packet of a flow.
type lyPkt struct {
	hook     *lyHook // nil, or the seed's Close from a flow's Completion
	dones    atomic.Int32
	accepted bool
	path     Path
	err      error
}

func (p *lyPkt) Done(Path, error) {
	p.dones.Add(1)
	p.hook.call()
}

// lyQueue is one usdma queue of the soak and its ledger.
type lyQueue struct {
	pq    *usdma.PktQ
	a     *lyAlloc
	list  *alloc.List[usdma.TxReq] // the List under a, closed at a random moment; or nil
	dones atomic.Int64
	shut  atomic.Bool // a Close returned nil: no request may end after it
}

// lyCloser is one Close of the schedule: what, when, and its outcome.
type lyCloser struct {
	what  string
	at    time.Duration
	short time.Duration // > 0: under a context that ends this soon
	run   func(ctx context.Context) error
	err   error
}

func runLayersSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x1a7e45))
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mapper := &lyMapper{Mapper: iommu, failEvery: uint64([]int{0, 13, 61}[rng.IntN(3)])}
	if rng.IntN(3) == 0 {
		mapper.panicEvery = uint64(97 + rng.IntN(200))
	}
	hook := &lyHook{at: 1 + rng.Int64N(400)}
	hookAt := rng.IntN(4) // 0: none, 1: the sink, 2: a queue's Done, 3: a flow packet's Done
	sink := &lySink{failEvery: uint64([]int{0, 17, 71}[rng.IntN(3)]), panicEvery: uint64([]int{0, 0, 53, 149}[rng.IntN(4)])}
	cfg := sdma.Config{Engines: 1 + rng.IntN(2), RingSize: []int{64, 128, 512}[rng.IntN(3)], Mapper: mapper, Sink: sink}
	mode := rng.IntN(3) // 0 interrupt, 1 poll, 2 Manual
	switch mode {
	case 1:
		cfg.Completion = sdma.CompletePoll
	case 2:
		cfg.Manual = true
	}
	if hookAt == 1 {
		sink.hook = hook
	}
	sd, err := sdma.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sd.NumEngines() {
		if rng.IntN(2) == 0 {
			if err := sdmatest.SetFaults(sd.Engine(i), sdmatest.FaultPlan{HaltRate: 0.01, Seed: seed + uint64(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	vc := Config{SDMA: sd, Contexts: 1 + rng.IntN(3), PIOThreshold: []int{64, 256, 1024}[rng.IntN(3)], ManualPIO: cfg.Manual}
	if rng.IntN(2) == 0 {
		vc.PIOFaults = pio.FaultPlan{HaltRate: 0.01, Seed: seed}
	}
	d, err := New(vc)
	if err != nil {
		t.Fatal(err)
	}
	desc := fmt.Sprintf("seed %d (RVSOAK_SEED=%d): engines %d ring %d mode %d contexts %d threshold %d map fail/panic %d/%d sink fail/panic %d/%d",
		seed, seed, cfg.Engines, cfg.RingSize, mode, vc.Contexts, vc.PIOThreshold, mapper.failEvery, mapper.panicEvery, sink.failEvery, sink.panicEvery)
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

	// Packet memory, shared by the flows and the queues.
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = make([]byte, 4096+rng.IntN(12000))
		for k := range bufs[i] {
			bufs[i][k] = byte(k*7 + i)
		}
	}

	// The queues.
	const slots = 4
	nq := 1 + rng.IntN(2)
	qs := make([]*lyQueue, nq)
	for qi := range qs {
		q := &lyQueue{}
		a := &lyAlloc{emptyEvery: uint64([]int{0, 7, 29}[rng.IntN(3)])}
		if rng.IntN(4) == 0 {
			a.panicEvery = uint64(151 + rng.IntN(200))
		}
		if rng.IntN(2) == 0 {
			l, err := alloc.NewList[usdma.TxReq](4+rng.IntN(12), nil)
			if err != nil {
				t.Fatal(err)
			}
			a.Allocator, a.stats = l, l.Stats
			if rng.IntN(2) == 0 {
				q.list = l // closed under the busy queue, one of the Closes below
			}
		} else {
			s, err := alloc.NewSlab(alloc.SlabConfig[usdma.TxReq]{ObjectsPerSlab: 4 + rng.IntN(12), MaxSlabs: 1 + rng.IntN(2)})
			if err != nil {
				t.Fatal(err)
			}
			a.Allocator, a.stats = s, s.Stats
		}
		q.a = a
		qc := usdma.Config{Device: sd, Slots: slots, Alloc: a, Ctxt: uint16(qi), Timeout: 200 * time.Microsecond,
			DisableAHG: rng.IntN(3) == 0, PinLimit: []int{0, 4, usdma.NoPinLimit}[rng.IntN(3)]}
		if l, ok := a.Allocator.(*alloc.List[usdma.TxReq]); ok && rng.IntN(2) == 0 {
			qc.Alloc = lyWaitAlloc{a, l}
		}
		qc.Done = func(slot int, e usdma.CompEntry) {
			q.dones.Add(1)
			if hookAt == 2 {
				hook.call()
			}
			if q.shut.Load() {
				fail("queue %d slot %d ended after a Close returned nil", qi, slot)
			}
			if e.Status != usdma.Complete && e.Status != usdma.Error {
				fail("queue %d slot %d: Done with state %v", qi, slot, e.Status)
			}
		}
		q.pq, err = usdma.New(qc)
		if err != nil {
			t.Fatal(err)
		}
		qs[qi] = q
		_, waits := qc.Alloc.(lyWaitAlloc)
		desc += fmt.Sprintf(" q%d(empty %d panic %d ahg %v waits %v list closes %v)", qi, a.emptyEvery, a.panicEvery, !qc.DisableAHG, waits, q.list != nil)
	}

	// The Close a callback makes: the verbs Device's, the first queue's (under a context that
	// ends in 50 µs: it may wait for what only that callback's return brings), or the SDMA
	// device's. Each may refuse (ErrInvalid: its own callback, or a pass it would wait for).
	var fire func() error
	which := 1 + rng.IntN(3)
	if hookAt == 0 {
		which = 0
	}
	switch which {
	case 0:
	case 1:
		hook.what, fire = "verbs Close", d.Close
	case 2:
		hook.what, fire = "queue 0 Close", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Microsecond)
			defer cancel()
			err := qs[0].pq.Close(ctx)
			if err == nil {
				qs[0].shut.Store(true)
			}
			return err
		}
	default:
		hook.what, fire = "sdma Close", sd.Close
	}
	if fire != nil {
		hook.fire.Store(&fire)
		desc += fmt.Sprintf(" hook %d at %d: %s", hookAt, hook.at, hook.what)
	}

	var stopWork, stopBg atomic.Bool
	var work, bg sync.WaitGroup

	// The flows.
	var mu sync.Mutex
	var pkts []*lyPkt
	var mapPanics atomic.Int64
	nflows := 1 + rng.IntN(3)
	flows := make([]*Flow, nflows)
	for fl := range flows {
		flows[fl] = d.NewFlow(uint32(fl), 0)
	}
	sendOne := func(f *Flow, r *rand.Rand) (pk *lyPkt, closed bool) {
		b := bufs[r.IntN(len(bufs))]
		n := 1 + r.IntN(2*vc.PIOThreshold)
		off := r.IntN(len(b) - n)
		segs := [][]byte{b[off : off+n]}
		if k := r.IntN(n); k > 0 && r.IntN(2) == 0 {
			segs = [][]byte{b[off : off+k], b[off+k : off+n]}
		}
		pk = &lyPkt{}
		if hookAt == 3 {
			pk.hook = hook
		}
		wait := 20 * time.Second
		if r.IntN(4) == 0 {
			wait = time.Duration(r.IntN(200)) * time.Microsecond
		}
		ctx, cancel := context.WithTimeout(hctx, wait)
		defer cancel()
		defer func() {
			if p := recover(); p != nil {
				if p != lyMapPanic {
					panic(p)
				}
				mapPanics.Add(1)
				pk.err = errors.New("the mapper panicked")
			}
		}()
		pk.path, pk.err = f.Send(ctx, segs, pk)
		pk.accepted = pk.err == nil || (pk.path == PathSDMA && errors.Is(pk.err, sdma.ErrNotRunning))
		closed = errors.Is(pk.err, ErrClosed) || errors.Is(pk.err, sdma.ErrClosed)
		if !pk.accepted && !closed && !errors.Is(pk.err, sdma.ErrNotRunning) && !errors.Is(pk.err, pio.ErrNotRunning) &&
			!errors.Is(pk.err, sdma.ErrMapping) && !errors.Is(pk.err, context.DeadlineExceeded) {
			fail("Send: %v (path %v)", pk.err, pk.path)
		}
		return pk, closed
	}
	for fl, f := range flows {
		work.Add(1)
		go func() {
			defer work.Done()
			r := rand.New(rand.NewPCG(seed, uint64(fl)+1))
			for !stopWork.Load() {
				if r.IntN(40) == 0 {
					ctx, cancel := context.WithTimeout(hctx, time.Duration(r.IntN(500))*time.Microsecond)
					_ = f.Drain(ctx)
					cancel()
					continue
				}
				pk, closed := sendOne(f, r)
				mu.Lock()
				pkts = append(pkts, pk)
				mu.Unlock()
				if closed {
					time.Sleep(50 * time.Microsecond) // the rest of the run sends into a closed device
				}
			}
		}()
	}

	// The submitters: one per queue, messages round robin on the slots, each slot waited for
	// before it is used again.
	tmpl := usdma.Template{VL: 0, DLID: 0x1234, SLID: 0x42, Opcode: 0xc1, PKey: 0xffff, DestQP: 0x80, PSN: 7, JKey: 7}
	var allocPanics atomic.Int64
	for qi, q := range qs {
		work.Add(1)
		go func() {
			defer work.Done()
			r := rand.New(rand.NewPCG(seed, uint64(qi)+0x100))
			for i := 0; !stopWork.Load(); i++ {
				slot := i % slots
				if i >= slots {
					ctx, cancel := context.WithTimeout(hctx, 30*time.Second)
					_ = q.pq.Wait(ctx, slot) // the request's outcome may match a context's error too
					expired := ctx.Err() != nil
					cancel()
					if expired {
						fail("queue %d slot %d never ended: %v", qi, slot, q.pq.Comp(slot))
						return
					}
				}
				vecs := make([][]byte, 1+r.IntN(3))
				for k := range vecs {
					b := bufs[r.IntN(len(bufs))]
					off := r.IntN(len(b) - 1)
					vecs[k] = b[off : off+1+r.IntN(min(len(b)-off, 6000))]
				}
				info, hdr := usdma.Message(slot, []int{256, 1024, 4096}[r.IntN(3)], tmpl, vecs...)
				ctx, cancel := context.WithCancel(hctx)
				if r.IntN(4) == 0 {
					ctx, cancel = context.WithTimeout(hctx, time.Duration(r.IntN(300))*time.Microsecond)
				}
				if r.IntN(50) == 0 {
					q.a.dry.Store(true) // a drought: Gets return nothing until the next one
				} else if r.IntN(10) == 0 {
					q.a.dry.Store(false)
				}
				var err error
				func() {
					defer func() {
						if p := recover(); p != nil {
							if p != lyMapPanic && p != lyAllocPanic {
								panic(p)
							}
							allocPanics.Add(1)
							err = nil
						}
					}()
					err = q.pq.Submit(ctx, info, &hdr, vecs...)
				}()
				cancel()
				switch {
				case err == nil:
				case errors.Is(err, usdma.ErrClosed):
					time.Sleep(50 * time.Microsecond)
				case errors.Is(err, usdma.ErrNotRunning):
					time.Sleep(10 * time.Microsecond)
				case errors.Is(err, usdma.ErrFault), errors.Is(err, usdma.ErrNoMem),
					errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
				default:
					fail("queue %d: Submit: unexpected %v", qi, err)
				}
			}
		}()
	}

	// The drivers, the PIO chaos and the SDMA chaos.
	if cfg.Manual {
		bg.Add(1)
		go func() {
			defer bg.Done()
			for !stopBg.Load() {
				if d.Process() == 0 {
					time.Sleep(10 * time.Microsecond)
				}
			}
		}()
	}
	if mode != 0 {
		sdmatest.DriveEngines(sd, cfg.Manual, &stopBg, &bg)
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		r := rand.New(rand.NewPCG(seed, 0x5c))
		for !stopBg.Load() {
			sc := d.Context(r.IntN(d.NumContexts()))
			switch r.IntN(4) {
			case 0:
				_ = sc.InjectHalt()
			case 1:
				sc.ReturnCredits()
			}
			time.Sleep(time.Duration(100+r.IntN(400)) * time.Microsecond)
		}
	}()
	chaos := sdmatest.Chaos{Rand: rand.New(rand.NewPCG(seed, 0x99)), Memory: func(r *rand.Rand) {
		qs[r.IntN(len(qs))].pq.Invalidate(bufs[r.IntN(len(bufs))])
	}}
	if err := chaos.Run(sd, &stopBg, &bg); err != nil {
		t.Fatal(err)
	}

	// The Closes, each on its own goroutine at its own moment.
	var closers []*lyCloser
	add := func(what string, short bool, run func(ctx context.Context) error) {
		c := &lyCloser{what: what, at: dur/5 + time.Duration(rng.Int64N(int64(dur-dur/5))), run: run}
		if short {
			c.short = time.Duration(1+rng.IntN(100)) * time.Microsecond
		}
		closers = append(closers, c)
	}
	released := func() uint64 { // the PIO contexts' release callbacks run so far
		var n uint64
		for i := range d.NumContexts() {
			st := d.Context(i).Stats()
			n += st.Releases + st.Flushed
		}
		return n
	}
	var atClose []uint64 // released() as each verbs Close returned nil: no release comes after
	for k := range 1 + rng.IntN(2) {
		add(fmt.Sprintf("verbs Close %d", k), false, func(context.Context) error {
			err := d.Close()
			if err == nil {
				n := released()
				mu.Lock()
				atClose = append(atClose, n)
				mu.Unlock()
			}
			return err
		})
	}
	for qi, q := range qs {
		for k := range 1 + rng.IntN(2) {
			add(fmt.Sprintf("queue %d Close %d", qi, k), rng.IntN(3) == 0, q.pq.Close)
		}
		if q.list != nil {
			add(fmt.Sprintf("queue %d allocator Close", qi), false, func(context.Context) error { return q.list.Close() })
		}
	}
	sdmaLast := rng.IntN(4) == 0
	if !sdmaLast {
		switch rng.IntN(4) {
		case 0:
			add("sdma Close", false, func(context.Context) error { return sd.Close() })
		case 1:
			add("sdma Shutdown", rng.IntN(2) == 0, sd.Shutdown)
		case 2:
			add("sdma Close", false, func(context.Context) error { return sd.Close() })
			add("sdma Shutdown", rng.IntN(2) == 0, sd.Shutdown)
		default:
			add("sdma Close 0", false, func(context.Context) error { return sd.Close() })
			add("sdma Close 1", false, func(context.Context) error { return sd.Close() })
		}
	}
	desc += fmt.Sprintf(" sdmaLast %v closers %d", sdmaLast, len(closers))
	var cw sync.WaitGroup
	for _, c := range closers {
		cw.Add(1)
		go func() {
			defer cw.Done()
			time.Sleep(c.at)
			ctx, cancel := context.WithTimeout(hctx, 30*time.Second)
			if c.short > 0 {
				ctx, cancel = context.WithTimeout(hctx, c.short)
			}
			c.err = c.run(ctx)
			cancel()
		}()
	}
	time.Sleep(dur)
	waitFor(&cw, "the Closes")
	for _, c := range closers {
		switch {
		case c.err == nil:
		case c.short > 0 && errors.Is(c.err, context.DeadlineExceeded):
		default:
			fail("%s: %v", c.what, c.err)
		}
	}
	time.Sleep(dur / 4) // the flows and queues go on a while against what closed
	stopWork.Store(true)
	waitFor(&work, "the flows and the submitters")

	// What a short context cut short is closed again; the SDMA device last.
	if err := d.Close(); err != nil {
		fail("final verbs Close: %v", err)
	}
	for qi, q := range qs {
		ctx, cancel := context.WithTimeout(hctx, 30*time.Second)
		err := q.pq.Close(ctx)
		cancel()
		if err != nil {
			if hctx.Err() != nil {
				hang(fmt.Sprintf("queue %d: final Close", qi))
			}
			fail("queue %d: final Close: %v", qi, err)
		}
		q.shut.Store(true)
	}
	stopBg.Store(true)
	waitFor(&bg, "the drivers and the chaos")
	if err := sd.Close(); err != nil {
		fail("final sdma Close: %v", err)
	}
	for fl, f := range flows {
		if err := f.Drain(hctx); err != nil {
			if hctx.Err() != nil {
				hang(fmt.Sprintf("flow %d: Drain after the Closes", fl))
			}
			fail("flow %d: Drain: %v", fl, err)
		}
		if p, s := f.Busy(); p != 0 || s != 0 {
			fail("flow %d: busy %d PIO, %d SDMA after Drain", fl, p, s)
		}
	}

	// The ledger.
	if hook.fired.Load() {
		switch err := hook.err; {
		case err == nil, errors.Is(err, sdma.ErrInvalid), errors.Is(err, pio.ErrInvalid), errors.Is(err, usdma.ErrInvalid),
			errors.Is(err, context.DeadlineExceeded):
		default:
			fail("%s from a callback: %v", hook.what, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var okPIO, okSDMA, accPIO, accSDMA uint64
	nbad := 0
	for i, pk := range pkts {
		want := int32(0)
		if pk.accepted {
			want = 1
			if pk.path == PathPIO {
				accPIO++
				okPIO++
			} else {
				accSDMA++
				if pk.err == nil {
					okSDMA++
				}
			}
		}
		if got := pk.dones.Load(); got != want && nbad < 10 {
			nbad++
			fail("packet %d (path %v, err %v): told Done %d times, want %d", i, pk.path, pk.err, got, want)
		}
	}
	var sentPIO, sentSDMA uint64
	for _, f := range flows {
		sentPIO += f.Sent(PathPIO)
		sentSDMA += f.Sent(PathSDMA)
	}
	if sentPIO != okPIO || sentSDMA != okSDMA {
		fail("flows' Sent: %d PIO, %d SDMA; their Sends returned nil for %d PIO, %d SDMA", sentPIO, sentSDMA, okPIO, okSDMA)
	}
	var usdmaPkts uint64
	for qi, q := range qs {
		st := q.pq.Stats()
		usdmaPkts += st.Packets
		if st.Requests != uint64(q.dones.Load()) || st.Requests != st.Completed+st.Failed {
			fail("queue %d: Requests %d, Done calls %d, Completed %d + Failed %d", qi, st.Requests, q.dones.Load(), st.Completed, st.Failed)
		}
		for s := range slots {
			if c := q.pq.Comp(s); c.Status == usdma.Queued {
				fail("queue %d slot %d left QUEUED", qi, s)
			}
		}
		if n := q.a.stats().InUse; n != 0 {
			fail("queue %d: %d txreqs not back in the allocator", qi, n)
		}
		if n := st.Pins.Pages; n != 0 {
			fail("queue %d: %d pages still pinned", qi, n)
		}
	}
	var completed, aborted, sinkErrs uint64
	for i := range sd.NumEngines() {
		st := sd.Engine(i).Stats()
		completed += st.Completed
		aborted += st.Aborted
		sinkErrs += st.SinkErrors
	}
	if completed+aborted != accSDMA+usdmaPkts {
		fail("engines completed %d + aborted %d txreqs; the flows handed them %d, the queues %d", completed, aborted, accSDMA, usdmaPkts)
	}
	for i := range d.NumContexts() {
		sinkErrs += d.Context(i).Stats().SinkErrors
	}
	if n := released(); n != accPIO {
		fail("PIO contexts released %d buffers; the flows sent %d PIO packets", n, accPIO)
	} else {
		for k, at := range atClose {
			if at != n {
				fail("verbs Close %d returned with %d of the %d PIO releases run", k, at, n)
			}
		}
	}
	if want := sink.failed.Load() + sink.panicked.Load(); sinkErrs != want {
		fail("engines' and contexts' SinkErrors %d; the sink failed %d and panicked %d times", sinkErrs, sink.failed.Load(), sink.panicked.Load())
	}
	if n := iommu.LiveCount(); n != 0 {
		fail("%d mappings left after every Close", n)
	}
	if n := sd.UnmapErrors(); n != 0 {
		fail("%d unmap errors", n)
	}
	if testing.Verbose() {
		t.Logf("%s: %d packets (%d PIO, %d SDMA accepted), %d usdma packets, %d mapper panics in Send, %d panics in Submit; hook fired %v: %v",
			desc, len(pkts), accPIO, accSDMA, usdmaPkts, mapPanics.Load(), allocPanics.Load(), hook.fired.Load(), hook.err)
	}
}

// TestFaultSoakLayersClose: see runLayersSoak.
func TestFaultSoakLayersClose(t *testing.T) {
	soak.Seeds(t, 16, 4, 40*time.Millisecond, 15*time.Millisecond, runLayersSoak)
}
