package sdma_test

// Fault-schedule soak of the interleavings the other soaks do not draw together (hunt hfault):
// concurrent Deregisters of one registration (two or three at once, some under a context that is
// already done or ends while the packets are in flight, so that the wait is given up and taken
// over) beside packets that point into it; completion callbacks that send the next txreq of their
// producer from inside the pass (a halt's sw clean, Stop's, Close's included) and callbacks that
// panic; producers of every kind on one engine (Send with ParkOrRetry, SendList with DeferOrRetry,
// SendWait under contexts already done, expiring or cancelled from another goroutine, IOWait.Drain
// under short contexts); engines on their own goroutine, Manual ones driven by a goroutine, and
// Manual or polled ones driven inline by the producers themselves; map and Translate faults, sink
// failures and panics, planned and injected halts, Stop/Start, events and freezes; then the chaos
// stops, every engine must run again and carry a probe packet to the sink, and the device closes
// (Close, Shutdown, or both at once) while the producers go on. The whole run is bounded by a
// context: a hang fails the seed with every goroutine's stack. The ledger: every txreq a send took
// completes exactly once, StatusOK exactly when the sink was handed it (once), never read by the
// sink after it completed; no refused txreq completes; the Stats of the engines agree with the
// completions, deliveries, sink failures and callback panics seen; every registration is
// deregistered by exactly one Deregister that returned nil; nothing stays mapped; no goroutine is
// left (internal/soak). RVSOAK_SEED replays a seed.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/internal/splitmix"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// mxRec is one txreq of the mix soak and its ledger line.
type mxRec struct {
	tx      sdma.TxReq
	l       *mxLedger
	id      uint32
	eng     int
	hdr     [8]byte
	want    []byte // the packet as the sink must see it (padded)
	panicky bool   // the callback panics after it recorded the completion
	next    *mxRec // sent by the callback (built by the producer), or nil

	accepted  atomic.Bool
	done      atomic.Int32
	st        atomic.Int32
	delivered atomic.Int32 // Deliver calls that saw it (failed and panicked ones included)
}

func (r *mxRec) Complete(_ *sdma.TxReq, st sdma.Status) {
	r.st.Store(int32(st))
	if r.done.Add(1) != 1 {
		r.l.badf("txreq %d completed twice", r.id)
	}
	if r.next != nil {
		r.l.chainSend(r.next)
	}
	if r.panicky {
		r.l.cbPanics.Add(1)
		panic("mxRec: panicked on purpose")
	}
}

// mxBuf is one buffer of fixed bytes registered with the device now and then.
type mxBuf struct {
	b   []byte
	mu  sync.Mutex        // guards reg (the registration current for new Deregisters) and all
	reg *dma.Registration // nil: not registered now
	all []*dma.Registration
}

// mxLedger is the soak's shared state.
type mxLedger struct {
	dev  *sdma.Device
	seed uint64
	mu   sync.Mutex
	recs map[uint32]*mxRec
	all  []*mxRec
	bad  []string

	nextID      atomic.Uint32
	sinkFaults  atomic.Bool   // the sink fails and panics on purpose while set
	sinkFailed  atomic.Uint64 // deliveries failed or panicked on purpose
	cbPanics    atomic.Uint64 // completion callbacks that panicked on purpose
	chainRefuse atomic.Uint64 // chained sends refused (ErrBusy, ErrClosed)

	bufs     []*mxBuf
	deregsOK sync.Map // *dma.Registration -> *atomic.Int32: Deregisters that returned nil
}

func (l *mxLedger) badf(format string, args ...any) {
	l.mu.Lock()
	if len(l.bad) < 20 {
		l.bad = append(l.bad, fmt.Sprintf(format, args...))
	}
	l.mu.Unlock()
}

