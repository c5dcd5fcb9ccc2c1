package pio

// Fault-schedule soak of send contexts under concurrent producers (review rvsoak): the pio
// tests so far drive one goroutine through random operations (TestRandomOpsReleaseOnce) or race
// producers against a Close alone (TestStressCloseWhileSending). Here seeded schedules mix, on
// one or two contexts of a chip goroutine or a manual chip driven by its own goroutine, several
// producers sending with SendWait under expiring contexts, with BufferAlloc and a segmented copy
// (parking their own Waiter with QueueWait on ErrNoCredits), and with BufferAllocWait, while a
// chaos goroutine injects halts, changes the fault plan and the threshold, stops, disables and
// enables the contexts, restarts them, forces credit returns and runs release passes; sinks fail
// and panic, Releasers panic, and Close comes at a random point (twice at once in one seed in
// three). The ledger: every buffer BufferAlloc handed out is released exactly once, none after
// Close returned; a release code without PRCSCDisable only for a packet the sink saw; no packet
// delivered twice, after its release, or out of its producer's order, and each byte-identical;
// every parked Waiter is woken, and no wake-up starts or still runs once its context's Close
// returned; the counters agree; no goroutine is left.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/internal/soak"
)

// rvpRec is one packet of the pio soak.
type rvpRec struct {
	id        uint64 // producer<<32 | seq
	ctx       int
	n         int // payload bytes
	released  atomic.Int32
	code      atomic.Uint32
	delivered atomic.Int32
	panicky   bool // its Releaser panics
}

type rvpLedger struct {
	mu     sync.Mutex
	recs   map[uint64]*rvpRec
	last   map[[2]uint64]uint64 // (context, producer) -> last seq delivered + 1
	bad    []string
	closed atomic.Bool // Close returned
	sinkP  uint64      // the sink panics on every sinkP-th packet id (0: never)
	failP  uint64      // and fails every failP-th
}

func (l *rvpLedger) badf(format string, args ...any) {
	l.mu.Lock()
	if len(l.bad) < 20 {
		l.bad = append(l.bad, fmt.Sprintf(format, args...))
	}
	l.mu.Unlock()
}

// rvpPayload is packet id's payload: the id, then bytes both ends compute.
func rvpPayload(id uint64, n int) []byte {
	b := make([]byte, n)
	binary.LittleEndian.PutUint64(b, id)
	for i := 8; i < n; i++ {
		b[i] = byte(id*31 + uint64(i)*7)
	}
	return b
}

type rvpSink struct {
	l   *rvpLedger
	ctx int
}

func (s *rvpSink) Deliver(ctxt int, segs [][]byte) error {
	var p []byte
	for _, sg := range segs {
		p = append(p, sg...)
	}
	l := s.l
	if ctxt != s.ctx {
		l.badf("context %d's sink got a packet of context %d", s.ctx, ctxt)
	}
	if len(p) < 8 {
		l.badf("runt packet of %d bytes", len(p))
		return nil
	}
	id := binary.LittleEndian.Uint64(p)
	l.mu.Lock()
	r := l.recs[id]
	l.mu.Unlock()
	if r == nil {
		l.badf("unknown packet %#x", id)
		return nil
	}
	want := rvpPayload(id, r.n)
	for len(want)%4 != 0 {
		want = append(want, 0)
	}
	if string(p) != string(want) {
		l.badf("packet %#x: %d bytes differ from the %d sent", id, len(p), len(want))
	}
	if r.released.Load() != 0 {
		l.badf("packet %#x delivered after its release (code %#x)", id, r.code.Load())
	}
	if r.delivered.Add(1) != 1 {
		l.badf("packet %#x delivered twice", id)
	}
	if l.closed.Load() {
		l.badf("packet %#x delivered after Close returned", id)
	}
	key := [2]uint64{uint64(ctxt), id >> 32}
	l.mu.Lock()
	if next := l.last[key]; id&0xffffffff < next {
		l.bad = append(l.bad, fmt.Sprintf("context %d producer %d: packet %d after %d", ctxt, id>>32, id&0xffffffff, next-1))
	}
	l.last[key] = id&0xffffffff + 1
	l.mu.Unlock()
	if l.sinkP != 0 && id%l.sinkP == 0 {
		panic("rvsoak: sink panic")
	}
	if l.failP != 0 && id%l.failP == 0 {
		return errors.New("rvsoak: sink failure")
	}
	return nil
}

