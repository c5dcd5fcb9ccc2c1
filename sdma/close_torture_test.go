package sdma

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

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/leakcheck"
)

// Close against everything at once: engines with every wait strategy (and Manual ones driven by
// a goroutine's Process), both completion modes, plain and batching sinks that panic now and
// then, random halts, callbacks that panic and callbacks that Send; senders that park with
// ParkOrRetry and DeferOrRetry and resend on their wakeup, SendWait, SendList; a chaos goroutine
// that stops, starts and halts engines; and Close (or Shutdown) at a random moment. Every txreq
// accepted completes exactly once, no refused one completes, nothing completes after Close
// returned, nothing stays mapped, no goroutine is left.

type tortRec struct {
	tx       TxReq
	done     atomic.Int32
	accepted atomic.Bool
	st       atomic.Int32
}

type tortSink struct {
	n        atomic.Int64
	panicAt  int64 // panic in every panicAt-th Deliver/Queue (0: never)
	batch    int
	mu       sync.Mutex
	held     map[int]int
	flushes  atomic.Int64
	flushPan int64
}

func (s *tortSink) maybePanic() {
	if n := s.n.Add(1); s.panicAt > 0 && n%s.panicAt == 0 {
		panic("torture sink: on purpose")
	}
}

func (s *tortSink) Deliver(int, [][]byte) error { s.maybePanic(); return nil }

type tortBatchSink struct{ *tortSink }

func (s tortBatchSink) BatchLimit() (int, int) { return s.batch, 0 }
func (s tortBatchSink) Queue(e int, _ [][]byte) error {
	s.maybePanic()
	s.mu.Lock()
	s.held[e]++
	s.mu.Unlock()
	return nil
}
func (s tortBatchSink) Flush(e int, errs []error) {
	s.mu.Lock()
	n := s.held[e]
	s.held[e] = 0
	s.mu.Unlock()
	if n != len(errs) {
		panic(fmt.Sprintf("flush of %d for %d held", len(errs), n))
	}
	if f := s.flushes.Add(1); s.flushPan > 0 && f%s.flushPan == 0 {
		panic("torture flush: on purpose")
	}
}

// tortRig is one round of a close test: the device, the txreqs built (recs), what their
// callbacks saw, and the round's goroutines: senders (wg) run until stop, which end sets once
// the device closed; background goroutines (dwg: drivers, registrars, halters) until dstop,
// which end sets once the senders are done.
type tortRig struct {
	t        *testing.T
	dev      *Device
	buf      []byte
	mu       sync.Mutex
	recs     []*tortRec
	closed   atomic.Bool  // Close returned
	late     atomic.Int64 // completions after Close returned
	resend   atomic.Int64 // budget of sends from callbacks
	cbPanic  int64
	cbCount  atomic.Int64
	errs     atomic.Value
	statuses [2]atomic.Int64
	regUses  atomic.Int64 // txreqs built holding a registration
	stop     atomic.Bool  // senders: return (set by end)
	dstop    atomic.Bool  // background goroutines: return (set by end, after the senders returned)
	wg, dwg  sync.WaitGroup
}