// Deliver checks the packet against its record.
func (l *mxLedger) Deliver(engine int, segs [][]byte) error {
	var p []byte
	for _, b := range segs {
		p = append(p, b...)
	}
	if len(p) < 8 {
		l.badf("engine %d: runt of %d bytes", engine, len(p))
		return nil
	}
	id := binary.LittleEndian.Uint32(p)
	l.mu.Lock()
	r := l.recs[id]
	l.mu.Unlock()
	switch {
	case r == nil:
		l.badf("engine %d: unknown packet %d", engine, id)
		return nil
	case r.eng != engine:
		l.badf("packet %d of engine %d on engine %d", id, r.eng, engine)
	case string(p) != string(r.want):
		l.badf("packet %d: bytes differ", id)
	}
	if r.done.Load() != 0 {
		l.badf("packet %d read after its txreq completed", id)
	}
	r.delivered.Add(1)
	if l.sinkFaults.Load() {
		switch h := splitmix.Mix(uint64(id) ^ l.seed<<32); {
		case h%29 == 0:
			l.sinkFailed.Add(1)
			return errors.New("mx sink: failed on purpose")
		case h%89 == 1:
			l.sinkFailed.Add(1)
			panic("mx sink: panicked on purpose")
		}
	}
	return nil
}

// mxBatch is the ledger as a BatchSink: Queue keeps the slice headers (never the bytes, which the
// engine keeps mapped and unchanged until the Flush returns), failing one packet in 41 at once
// while the sink's faults are on; Flush delivers them in order through Deliver, which checks
// them as they are read then.
type mxBatch struct {
	*mxLedger
	pkts, bytes int
	held        [sdma.MaxEngines][][][]byte
}

func (b *mxBatch) BatchLimit() (int, int) { return b.pkts, b.bytes }

func (b *mxBatch) Queue(engine int, segs [][]byte) error {
	if b.sinkFaults.Load() && len(segs[0]) >= 4 && splitmix.Mix(uint64(binary.LittleEndian.Uint32(segs[0]))+b.seed)%41 == 0 {
		id := binary.LittleEndian.Uint32(segs[0])
		b.mu.Lock()
		r := b.recs[id]
		b.mu.Unlock()
		if r != nil {
			r.delivered.Add(1) // handed to the sink (Stats.Packets counts it)
		}
		b.sinkFailed.Add(1)
		return errors.New("mx batch: refused at Queue")
	}
	b.held[engine] = append(b.held[engine], append([][]byte(nil), segs...))
	return nil
}

func (b *mxBatch) Flush(engine int, errs []error) {
	h := b.held[engine]
	if len(h) != len(errs) {
		b.badf("engine %d: Flush of %d errs for %d queued", engine, len(errs), len(h))
	}
	for i, segs := range h {
		if i < len(errs) {
			errs[i] = b.deliverSafe(engine, segs)
		}
	}
	clear(h)
	b.held[engine] = h[:0]
}

func (b *mxBatch) deliverSafe(engine int, segs [][]byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return b.Deliver(engine, segs)
}

// build makes a txreq for engine eng: its id and engine as the first piece, then one to three
// pieces from its own bytes or from the shared buffers (registered or not at the time). It returns
// nil if an add failed (a map fault, the device closed: the add cleaned the txreq).
func (l *mxLedger) build(eng int, rng *rand.Rand) *mxRec {
	r := &mxRec{l: l, id: l.nextID.Add(1), eng: eng, panicky: rng.IntN(40) == 0}
	binary.LittleEndian.PutUint32(r.hdr[:], r.id)
	binary.LittleEndian.PutUint32(r.hdr[4:], uint32(eng))
	pieces := [][]byte{r.hdr[:]}
	for range 1 + rng.IntN(3) {
		ln := 1 + rng.IntN(700)
		if rng.IntN(2) == 0 {
			own := make([]byte, ln)
			for i := range own {
				own[i] = byte(int(r.id)*7 + i)
			}
			pieces = append(pieces, own)
			continue
		}
		b := l.bufs[rng.IntN(len(l.bufs))].b
		off := rng.IntN(len(b) - ln)
		pieces = append(pieces, b[off:off+ln])
	}
	tlen := 0
	for _, pc := range pieces {
		r.want = append(r.want, pc...)
		tlen += len(pc)
	}
	r.want = promPad(r.want)
	if err := r.tx.Init(0, tlen, r); err != nil {
		l.badf("Init: %v", err)
		return nil
	}
	l.mu.Lock()
	l.recs[r.id] = r
	l.all = append(l.all, r)
	l.mu.Unlock()
	for _, pc := range pieces {
		if err := r.tx.AddKVAddr(l.dev, pc); err != nil {
			if !errors.Is(err, sdma.ErrMapping) && !errors.Is(err, sdma.ErrClosed) {
				l.badf("txreq %d: add: %v", r.id, err)
			}
			return nil
		}
	}
	return r
}

