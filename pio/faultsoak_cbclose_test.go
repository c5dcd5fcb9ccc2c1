package pio

// Fault-schedule soak of Closes from callbacks (hunt hfault): the soak before it (rvsoak_test.go)
// closes the contexts from the test's goroutine only, and the Close-in-callback tests
// (closewake_test.go, rvlatewake_test.go) each build one interleaving by hand. Here, while
// producers send on two or three contexts (chip goroutines, or manual chips driven by driver
// goroutines and by the producers themselves) and a chaos goroutine halts, stops, disables,
// restarts them and changes their plans, the callbacks close contexts at random: a Waiter's
// wake-up closes any context (its own included), a Sink or a Releaser another context than its
// own; wake-ups, Sinks and Releasers also panic now and then. Every such Close must return
// (nil, or ErrInvalid where it would wait for itself) and never hang; then the test closes every
// context, twice at once in one seed in two. The ledger (rvpLedger, per context): every buffer
// handed out is released exactly once, none delivered twice, after its release or out of its
// producer's order; nothing is delivered or released, and no wake-up runs, once the test's
// Close of its context returned; every parked Waiter is woken; Stats agree with what the
// callbacks saw (Releases + Flushed = buffers handed out, SinkErrors = sink failures and
// panics, ReleasePanics, WakeupPanics, Packets = deliveries); every wait is bounded by one
// context (a hang prints every goroutine); no goroutine is left.

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

	"github.com/gosdma/gosdma/internal/goid"
	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/internal/splitmix"
)

// cbcSink is rvpSink that counts its deliveries and failures, checks the context's own Close,
// and closes another context now and then.
type cbcSink struct {
	rvpSink
	seed      uint64
	scs       []*SendContext
	closedAt  []atomic.Bool
	delivered *atomic.Uint64
	failed    *atomic.Uint64 // errors and panics the sink returned
	cbClose   func(who string, j int)
	closing   bool
}

func (s *cbcSink) Deliver(ctxt int, segs [][]byte) (err error) {
	s.delivered.Add(1)
	if s.closedAt[ctxt].Load() {
		s.l.badf("context %d: a packet delivered after its Close returned", ctxt)
	}
	defer func() {
		if p := recover(); p != nil {
			s.failed.Add(1)
			panic(p)
		}
		if err != nil {
			s.failed.Add(1)
		}
	}()
	err = s.rvpSink.Deliver(ctxt, segs)
	if s.closing && len(s.scs) > 1 && len(segs) > 0 && len(segs[0]) >= 8 {
		if h := splitmix.Mix(uint64(segs[0][0]) | uint64(segs[0][1])<<8 | uint64(segs[0][4])<<16 | s.seed<<24); h%61 == 0 {
			j := (ctxt + 1 + int(h>>32)%(len(s.scs)-1)) % len(s.scs)
			s.cbClose(fmt.Sprintf("context %d's sink", ctxt), j)
		}
	}
	return err
}

func runCBCloseSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0xcbc1))
	l := &rvpLedger{recs: map[uint64]*rvpRec{}, last: map[[2]uint64]uint64{}}
	if rng.IntN(2) == 0 {
		l.sinkP = 97
	}
	if rng.IntN(2) == 0 {
		l.failP = 13
	}
	manual := rng.IntN(2) == 0
	nctx := 2 + rng.IntN(2)
	closeFrom := rng.IntN(8) // bits: 1 wake-ups, 2 sinks, 4 releasers close contexts
	if !goid.HaveG {
		closeFrom &= 1 // Sinks' and Releasers' Closes can wait for ever there (see Close)
	}
	desc := fmt.Sprintf("seed %d (RVSOAK_SEED=%d): contexts %d manual %v sinkpanic %d fail %d closes from %03b", seed, seed, nctx, manual, l.sinkP, l.failP, closeFrom)
	fail := func(format string, args ...any) { l.badf(format, args...) }
	scs := make([]*SendContext, nctx)
	closedAt := make([]atomic.Bool, nctx)
	var delivered, sinkFailed, cbCloses, relPanics, wakePanics atomic.Uint64
	var cbCloseF func(who string, j int) // cbClose, below (set before any packet is sent)
	for i := range scs {
		credits := 2 + rng.IntN(40)
		sink := &cbcSink{rvpSink: rvpSink{l: l, ctx: i}, seed: seed, scs: scs, closedAt: closedAt, delivered: &delivered,
			failed: &sinkFailed, closing: closeFrom&2 != 0, cbClose: func(who string, j int) { cbCloseF(who, j) }}
		cfg := Config{Credits: credits, Threshold: 1 + rng.IntN(credits), Index: i, Sink: sink, Manual: manual}
		if rng.IntN(2) == 0 {
			cfg.Faults = FaultPlan{HaltRate: 0.02 * rng.Float64(), Seed: seed}
		}
		sc, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		scs[i] = sc
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer hcancel()
	hang := func(what string) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s: hang: %s\n%s", desc, what, buf)
	}
	// cbClose is a callback's Close of context j: it must return, nil or ErrInvalid.
	var cbCloseOn atomic.Bool // set half-way: the contexts carry packets for a while first
	cbClose := func(who string, j int) {
		if !cbCloseOn.Load() {
			return
		}
		cbCloses.Add(1)
		if err := scs[j].Close(); err != nil && !errors.Is(err, ErrInvalid) {
			fail("%s: Close of context %d: %v", who, j, err)
		}
	}
	cbCloseF = cbClose

	var stop atomic.Bool
	var pw, bg sync.WaitGroup
	var accepted atomic.Int64
	var parks, wokenParks atomic.Int64
	snd := &soakSend{l: l, scs: scs, ctx: hctx, stop: &stop, manual: manual, panicky: true, processAfter: true,
		rel: func(r *rand.Rand, rec *rvpRec) Releaser {
			relCloses := closeFrom&4 != 0 && r.IntN(20) == 0
			return ReleaseFunc(func(c ReleaseCode) {
				if closedAt[rec.ctx].Load() {
					fail("packet %#x released after its context's Close returned", rec.id)
				}
				if relCloses {
					j := (rec.ctx + 1 + int(rec.id%uint64(nctx-1))) % nctx
					cbClose(fmt.Sprintf("packet %#x's Releaser", rec.id), j)
				}
				if rec.panicky {
					relPanics.Add(1)
				}
				rec.rel(l).Released(c)
			})
		},
		accepted: &accepted, parks: &parks, wokenParks: &wokenParks, fail: fail}
	nprod := 2 + rng.IntN(3)
	for p := range nprod {
		pw.Add(1)
		go func() {
			defer pw.Done()
			woke := make(chan struct{}, 1)
			ws := make([]Waiter, nctx)
			var nwake atomic.Uint64
			for i := range ws {
				ws[i].Init(func(*Waiter) {
					if closedAt[i].Load() {
						fail("producer %d: a wake-up of context %d started after its Close returned", p, i)
					}
					select {
					case woke <- struct{}{}:
					default:
					}
					k := nwake.Add(1)
					h := splitmix.Mix(k ^ uint64(p)<<40 ^ seed)
					if closeFrom&1 != 0 && h%23 == 0 {
						cbClose(fmt.Sprintf("producer %d's wake-up of context %d", p, i), int(h>>32)%nctx)
					}
					if closedAt[i].Load() {
						fail("producer %d: a wake-up of context %d still ran when its Close returned", p, i)
					}
					if h%31 == 1 {
						wakePanics.Add(1)
						panic("cbclose soak: wake-up panic")
					}
				})
			}
			snd.produce(p, rand.New(rand.NewPCG(seed, uint64(p)+200)), ws, woke)
		}()
	}
	snd.drive(&bg)
	bg.Add(1)
	go func() { // chaos
		defer bg.Done()
		r := rand.New(rand.NewPCG(seed, 0xcbc2))
		for !stop.Load() {
			sc := scs[r.IntN(nctx)]
			switch r.IntN(9) {
			case 0:
				if err := sc.InjectHalt(); err != nil && !errors.Is(err, ErrNotRunning) && !errors.Is(err, ErrClosed) {
					fail("InjectHalt: %v", err)
				}
			case 1:
				_ = sc.SetFaults(FaultPlan{HaltRate: 0.03 * r.Float64(), Seed: r.Uint64()})
			case 2:
				sc.Stop()
				time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
				sc.Disable()
				if err := sc.Enable(); err != nil && !errors.Is(err, ErrClosed) {
					fail("Enable: %v", err)
				}
			case 3:
				if err := sc.Restart(); err != nil && !errors.Is(err, ErrInvalid) {
					fail("Restart: %v", err)
				}
			case 4:
				sc.ReturnCredits()
			case 5:
				sc.ReleaseUpdate()
			case 6:
				sc.Process()
			default:
				time.Sleep(time.Duration(r.IntN(400)) * time.Microsecond)
			}
		}
	}()
	time.Sleep(dur / 2)
	cbCloseOn.Store(true)
	time.Sleep(dur / 2)
	twice := rng.IntN(2) == 0
	select {
	case <-snd.closeAll(closedAt, twice):
	case <-hctx.Done():
		hang("Close")
	}
	l.closed.Store(true)
	stop.Store(true)
	all := make(chan struct{})
	go func() { pw.Wait(); bg.Wait(); close(all) }()
	select {
	case <-all:
	case <-hctx.Done():
		hang("producers and drivers")
	}

	var st Stats
	for i, sc := range scs {
		s := sc.Stats()
		st.Releases += s.Releases
		st.Flushed += s.Flushed
		st.SinkErrors += s.SinkErrors
		st.ReleasePanics += s.ReleasePanics
		st.WakeupPanics += s.WakeupPanics
		st.Packets += s.Packets
		if sc.InFlight() != 0 || sc.Waiting() != 0 {
			t.Errorf("%s: context %d: in flight %d, waiting %d after Close", desc, i, sc.InFlight(), sc.Waiting())
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.bad {
		t.Errorf("%s: %s", desc, m)
	}
	n := 0
	for _, r := range l.recs {
		if r.released.Load() != 1 && n < 10 {
			n++
			t.Errorf("%s: packet %#x released %d times (delivered %d)", desc, r.id, r.released.Load(), r.delivered.Load())
		}
	}
	if int64(len(l.recs)) != accepted.Load() {
		t.Errorf("%s: %d in the ledger, %d accepted", desc, len(l.recs), accepted.Load())
	}
	if st.Releases+st.Flushed != uint64(accepted.Load()) {
		t.Errorf("%s: Releases %d + Flushed %d != %d accepted", desc, st.Releases, st.Flushed, accepted.Load())
	}
	if st.SinkErrors != sinkFailed.Load() || st.ReleasePanics != relPanics.Load() || st.WakeupPanics != wakePanics.Load() || st.Packets != delivered.Load() {
		t.Errorf("%s: Stats %d sink errors, %d release panics, %d wake-up panics, %d packets; seen %d, %d, %d, %d",
			desc, st.SinkErrors, st.ReleasePanics, st.WakeupPanics, st.Packets, sinkFailed.Load(), relPanics.Load(), wakePanics.Load(), delivered.Load())
	}
	if parks.Load() != wokenParks.Load() {
		t.Errorf("%s: %d parks, %d woken", desc, parks.Load(), wokenParks.Load())
	}
	t.Logf("%s: %d accepted, %d parks, %d Closes from callbacks", desc, accepted.Load(), parks.Load(), cbCloses.Load())
}

// TestFaultSoakPIOCloseFromCallbacks: see runCBCloseSoak.
func TestFaultSoakPIOCloseFromCallbacks(t *testing.T) {
	soak.Seeds(t, 16, 5, 40*time.Millisecond, 10*time.Millisecond, runCBCloseSoak)
}