// sender runs f on a sender goroutine (it returns at r.stop).
func (r *tortRig) sender(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// background runs f on a background goroutine (it returns at r.dstop).
func (r *tortRig) background(f func()) {
	r.dwg.Add(1)
	go func() {
		defer r.dwg.Done()
		f()
	}()
}

// drive drives every engine of the device from a background goroutine of its own (Process for
// a Manual engine, Poll for a CompletePoll one), yielding when a pass found nothing.
func (r *tortRig) drive() {
	for i := 0; i < r.dev.NumEngines(); i++ {
		e := r.dev.Engine(i)
		r.background(func() {
			for !r.dstop.Load() {
				if e.drive() == 0 {
					runtime.Gosched()
				}
			}
		})
	}
}

// spinSender is a sender that builds txreqs with build (nil: refused, the device is closing,
// and the sender returns) and sends each on e without an iowait, spinning on ErrBusy.
func (r *tortRig) spinSender(e *Engine, build func() *tortRec) {
	r.sender(func() {
		for !r.stop.Load() {
			rec := build()
			if rec == nil {
				return
			}
			for {
				err := e.Send(nil, &rec.tx, false)
				if errors.Is(err, ErrBusy) && !r.stop.Load() {
					runtime.Gosched()
					continue
				}
				r.result(rec, err)
				break
			}
		}
	})
}

// end is called when Close (or Shutdown) returned: completions from now on are late; the
// senders stop, then the background goroutines.
func (r *tortRig) end() {
	r.closed.Store(true)
	r.stop.Store(true)
	r.wg.Wait()
	r.dstop.Store(true)
	r.dwg.Wait()
}

// check is the end of every close round, desc starting each message: no goroutine recorded a
// failure, every accepted txreq completed exactly once and no refused one completed, nothing
// completed after Close returned, nothing stays mapped in iommu and no unmap failed. It returns
// the number of txreqs accepted.
func (r *tortRig) check(desc string, iommu *dma.IOMMU) (accepted int64) {
	t := r.t
	t.Helper()
	if msg := r.errs.Load(); msg != nil {
		t.Fatalf("%s: %v", desc, msg)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, rec := range r.recs {
		want := int32(0)
		if rec.accepted.Load() {
			want = 1
			accepted++
		}
		if got := rec.done.Load(); got != want {
			t.Fatalf("%s: txreq %d of %d accepted %v: %d completions", desc, i, len(r.recs), want == 1, got)
		}
	}
	if n := r.late.Load(); n != 0 {
		t.Fatalf("%s: %d completions after Close returned", desc, n)
	}
	if n := iommu.LiveCount(); n != 0 {
		t.Fatalf("%s: %d mappings left: %v", desc, n, iommu.Live())
	}
	if n := r.dev.UnmapErrors(); n != 0 {
		t.Fatalf("%s: %d unmap errors", desc, n)
	}
	return accepted
}

func (r *tortRig) fail(format string, args ...any) {
	r.errs.CompareAndSwap(nil, fmt.Sprintf(format, args...))
}

// build makes a new txreq; nil if the add was refused (device closing).
func (r *tortRig) build(rng *rand.Rand) *tortRec {
	rec := &tortRec{}
	n := 4 + rng.IntN(len(r.buf)-4)
	var cb CompleterFunc = func(tx *TxReq, st Status) { r.complete(rec, st) }
	if err := rec.tx.Init(0, n, cb); err != nil {
		r.fail("Init: %v", err)
		return nil
	}
	off := 0
	for off < n {
		m := n - off
		if m > 1 && rng.IntN(2) == 0 {
			m = 1 + rng.IntN(m)
		}
		if err := rec.tx.AddKVAddr(r.dev, r.buf[off:off+m]); err != nil {
			if !errors.Is(err, ErrClosed) {
				r.fail("AddKVAddr: %v", err)
			}
			_ = rec.tx.Clean()
			return nil
		}
		off += m
	}
	if rec.tx.nregs > 0 {
		r.regUses.Add(1)
	}
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	return rec
}

func (r *tortRig) complete(rec *tortRec, st Status) {
	if r.closed.Load() {
		r.late.Add(1)
	}
	rec.st.Store(int32(st))
	rec.done.Add(1)
	if st == StatusOK {
		r.statuses[0].Add(1)
	} else {
		r.statuses[1].Add(1)
	}
	c := r.cbCount.Add(1)
	if r.resend.Add(-1) >= 0 && c%3 == 0 {
		// A callback that sends: a fresh txreq to the same engine, no iowait.
		e := r.dev.Engine(int(c) % r.dev.NumEngines())
		if nr := r.build(rand.New(rand.NewPCG(uint64(c), 9))); nr != nil {
			r.result(nr, e.Send(nil, &nr.tx, false))
		}
	}
	if r.cbPanic > 0 && c%r.cbPanic == 0 {
		panic("torture callback: on purpose")
	}
}

// result records a send's answer for rec: accepted, or refused (then cleaned).
func (r *tortRig) result(rec *tortRec, err error) bool {
	switch {
	case err == nil, errors.Is(err, ErrNotRunning):
		rec.accepted.Store(true)
		return true
	case errors.Is(err, ErrClosed), errors.Is(err, ErrBusy), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		if err := rec.tx.Clean(); err != nil {
			r.fail("Clean: %v", err)
		}
		return false
	default:
		r.fail("send: %v", err)
		_ = rec.tx.Clean()
		return false
	}
}

func TestCloseTortureConcurrent(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	var totals [3]int64
	for round := 0; round < rounds && !t.Failed(); round++ {
		s := rng.Uint64()
		a, ok, ab := tortureRound(t, s)
		totals[0] += a
		totals[1] += ok
		totals[2] += ab
	}
	t.Logf("accepted %d, ok %d, aborted %d", totals[0], totals[1], totals[2])
	leakcheck.VerifyNone(t, opt)
}

func tortureRound(t *testing.T, seed uint64) (accepted, ok, aborted int64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	iommu := engTestIOMMU(t)
	ts := &tortSink{held: map[int]int{}}
	if rng.IntN(2) == 0 {
		ts.panicAt = int64(50 + rng.IntN(200))
	}
	var sink Sink = ts
	if rng.IntN(2) == 0 {
		ts.batch = 2 + rng.IntN(8)
		if rng.IntN(2) == 0 {
			ts.flushPan = int64(5 + rng.IntN(20))
		}
		sink = tortBatchSink{ts}
	}
	const engines = 2
	cfg := Config{Mapper: iommu, Engines: engines, RingSize: 64, DescIntr: 1 + rng.IntN(32), Sink: sink}
	cfg.Wait = WaitStrategy(rng.IntN(3))
	cfg.Manual = rng.IntN(4) == 0
	if rng.IntN(4) == 0 {
		cfg.Completion = CompletePoll
	}
	if rng.IntN(2) == 0 {
		cfg.faults = faultPlan{HaltRate: 0.002 + 0.01*rng.Float64(), Seed: seed}
	}
	desc := fmt.Sprintf("seed %d: wait %v manual %v completion %v batch %d sinkPanic %d flushPanic %d faults %+v",
		seed, cfg.Wait, cfg.Manual, cfg.Completion, ts.batch, ts.panicAt, ts.flushPan, cfg.faults)
	dev, err := NewDevice(cfg)
	require.NoError(t, err, desc)
	r := &tortRig{t: t, dev: dev, buf: engTestPattern(512, byte(seed))}
	r.resend.Store(int64(rng.IntN(200)))
	if rng.IntN(2) == 0 {
		r.cbPanic = int64(20 + rng.IntN(100))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cfg.Manual || cfg.Completion == CompletePoll {
		r.drive()
	}
	const senders = 6
	for s := 0; s < senders; s++ {
		rng := rand.New(rand.NewPCG(rng.Uint64(), uint64(s)))
		e := dev.Engine(s % engines)
		switch s % 4 {
		case 0: // Send with a ParkOrRetry iowait; resend TxHead on the wakeup
			r.sender(func() { r.parkSender(ctx, e, rng, &r.stop) })
		case 1: // SendList with DeferOrRetry
			r.sender(func() { r.deferSender(ctx, e, rng, &r.stop) })
		case 2: // SendWait
			r.sender(func() {
				for !r.stop.Load() {
					rec := r.build(rng)
					if rec == nil {
						return
					}
					if !r.result(rec, e.SendWait(ctx, &rec.tx)) && ctx.Err() != nil {
						r.fail("SendWait: hang guard")
						return
					}
				}
			})
		case 3: // Send without iowait, spinning on ErrBusy
			r.spinSender(e, func() *tortRec { return r.build(rng) })
		}
	}
	// Chaos: stop/start, halts, idle, racing the Close.
	if rng.IntN(2) == 0 {
		rng := rand.New(rand.NewPCG(seed, 77))
		r.sender(func() {
			for !r.stop.Load() {
				e := dev.Engine(rng.IntN(engines))
				var err error
				switch rng.IntN(5) {
				case 3:
					err = errors.Join(dev.freezeNotify(rng.IntN(2) == 0), dev.freeze(), dev.unfreeze(), e.Start())
				case 4:
					e.Process()
					e.Poll()
					e.ProgressSchedule()
				case 0:
					err = e.injectHalt(HaltCause(1 + rng.IntN(int(NumHaltCauses)-1)))
				case 1:
					err = e.Stop()
					runtime.Gosched()
					if err == nil {
						err = e.Start()
					}
				case 2:
					err = e.Start()
				}
				if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotRunning) {
					r.fail("chaos: %v", err)
				}
				time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
			}
		})
	}

	time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
	var cwg sync.WaitGroup
	for k := 1 + rng.IntN(3); k > 0; k-- {
		cwg.Add(1)
		go func(shutdown bool, d time.Duration) {
			defer cwg.Done()
			if shutdown {
				sctx, scancel := context.WithTimeout(context.Background(), d)
				err := dev.Shutdown(sctx)
				scancel()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					r.fail("Shutdown: %v", err)
				}
			} else if err := dev.Close(); err != nil {
				r.fail("Close: %v", err)
			}
		}(rng.IntN(3) == 0, time.Duration(rng.IntN(500))*time.Microsecond)
	}
	cwg.Wait()
	r.end()
	accepted = r.check(desc, iommu)
	var okN, abN uint64
	for i := 0; i < engines; i++ {
		st := dev.Engine(i).Stats()
		okN += st.Completed
		abN += st.Aborted
	}
	if okN != uint64(r.statuses[0].Load()) || abN != uint64(r.statuses[1].Load()) {
		t.Fatalf("%s: stats say %d completed, %d aborted; the callbacks saw %d, %d", desc, okN, abN, r.statuses[0].Load(), r.statuses[1].Load())
	}
	return accepted, r.statuses[0].Load(), r.statuses[1].Load()
}

// initWoken initialises w with the sleeper sleep and a wakeup that signals the channel it
// returns (buffered: a wakeup while nobody waits is kept).
func initWoken(w *IOWait, sleep SleepFunc) <-chan struct{} {
	woke := make(chan struct{}, 1)
	w.Init(sleep, func(*IOWait, int) {
		select {
		case woke <- struct{}{}:
		default:
		}
	}, nil)
	return woke
}

// parkSender sends with an iowait whose sleeper is ParkOrRetry; a parked txreq waits on TxHead
// for the wakeup and is resent then.
func (r *tortRig) parkSender(ctx context.Context, e *Engine, rng *rand.Rand, stop *atomic.Bool) {
	var w IOWait
	woke := initWoken(&w, (*Engine).ParkOrRetry)
	recOf := map[*TxReq]*tortRec{}
	defer func() {
		// Whatever is still parked is the caller's.
		for tx := w.TxHead().PopFront(); tx != nil; tx = w.TxHead().PopFront() {
			r.result(recOf[tx], ErrClosed)
		}
	}()
	for !stop.Load() {
		if w.TxHead().Len() > 0 {
			select {
			case <-woke:
			case <-time.After(10 * time.Second):
				if !stop.Load() {
					r.fail("ParkOrRetry: no wakeup in 10 s (waiting %v, engine running %v, busy %d)", e.Waiting(&w), e.Running(), w.Busy())
				}
				return
			}
			// Resend what is parked, in order, until one parks again.
			for n := w.TxHead().Len(); n > 0; n-- {
				tx := w.TxHead().PopFront()
				err := e.Send(&w, tx, true)
				if errors.Is(err, ErrBusy) {
					break // parked again, at the back of TxHead
				}
				r.result(recOf[tx], err)
			}
			continue
		}
		rec := r.build(rng)
		if rec == nil {
			return
		}
		recOf[&rec.tx] = rec
		err := e.Send(&w, &rec.tx, false)
		if errors.Is(err, ErrBusy) {
			continue // on TxHead
		}
		r.result(rec, err)
		if ctx.Err() != nil {
			r.fail("park sender: hang guard")
			return
		}
	}
}

// deferSender sends lists with an iowait whose sleeper is DeferOrRetry, waiting for the wakeup
// when the ring is full.
func (r *tortRig) deferSender(ctx context.Context, e *Engine, rng *rand.Rand, stop *atomic.Bool) {
	var w IOWait
	woke := initWoken(&w, (*Engine).DeferOrRetry)
	for !stop.Load() {
		var l TxList
		var recs []*tortRec
		for k := 1 + rng.IntN(40); k > 0; k-- {
			rec := r.build(rng)
			if rec == nil {
				break
			}
			recs = append(recs, rec)
			l.PushBack(&rec.tx)
		}
		for l.Len() > 0 {
			first := len(recs) - l.Len()
			n, err := e.SendList(&w, &l)
			for _, rec := range recs[first : first+n] {
				rec.accepted.Store(true)
			}
			if err == nil || errors.Is(err, ErrNotRunning) {
				continue
			}
			if errors.Is(err, ErrBusy) {
				if stop.Load() {
					break
				}
				select {
				case <-woke:
				case <-time.After(10 * time.Second):
					r.fail("DeferOrRetry: no wakeup in 10 s (waiting %v, running %v, busy %d)", e.Waiting(&w), e.Running(), w.Busy())
					return
				}
				continue
			}
			if !errors.Is(err, ErrClosed) {
				r.fail("SendList: %v", err)
			}
			break
		}
		for tx := l.PopFront(); tx != nil; tx = l.PopFront() {
			_ = tx.Clean()
		}
		if ctx.Err() != nil {
			r.fail("defer sender: hang guard")
			return
		}
	}
}