// refused gives back a txreq a send did not take (and the chained one it would have sent).
func (l *mxLedger) refused(r *mxRec) {
	for ; r != nil; r = r.next {
		r.accepted.Store(false)
		if err := r.tx.Clean(); err != nil {
			l.badf("txreq %d: Clean: %v", r.id, err)
		}
	}
}

// chainSend is a callback's send of the next txreq, from inside the completion pass.
func (l *mxLedger) chainSend(n *mxRec) {
	n.accepted.Store(true)
	err := l.dev.Engine(n.eng).Send(nil, &n.tx, false)
	switch {
	case err == nil, errors.Is(err, sdma.ErrNotRunning):
	case errors.Is(err, sdma.ErrBusy), errors.Is(err, sdma.ErrClosed):
		l.chainRefuse.Add(1)
		l.refused(n)
	default:
		l.badf("chained send of txreq %d: %v", n.id, err)
		l.refused(n)
	}
}

// mxMode is how a seed's engines are driven.
type mxMode int

const (
	mxGoroutine  mxMode = iota // the engine's own goroutine, completion on interrupts
	mxPollDriven               // own goroutine, CompletePoll, a driver goroutine polls
	mxManual                   // Manual, a driver goroutine runs Process and Poll
	mxInline                   // Manual (or polled), the producers run Process and Poll themselves
)

func (m mxMode) String() string {
	return [...]string{"goroutine", "poll-driven", "manual-driven", "inline"}[m]
}

// mxHang fails t with every goroutine's stack: ctx bounded the soak and ended first.
func mxHang(t *testing.T, seed uint64, what string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	t.Fatalf("seed %d (RVSOAK_SEED=%d): hang: %s\n%s", seed, seed, what, buf)
}