func (r *rvpRec) rel(l *rvpLedger) Releaser {
	return ReleaseFunc(func(c ReleaseCode) {
		r.code.Store(uint32(c))
		if r.released.Add(1) != 1 {
			l.badf("packet %#x released twice", r.id)
		}
		if l.closed.Load() {
			l.badf("packet %#x released after Close returned", r.id)
		}
		if c&PRCSCDisable == 0 && r.delivered.Load() == 0 {
			l.badf("packet %#x released with %#x (sent) but never delivered", r.id, c)
		}
		if r.panicky {
			panic("rvsoak: release panic")
		}
	})
}

func runRVPIOSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x9105))
	l := &rvpLedger{recs: map[uint64]*rvpRec{}, last: map[[2]uint64]uint64{}}
	if rng.IntN(3) == 0 {
		l.sinkP = 97
	}
	if rng.IntN(2) == 0 {
		l.failP = 13
	}
	panicky := rng.IntN(3) == 0
	manual := rng.IntN(3) == 0
	nctx := 1 + rng.IntN(2)
	scs := make([]*SendContext, nctx)
	desc := fmt.Sprintf("seed %d: contexts %d manual %v sinkpanic %d fail %d relpanic %v", seed, nctx, manual, l.sinkP, l.failP, panicky)
	for i := range scs {
		credits := 1 + rng.IntN(40)
		cfg := Config{Credits: credits, Threshold: 1 + rng.IntN(credits), Index: i, Sink: &rvpSink{l: l, ctx: i}, Manual: manual}
		if rng.IntN(2) == 0 {
			cfg.Faults = FaultPlan{HaltRate: 0.02 * rng.Float64(), Seed: seed}
		}
		desc += fmt.Sprintf(" [credits %d threshold %d faults %v]", cfg.Credits, cfg.Threshold, cfg.Faults.HaltRate)
		sc, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		scs[i] = sc
	}
	fail := func(format string, args ...any) { t.Errorf(desc+": "+format, args...) }

	var stop atomic.Bool
	var pw, bg sync.WaitGroup
	var accepted atomic.Int64
	var parks, wokenParks atomic.Int64
	// closedAt[i] is set once context i's Close returned (from either closer): a wake-up of one
	// of its waiters that starts or ends after that is a failure (Close waits for the wake-ups
	// in progress on other goroutines).
	closedAt := make([]atomic.Bool, nctx)
	snd := &soakSend{l: l, scs: scs, ctx: context.Background(), stop: &stop, manual: manual,
		panicky: panicky, creditReturns: true, rel: func(_ *rand.Rand, rec *rvpRec) Releaser { return rec.rel(l) },
		parkBound: 20 * time.Second, accepted: &accepted, parks: &parks, wokenParks: &wokenParks, fail: fail}
	nprod := 2 + rng.IntN(3)
	for p := range nprod {
		pw.Add(1)
		go func() {
			defer pw.Done()
			woke := make(chan struct{}, 1)
			ws := make([]Waiter, nctx)
			for i := range ws {
				ws[i].Init(func(*Waiter) {
					if closedAt[i].Load() {
						l.badf("producer %d: a wake-up of context %d started after its Close returned", p, i)
					}
					select {
					case woke <- struct{}{}:
					default:
					}
					if closedAt[i].Load() {
						l.badf("producer %d: a wake-up of context %d still ran when its Close returned", p, i)
					}
				})
			}
			snd.produce(p, rand.New(rand.NewPCG(seed, uint64(p)+100)), ws, woke)
		}()
	}
	snd.drive(&bg)
	bg.Add(1)
	var moves [10]atomic.Int64
	go func() { // chaos
		defer bg.Done()
		r := rand.New(rand.NewPCG(seed, 77))
		for !stop.Load() {
			sc := scs[r.IntN(nctx)]
			k := r.IntN(len(moves))
			moves[k].Add(1)
			switch k {
			case 0:
				if err := sc.InjectHalt(); err != nil && !errors.Is(err, ErrNotRunning) && !errors.Is(err, ErrClosed) {
					fail("InjectHalt: %v", err)
				}
			case 1:
				_ = sc.SetFaults(FaultPlan{HaltRate: 0.03 * r.Float64(), Seed: r.Uint64()})
			case 2: // a freeze: Stop, a while, Disable and Enable
				sc.Stop()
				time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
				sc.Disable()
				if err := sc.Enable(); err != nil && !errors.Is(err, ErrClosed) {
					fail("Enable: %v", err)
				}
			case 3:
				sc.Disable()
				if err := sc.Enable(); err != nil && !errors.Is(err, ErrClosed) {
					fail("Enable: %v", err)
				}
			case 4:
				if err := sc.Restart(); err != nil && !errors.Is(err, ErrInvalid) {
					fail("Restart: %v", err)
				}
			case 5:
				_ = sc.SetThreshold(1 + r.IntN(sc.Credits()))
			case 6:
				sc.ReturnCredits()
			case 7:
				sc.ReleaseUpdate()
			case 8:
				sc.Process()
			default:
				time.Sleep(time.Duration(r.IntN(400)) * time.Microsecond)
			}
		}
	}()
	time.Sleep(dur)
	twice := rng.IntN(3) == 0
	select {
	case <-snd.closeAll(closedAt, twice):
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: Close did not return (in flight %d, enabled %v)", desc, scs[0].InFlight(), scs[0].Enabled())
	}
	l.closed.Store(true)
	stop.Store(true)
	pw.Wait()
	bg.Wait()

	var rels, flushed uint64
	for i, sc := range scs {
		st := sc.Stats()
		rels += st.Releases
		flushed += st.Flushed
		if sc.InFlight() != 0 || sc.Waiting() != 0 {
			fail("context %d: in flight %d, waiting %d after Close", i, sc.InFlight(), sc.Waiting())
		}
		if testing.Verbose() {
			t.Logf("context %d: %+v", i, st)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.bad {
		fail("%s", m)
	}
	n := 0
	for _, r := range l.recs {
		if r.released.Load() != 1 && n < 10 {
			n++
			fail("packet %#x released %d times (delivered %d)", r.id, r.released.Load(), r.delivered.Load())
		}
	}
	if int64(len(l.recs)) != accepted.Load() {
		fail("%d in the ledger, %d accepted", len(l.recs), accepted.Load())
	}
	if rels+flushed != uint64(accepted.Load()) {
		fail("Releases %d + Flushed %d != %d accepted", rels, flushed, accepted.Load())
	}
	if parks.Load() != wokenParks.Load() {
		fail("%d parks, %d woken", parks.Load(), wokenParks.Load())
	}
	if testing.Verbose() {
		var mv [len(moves)]int64
		for i := range moves {
			mv[i] = moves[i].Load()
		}
		t.Logf("%s: %d accepted, %d parks, moves %v", desc, accepted.Load(), parks.Load(), mv)
	}
}

// TestRVSoakPIOFaultSchedules: see runRVPIOSoak. RVSOAK_SEED picks another seed range.
func TestRVSoakPIOFaultSchedules(t *testing.T) {
	soak.Seeds(t, 16, 5, 40*time.Millisecond, 10*time.Millisecond, runRVPIOSoak)
}