func runMixSoak(t *testing.T, seed uint64, perProducer int) {
	rng := rand.New(rand.NewPCG(seed, 0x4fa1))
	mode := mxMode(rng.IntN(4))
	engines := 1 + rng.IntN(3)
	ringSize := 64 << rng.IntN(2)
	translate := rng.IntN(2) == 0
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	fi := dma.NewFaultInjector(iommu)
	l := &mxLedger{seed: seed, recs: make(map[uint32]*mxRec)}
	for i := range 3 {
		b := &mxBuf{b: make([]byte, 2*dma.PageSize)}
		for k := range b.b {
			b.b[k] = byte(k*5 + i)
		}
		l.bufs = append(l.bufs, b)
	}
	cfg := sdma.Config{Mapper: fi, Engines: engines, RingSize: ringSize, DescIntr: 1 + rng.IntN(ringSize), Sink: l}
	batch := rng.IntN(2) == 0
	if batch {
		bs := &mxBatch{mxLedger: l, pkts: 2 + rng.IntN(8)}
		if rng.IntN(2) == 0 {
			bs.bytes = 1 + rng.IntN(6000)
		}
		cfg.Sink = bs
	}
	switch mode {
	case mxPollDriven:
		cfg.Completion = sdma.CompletePoll
	case mxManual:
		cfg.Manual = true
	case mxInline:
		if rng.IntN(2) == 0 {
			cfg.Manual = true
		} else {
			cfg.Completion = sdma.CompletePoll
		}
	}
	dev, err := sdma.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.dev = dev
	t.Logf("seed %d: %v (manual %v, poll %v), %d engines, ring %d, batch %v, translate faults %v", seed, mode, cfg.Manual, cfg.Completion == sdma.CompletePoll, engines, ringSize, batch, translate)
	for _, b := range l.bufs {
		reg, err := dev.Register(b.b)
		if err != nil {
			t.Fatal(err)
		}
		b.reg, b.all = reg, append(b.all, reg)
	}
	l.sinkFaults.Store(true)
	for i := range engines {
		if err := sdmatest.SetFaults(dev.Engine(i), sdmatest.FaultPlan{HaltRate: 0.003, Seed: seed + uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fi.FailFraction(0.01, int64(seed)); err != nil {
		t.Fatal(err)
	}

	// The whole run is bounded: a wait past hctx is a hang.
	hctx, hcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer hcancel()
	var hung atomic.Value // string: what hung first
	hang := func(what string) {
		hung.CompareAndSwap(nil, what)
	}

	inline := mode == mxInline
	drive := func(e *sdma.Engine) {
		if cfg.Manual {
			_, _ = e.Process()
		}
		e.Poll()
	}
	var drvStop atomic.Bool
	var drvWG sync.WaitGroup
	if mode == mxPollDriven || mode == mxManual {
		sdmatest.DriveEngines(dev, cfg.Manual, &drvStop, &drvWG)
	}

	// Producers: nprod per engine, kinds by pid.
	var prodWG sync.WaitGroup
	var closed atomic.Bool // the device's Close (or Shutdown) has begun
	waiters := make([]*sdma.IOWait, 0)
	var wmu sync.Mutex
	nprod := 2 + rng.IntN(2)
	for pid := range engines * nprod {
		prodWG.Add(1)
		go func(pid int) {
			defer prodWG.Done()
			prng := rand.New(rand.NewPCG(seed, uint64(pid)+100))
			eng := pid % engines
			e := dev.Engine(eng)
			kind := (pid / engines) % 3
			woken := make(chan struct{}, 1)
			var w sdma.IOWait
			wmu.Lock()
			waiters = append(waiters, &w)
			wmu.Unlock()
			// A roaming producer sends each burst to an engine drawn anew (a QP whose engine
			// changes between bursts), its one IOWait with it.
			roam := engines > 1 && prng.IntN(3) == 0
			w.Init(func(se *sdma.Engine, w *sdma.IOWait, tx *sdma.TxReq, seq uint32, pktsSent bool) error {
				if kind == 1 {
					return se.DeferOrRetry(w, tx, seq, pktsSent)
				}
				return se.ParkOrRetry(w, tx, seq, pktsSent)
			}, func(*sdma.IOWait, int) {
				select {
				case woken <- struct{}{}:
				default:
				}
			}, nil)
			// waitWake waits for w's wakeup (running the engine itself when inline).
			waitWake := func() bool {
				for {
					select {
					case <-woken:
						return true
					case <-hctx.Done():
						hang(fmt.Sprintf("producer %d: parked, never woken (state %v, waiting %v)", pid, sdmatest.EngineState(e), e.Waiting(&w)))
						return false
					default:
					}
					if inline {
						drive(e)
					}
					runtime.Gosched()
				}
			}
			// mk builds one txreq, with a chained one now and then.
			mk := func() *mxRec {
				r := l.build(eng, prng)
				if r != nil && prng.IntN(8) == 0 {
					r.next = l.build(prng.IntN(engines), prng) // on any engine: a callback of one engine sends on another
				}
				return r
			}
			afterClose := 0
			for sent := 0; sent < perProducer || !closed.Load(); sent++ {
				if hctx.Err() != nil {
					return
				}
				if closed.Load() {
					if afterClose++; afterClose > 20 {
						return
					}
				}
				if roam {
					eng = prng.IntN(engines)
					e = dev.Engine(eng)
				}
				if prng.IntN(50) == 0 {
					ctx, cancel := context.WithTimeout(hctx, time.Duration(prng.IntN(300))*time.Microsecond)
					if err := w.Drain(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
						l.badf("producer %d: Drain: %v", pid, err)
					}
					cancel()
				}
				switch kind {
				case 0: // Send with ParkOrRetry
					r := mk()
					if r == nil {
						continue
					}
					r.accepted.Store(true)
					for {
						err := e.Send(&w, &r.tx, true)
						if err == nil || errors.Is(err, sdma.ErrNotRunning) {
							break
						}
						if errors.Is(err, sdma.ErrClosed) {
							l.refused(r)
							break
						}
						if !errors.Is(err, sdma.ErrBusy) {
							l.badf("producer %d: Send: %v", pid, err)
							l.refused(r)
							return
						}
						if !waitWake() {
							return
						}
						if got := w.TxHead().PopFront(); got != &r.tx {
							l.badf("producer %d: TxHead front %p, want the parked txreq", pid, got)
							return
						}
					}
				case 1: // SendList with DeferOrRetry
					var list sdma.TxList
					var batch []*mxRec
					for k := 1 + prng.IntN(6); k > 0; k-- {
						if r := mk(); r != nil {
							batch = append(batch, r)
							list.PushBack(&r.tx)
						}
					}
					taken := 0
					for list.Len() > 0 {
						for _, r := range batch[taken:] {
							r.accepted.Store(true)
						}
						n, err := e.SendList(&w, &list)
						taken += n
						for _, r := range batch[taken:] {
							r.accepted.Store(false)
						}
						switch {
						case err == nil && list.Len() == 0, errors.Is(err, sdma.ErrNotRunning):
						case errors.Is(err, sdma.ErrBusy):
							if !waitWake() {
								return
							}
						case errors.Is(err, sdma.ErrClosed):
							for list.PopFront() != nil {
							}
							for _, r := range batch[taken:] {
								l.refused(r)
							}
							taken = len(batch)
						default:
							l.badf("producer %d: SendList: %v (%d left)", pid, err, list.Len())
							return
						}
					}
				default: // SendWait under contexts done already, expiring, or cancelled by another goroutine
					r := mk()
					if r == nil {
						continue
					}
					for {
						var ctx context.Context
						var cancel context.CancelFunc
						stop := func() bool { return true }
						switch prng.IntN(4) {
						case 0:
							ctx, cancel = context.WithCancel(hctx)
							cancel()
						case 1:
							ctx, cancel = context.WithTimeout(hctx, time.Duration(prng.IntN(200))*time.Microsecond)
						case 2:
							ctx, cancel = context.WithCancel(hctx)
							tm := time.AfterFunc(time.Duration(prng.IntN(100))*time.Microsecond, cancel)
							stop = tm.Stop
						default:
							ctx, cancel = context.WithCancel(hctx)
						}
						r.accepted.Store(true)
						err := e.SendWait(ctx, &r.tx)
						stop()
						cancel()
						if err == nil || errors.Is(err, sdma.ErrNotRunning) {
							break
						}
						r.accepted.Store(false)
						if errors.Is(err, sdma.ErrClosed) {
							l.refused(r)
							break
						}
						if hctx.Err() != nil {
							hang(fmt.Sprintf("producer %d: SendWait: %v", pid, err))
							l.refused(r)
							return
						}
						if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
							l.badf("producer %d: SendWait: %v", pid, err)
							l.refused(r)
							return
						}
					}
				}
				if inline && prng.IntN(2) == 0 {
					drive(e)
				}
			}
		}(pid)
	}

	// Deregister chaos: two or three goroutines deregister the buffers' current registrations at
	// once, under contexts done already, short or long, and register them again once one of
	// them deregistered.
	var chaosStop atomic.Bool
	var chaosWG sync.WaitGroup
	startChaos := func() {
		for g := range 2 + rng.IntN(2) {
			chaosWG.Add(1)
			go func(g int) {
				defer chaosWG.Done()
				crng := rand.New(rand.NewPCG(seed, uint64(g)+0xde))
				for !chaosStop.Load() && hctx.Err() == nil {
					b := l.bufs[crng.IntN(len(l.bufs))]
					b.mu.Lock()
					reg := b.reg
					if reg == nil {
						if crng.IntN(2) == 0 {
							if nr, err := dev.Register(b.b); err == nil {
								b.reg, b.all = nr, append(b.all, nr)
							} else if !errors.Is(err, sdma.ErrClosed) {
								l.badf("Register: %v", err)
							}
						}
						b.mu.Unlock()
						time.Sleep(time.Duration(crng.IntN(200)) * time.Microsecond)
						continue
					}
					b.mu.Unlock()
					var ctx context.Context
					var cancel context.CancelFunc
					switch crng.IntN(3) {
					case 0:
						ctx, cancel = context.WithCancel(hctx)
						cancel()
					case 1:
						ctx, cancel = context.WithTimeout(hctx, time.Duration(crng.IntN(1500))*time.Microsecond)
					default:
						ctx, cancel = context.WithTimeout(hctx, time.Duration(crng.IntN(20))*time.Millisecond)
					}
					err := dev.Deregister(ctx, reg)
					cancel()
					switch {
					case err == nil:
						c, _ := l.deregsOK.LoadOrStore(reg, new(atomic.Int32))
						c.(*atomic.Int32).Add(1)
						b.mu.Lock()
						if b.reg == reg {
							b.reg = nil
						}
						b.mu.Unlock()
					case errors.Is(err, dma.ErrNotMapped), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
					default:
						l.badf("Deregister: %v", err)
					}
				}
			}(g)
		}
		// Engine chaos.
		chaosWG.Add(1)
		go func() {
			defer chaosWG.Done()
			crng := rand.New(rand.NewPCG(seed, 0xc4a0))
			for !chaosStop.Load() && hctx.Err() == nil {
				time.Sleep(time.Duration(20+crng.IntN(300)) * time.Microsecond)
				e := dev.Engine(crng.IntN(engines))
				var err error
				switch crng.IntN(12) {
				case 0, 1:
					err = sdmatest.InjectHalt(e, sdma.CauseNone+1+sdma.HaltCause(crng.IntN(int(sdma.NumHaltCauses)-1)))
				case 2:
					err = e.Stop()
					if err == nil && crng.IntN(3) != 0 {
						time.Sleep(time.Duration(crng.IntN(200)) * time.Microsecond)
						err = e.Start()
					}
				case 3:
					err = e.Start()
				case 4:
					ev := sdmatest.Event(crng.IntN(14))
					err = sdmatest.RaiseEvent(e, ev, "mix chaos")
				case 5:
					err = sdmatest.FreezeNotify(dev, crng.IntN(2) == 0)
					if err == nil && crng.IntN(2) == 0 {
						err = sdmatest.Freeze(dev)
						if err == nil && crng.IntN(2) == 0 {
							err = sdmatest.Unfreeze(dev)
						}
					}
				case 6:
					if translate {
						fi.FailTranslate(true)
						time.Sleep(time.Duration(crng.IntN(60)) * time.Microsecond)
						fi.FailTranslate(false)
					}
				case 7:
					err = sdmatest.SetFaults(e, sdmatest.FaultPlan{HaltAt: 1 + crng.IntN(60), HaltCause: sdma.HaltCause(crng.IntN(int(sdma.NumHaltCauses))), HaltRate: 0.003, Seed: seed})
				case 8:
					e.ProgressSchedule()
				default:
					for i := 0; i < engines && err == nil; i++ {
						err = gsRun(dev.Engine(i))
					}
				}
				if err != nil && !errors.Is(err, sdma.ErrNotRunning) && !errors.Is(err, sdma.ErrClosed) {
					l.badf("chaos: %v", err)
					return
				}
				err = nil
				if crng.IntN(3) != 0 {
					for i := 0; i < engines && err == nil; i++ {
						err = gsRun(dev.Engine(i))
					}
					if err != nil && !errors.Is(err, sdma.ErrClosed) {
						l.badf("chaos: run: %v", err)
						return
					}
				}
			}
		}()

	}
	startChaos()

	// Let the producers send their share, then stop the chaos and the faults.
	for {
		l.mu.Lock()
		n := len(l.all)
		l.mu.Unlock()
		if n >= engines*nprod*perProducer/2 || hctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	chaosStop.Store(true)
	chaosWG.Wait()
	fi.FailTranslate(false)
	if err := fi.FailFraction(0, 0); err != nil {
		t.Fatal(err)
	}
	l.sinkFaults.Store(false)
	for i := range engines {
		e := dev.Engine(i)
		if err := sdmatest.SetFaults(e, sdmatest.FaultPlan{}); err != nil {
			t.Fatal(err)
		}
		if err := gsRun(e); err != nil {
			t.Fatalf("seed %d: engine %d does not run again: %v", seed, i, err)
		}
	}
	// Each engine runs again: a probe reaches the sink and completes OK. (The plan is taken by
	// the next pass: a halt the old plan had due before it may still come, and the probe is
	// then aborted; the engine is brought back and the probe sent again.)
	for i := range engines {
		e := dev.Engine(i)
		for try := 0; ; try++ {
			if hctx.Err() != nil {
				mxHang(t, seed, fmt.Sprintf("probe of engine %d", i))
			}
			if err := gsRun(e); err != nil {
				t.Fatalf("seed %d: engine %d does not run again: %v", seed, i, err)
			}
			var p *mxRec
			for p == nil {
				p = l.build(i, rng)
			}
			p.panicky, p.next = false, nil
			p.accepted.Store(true)
			err := e.SendWait(hctx, &p.tx)
			if err != nil && !errors.Is(err, sdma.ErrNotRunning) {
				t.Fatalf("seed %d: probe of engine %d: %v", seed, i, err)
			}
			for p.done.Load() == 0 && hctx.Err() == nil {
				if inline {
					drive(e)
				}
				runtime.Gosched()
			}
			if sdma.Status(p.st.Load()) == sdma.StatusOK {
				if p.delivered.Load() != 1 {
					t.Fatalf("seed %d: probe of engine %d OK, delivered %d times", seed, i, p.delivered.Load())
				}
				break
			}
			if try == 20 {
				t.Fatalf("seed %d: engine %d: 20 probes aborted (state %v)", seed, i, sdmatest.EngineState(e))
			}
		}
	}

	// Close at a random point while the producers go on: Close, Shutdown, or both at once.
	time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
	closeChaos := rng.IntN(2) == 0 // the chaos (engines and Deregisters) runs on through the close
	if closeChaos {
		chaosStop.Store(false)
		startChaos()
	}
	closed.Store(true)
	how := rng.IntN(3)
	closeDone := make(chan error, 2)
	sctx, scancel := context.WithTimeout(hctx, time.Duration(rng.IntN(3000))*time.Microsecond)
	defer scancel()
	switch how {
	case 0:
		go func() { closeDone <- dev.Close() }()
		closeDone <- nil
	case 1:
		go func() {
			err := dev.Shutdown(sctx)
			if errors.Is(err, context.DeadlineExceeded) {
				err = nil
			}
			closeDone <- err
		}()
		closeDone <- nil
	default:
		go func() { closeDone <- dev.Close() }()
		go func() {
			err := dev.Shutdown(sctx)
			if errors.Is(err, context.DeadlineExceeded) {
				err = nil
			}
			closeDone <- err
		}()
	}
	for range 2 {
		select {
		case err := <-closeDone:
			if err != nil {
				t.Fatalf("seed %d: close (%d): %v", seed, how, err)
			}
		case <-hctx.Done():
			mxHang(t, seed, "Close/Shutdown")
		}
	}
	chaosStop.Store(true)
	chaosWG.Wait()
	// Close returned: every txreq is done, Close is idempotent.
	if err := dev.Close(); err != nil {
		t.Fatalf("seed %d: second Close: %v", seed, err)
	}
	pdone := make(chan struct{})
	go func() { prodWG.Wait(); close(pdone) }()
	select {
	case <-pdone:
	case <-hctx.Done():
		mxHang(t, seed, "producers after Close")
	}
	drvStop.Store(true)
	drvWG.Wait()
	if h := hung.Load(); h != nil {
		mxHang(t, seed, h.(string))
	}

	// Every registration is deregistered by exactly one Deregister that returned nil.
	for _, b := range l.bufs {
		for _, reg := range b.all {
			err := dev.Deregister(hctx, reg)
			if err == nil {
				c, _ := l.deregsOK.LoadOrStore(reg, new(atomic.Int32))
				c.(*atomic.Int32).Add(1)
			} else if !errors.Is(err, dma.ErrNotMapped) {
				t.Fatalf("seed %d: final Deregister: %v", seed, err)
			}
			c, _ := l.deregsOK.Load(reg)
			if c == nil || c.(*atomic.Int32).Load() != 1 {
				t.Fatalf("seed %d: a registration deregistered %v times", seed, c)
			}
		}
	}
	if live := iommu.Live(); len(live) != 0 {
		t.Fatalf("seed %d: mappings left: %v", seed, live)
	}
	if n := dev.UnmapErrors(); n != 0 {
		t.Fatalf("seed %d: %d unmap errors", seed, n)
	}
	for i, w := range waiters {
		if w.Busy() != 0 {
			t.Fatalf("seed %d: producer %d: %d txreqs in flight after Close", seed, i, w.Busy())
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.bad {
		t.Errorf("seed %d: %s", seed, s)
	}
	var ok, aborted, delivered uint64
	for _, r := range l.all {
		d, n := r.done.Load(), r.delivered.Load()
		delivered += uint64(n)
		if !r.accepted.Load() {
			if d != 0 || n != 0 {
				t.Fatalf("seed %d: txreq %d not taken but completed %d times, delivered %d", seed, r.id, d, n)
			}
			continue
		}
		if d != 1 {
			t.Fatalf("seed %d: txreq %d taken, completed %d times", seed, r.id, d)
		}
		switch st := sdma.Status(r.st.Load()); st {
		case sdma.StatusOK:
			ok++
			if n != 1 {
				t.Fatalf("seed %d: txreq %d OK, delivered %d times", seed, r.id, n)
			}
		case sdma.StatusAborted:
			aborted++
			if n != 0 {
				t.Fatalf("seed %d: txreq %d aborted, delivered %d times", seed, r.id, n)
			}
		default:
			t.Fatalf("seed %d: txreq %d: status %v", seed, r.id, st)
		}
	}
	var sum sdma.EngineStats
	for i := range engines {
		s := dev.Engine(i).Stats()
		var by uint64
		for c, h := range s.Halts {
			by += h
			sum.Halts[c] += h
		}
		if by != s.Faults {
			t.Errorf("seed %d: engine %d: %d faults, halts by cause add up to %d", seed, i, s.Faults, by)
		}
		sum.Completed += s.Completed
		sum.Aborted += s.Aborted
		sum.Packets += s.Packets
		sum.SinkErrors += s.SinkErrors
		sum.CallbackPanics += s.CallbackPanics
		sum.Faults += s.Faults
		sum.Recoveries += s.Recoveries
	}
	if sum.Completed != ok || sum.Aborted != aborted {
		t.Errorf("seed %d: Stats: %d completed, %d aborted; seen %d OK, %d aborted", seed, sum.Completed, sum.Aborted, ok, aborted)
	}
	if sum.Packets != delivered {
		t.Errorf("seed %d: Stats: %d packets; the sink was handed %d", seed, sum.Packets, delivered)
	}
	if sum.SinkErrors != l.sinkFailed.Load() {
		t.Errorf("seed %d: Stats: %d sink errors; the sink failed %d", seed, sum.SinkErrors, l.sinkFailed.Load())
	}
	if sum.CallbackPanics != l.cbPanics.Load() {
		t.Errorf("seed %d: Stats: %d callback panics; %d panicked", seed, sum.CallbackPanics, l.cbPanics.Load())
	}
	if n := iommu.Faults(); n != 0 {
		t.Errorf("seed %d: %d IOMMU faults: the hardware read memory that was not mapped", seed, n)
	}
	t.Logf("seed %d: %d txreqs, %d OK, %d aborted, %d chained refused, halts %d, recoveries %d, sink failed %d, callback panics %d, close %d",
		seed, len(l.all), ok, aborted, l.chainRefuse.Load(), sum.Faults, sum.Recoveries, l.sinkFailed.Load(), l.cbPanics.Load(), how)
}

// TestFaultSoakMix: see runMixSoak.
func TestFaultSoakMix(t *testing.T) {
	soak.Seeds(t, 24, 4, 1500, 250, runMixSoak)
}
