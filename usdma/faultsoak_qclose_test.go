package usdma

// Fault-schedule soak of the queue's Close under interruption (hunt hfault): the soaks before it
// (rvsoak_test.go, rvsoak2_test.go) close each queue once, under a 30 s context, from one
// goroutine. Here closers call Close on every queue at random points while its submitters go on,
// two at a time, under contexts done already or ending in microseconds (Close then returns the
// context's error with the queue closed to new requests, and a later Close finishes the wait),
// Done callbacks try to close their own queue (ErrInvalid at once, the queue left as it was),
// submitters Submit under contexts done already or expiring and Wait under expiring ones, while
// the engines (on their goroutine, polled, or Manual and driven) halt, stop, freeze and go idle,
// vectors are invalidated in flight, the sink fails, and the device closes at a random point in
// one seed in two. The ledger: a Close that returned nil saw every request of its queue ended (no
// Done comes after it; Requests equals the Done calls then), and no Submit claims a slot after
// it; every queue's last Close returns nil; Stats agree (Requests = Done calls = ends = Completed
// + Failed); no slot is left QUEUED; every txreq is back; nothing stays pinned; no goroutine is
// left (internal/soak); every wait is bounded by one context, and a hang prints every goroutine.

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
	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/internal/splitmix"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

type qcQueue struct {
	pq        *PktQ
	a         *alloc.Slab[TxReq]
	ndone     atomic.Int64
	hook      atomic.Int64
	closedOK  atomic.Bool  // a Close returned nil
	lateDone  atomic.Int64 // Done calls after a Close returned nil
	lateClaim atomic.Int64 // Submits accepted (nil) after a Close returned nil
	inDone    atomic.Int64 // Closes from inside Done that were not ErrInvalid
}

func runQCloseSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x9c10))
	cfg := sdma.Config{Engines: 1 + rng.IntN(2), RingSize: []int{64, 128}[rng.IntN(2)],
		Sink: &sdmatest.FaultSink{Sink: &sdmatest.DiscardSink{}, FailRate: 0.03, Seed: seed}}
	mode := rng.IntN(3)
	switch mode {
	case 1:
		cfg.Completion = sdma.CompletePoll
	case 2:
		cfg.Manual = true
	}
	if rng.IntN(2) == 0 {
		cfg.Mapper = testIOMMU(t)
	}
	dev, err := sdma.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	devClose := rng.IntN(2) == 0
	desc := fmt.Sprintf("seed %d (RVSOAK_SEED=%d): engines %d ring %d mode %d device close %v", seed, seed, cfg.Engines, cfg.RingSize, mode, devClose)
	for i := range dev.NumEngines() {
		if err := sdmatest.SetFaults(dev.Engine(i), sdmatest.FaultPlan{HaltRate: 0.005, Seed: seed}); err != nil {
			t.Fatal(err)
		}
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer hcancel()
	hang := func(what string) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s: hang: %s\n%s", desc, what, buf)
	}
	var mu sync.Mutex
	var bad []string
	fail := func(format string, args ...any) {
		mu.Lock()
		if len(bad) < 20 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
		mu.Unlock()
	}

	const slots = 6
	qs := make([]*qcQueue, 1+rng.IntN(3))
	for i := range qs {
		q := &qcQueue{}
		q.a, err = alloc.NewSlab(alloc.SlabConfig[TxReq]{ObjectsPerSlab: 8 + rng.IntN(32), MaxSlabs: 1 + rng.IntN(2)})
		if err != nil {
			t.Fatal(err)
		}
		qc := Config{Device: dev, Slots: slots, Alloc: q.a, Ctxt: uint16(i), Timeout: 200 * time.Microsecond,
			DisableAHG: rng.IntN(4) == 0, PinLimit: []int{0, 4}[rng.IntN(2)]}
		closeInDone, closeOther := rng.IntN(2) == 0, rng.IntN(2) == 0
		qc.Done = func(slot int, e CompEntry) {
			q.ndone.Add(1)
			if q.closedOK.Load() {
				q.lateDone.Add(1)
			}
			if e.Status != Complete && e.Status != Error {
				fail("queue %d slot %d: Done with state %v", i, slot, e.Status)
			}
			if closeInDone && q.ndone.Load()%5 == 0 {
				if err := q.pq.Close(context.Background()); !errors.Is(err, ErrInvalid) {
					q.inDone.Add(1)
					fail("queue %d: Close from Done: %v", i, err)
				}
			}
			if closeOther && q.ndone.Load()%7 == 0 && len(qs) > 1 {
				// Another queue's Close from inside this Done (the pass may be the one its
				// requests wait for: then ErrInvalid at once), bounded by a short context.
				o := qs[(i+1)%len(qs)]
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(splitmix.Mix(uint64(slot)+seed)%300)*time.Microsecond)
				err := o.pq.Close(ctx)
				cancel()
				switch {
				case err == nil:
					o.closedOK.Store(true)
					if n, d := o.pq.Stats().Requests, o.ndone.Load(); int64(n) != d {
						fail("queue %d: Close from queue %d's Done returned nil with %d requests, %d ended", (i+1)%len(qs), i, n, d)
					}
				case errors.Is(err, ErrInvalid), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
				default:
					fail("queue %d: Close from queue %d's Done: %v", (i+1)%len(qs), i, err)
				}
			}
		}
		q.pq, err = New(qc)
		if err != nil {
			t.Fatal(err)
		}
		testHooks(q.pq).onEnd = func(int, CompState) { q.hook.Add(1) }
		qs[i] = q
	}
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = pattern(1+rng.IntN(12000), byte(i))
	}

	var stopped atomic.Bool
	var bg sync.WaitGroup
	if cfg.Manual || cfg.Completion == sdma.CompletePoll {
		sdmatest.DriveEngines(dev, cfg.Manual, &stopped, &bg)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Submitters: two per queue, on slots of their own parity.
	for qi, q := range qs {
		for sub := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, uint64(qi*2+sub)+7))
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if hctx.Err() != nil {
						return
					}
					slot := sub + 2*(i%(slots/2))
					if i >= slots/2 {
						// Wait for the slot's last request under an expiring context first, now
						// and then, then for as long as it takes.
						if r.IntN(3) == 0 {
							ctx, cancel := context.WithTimeout(hctx, time.Duration(r.IntN(100))*time.Microsecond)
							_ = q.pq.Wait(ctx, slot)
							cancel()
						}
						if err := q.pq.Wait(hctx, slot); err != nil && !errors.Is(err, ErrFault) && !errors.Is(err, ErrSlotFree) {
							if hctx.Err() != nil {
								fail("queue %d slot %d never ended: %v", qi, slot, q.pq.Comp(slot))
								return
							}
							fail("queue %d slot %d: Wait: %v", qi, slot, err)
						}
					}
					nv := 1 + r.IntN(3)
					vecs := make([][]byte, nv)
					for k := range vecs {
						b := bufs[r.IntN(len(bufs))]
						off := r.IntN(len(b))
						vecs[k] = b[off : off+1+r.IntN(len(b)-off)]
					}
					info, hdr := Message(slot, []int{64, 256, 1024, 4096}[r.IntN(4)], testTemplate, vecs...)
					var ctx context.Context
					var cancel context.CancelFunc
					switch r.IntN(5) {
					case 0:
						ctx, cancel = context.WithCancel(hctx)
						cancel()
					case 1:
						ctx, cancel = context.WithTimeout(hctx, time.Duration(r.IntN(200))*time.Microsecond)
					default:
						ctx, cancel = context.WithCancel(hctx)
					}
					shut := q.closedOK.Load()
					err := q.pq.Submit(ctx, info, &hdr, vecs...)
					cancel()
					switch {
					case err == nil:
						if shut {
							q.lateClaim.Add(1)
						}
					case errors.Is(err, ErrClosed):
						if r.IntN(8) == 0 {
							return
						}
					case errors.Is(err, ErrNotRunning), errors.Is(err, ErrFault), errors.Is(err, ErrNoMem),
						errors.Is(err, ErrSlotInUse), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
						if errors.Is(err, ErrNotRunning) {
							time.Sleep(10 * time.Microsecond)
						}
					default:
						fail("queue %d: Submit: %v", qi, err)
					}
				}
			}()
		}
	}
	// Closers: two per queue, Close under contexts done already or ending soon.
	for qi, q := range qs {
		for c := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, uint64(qi*2+c)+0x100))
				select { // the queue first carries requests for a while
				case <-stop:
					return
				case <-time.After(dur/4 + time.Duration(r.Int64N(int64(dur)/2))):
				}
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Duration(200+r.IntN(3000)) * time.Microsecond):
					}
					var ctx context.Context
					var cancel context.CancelFunc
					switch r.IntN(6) {
					case 0, 1:
						ctx, cancel = context.WithCancel(hctx)
						cancel()
					case 5:
						ctx, cancel = context.WithTimeout(hctx, time.Duration(r.IntN(5))*time.Millisecond)
					default:
						ctx, cancel = context.WithTimeout(hctx, time.Duration(r.IntN(300))*time.Microsecond)
					}
					err := q.pq.Close(ctx)
					cancel()
					switch {
					case err == nil:
						q.closedOK.Store(true)
						if n, d := q.pq.Stats().Requests, q.ndone.Load(); int64(n) != d {
							fail("queue %d: Close returned nil with %d requests, %d ended", qi, n, d)
						}
					case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
					default:
						fail("queue %d: Close: %v", qi, err)
					}
				}
			}()
		}
	}
	chaos := sdmatest.Chaos{Rand: rand.New(rand.NewPCG(seed, 0x9c11)), Memory: func(r *rand.Rand) {
		qs[r.IntN(len(qs))].pq.Invalidate(bufs[r.IntN(len(bufs))])
	}}
	if err := chaos.Run(dev, &stopped, &bg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(dur / 2)
	if devClose {
		if err := dev.Close(); err != nil {
			t.Fatalf("%s: device Close: %v", desc, err)
		}
	}
	time.Sleep(dur / 2)
	close(stop)
	wdone := make(chan struct{})
	go func() { wg.Wait(); close(wdone) }()
	select {
	case <-wdone:
	case <-hctx.Done():
		hang("submitters and closers")
	}
	for qi, q := range qs {
		if err := q.pq.Close(hctx); err != nil {
			if hctx.Err() != nil {
				hang(fmt.Sprintf("queue %d: last Close", qi))
			}
			t.Fatalf("%s: queue %d: last Close: %v", desc, qi, err)
		}
		q.closedOK.Store(true)
	}
	stopped.Store(true)
	bg.Wait()
	if err := dev.Close(); err != nil {
		t.Fatalf("%s: device Close: %v", desc, err)
	}
	for _, s := range bad {
		t.Errorf("%s: %s", desc, s)
	}
	for qi, q := range qs {
		st := q.pq.Stats()
		if int64(st.Requests) != q.ndone.Load() || int64(st.Requests) != q.hook.Load() || st.Requests != st.Completed+st.Failed {
			t.Errorf("%s: queue %d: %d requests, %d Done calls, %d ends, %d complete + %d failed", desc, qi, st.Requests, q.ndone.Load(), q.hook.Load(), st.Completed, st.Failed)
		}
		if n := q.lateDone.Load(); n != 0 {
			t.Errorf("%s: queue %d: %d requests ended after a Close returned nil", desc, qi, n)
		}
		if n := q.lateClaim.Load(); n != 0 {
			t.Errorf("%s: queue %d: %d Submits accepted after a Close returned nil", desc, qi, n)
		}
		for s := range slots {
			if c := q.pq.Comp(s); c.Status == Queued {
				t.Errorf("%s: queue %d slot %d left QUEUED", desc, qi, s)
			}
		}
		if n := q.a.Stats().InUse; n != 0 {
			t.Errorf("%s: queue %d: %d txreqs not back", desc, qi, n)
		}
		if n := st.Pins.Pages; n != 0 {
			t.Errorf("%s: queue %d: %d pages still pinned", desc, qi, n)
		}
		t.Logf("%s: queue %d: %d requests, %d complete, %d failed, %d deferrals", desc, qi, st.Requests, st.Completed, st.Failed, st.Deferrals)
	}
}

// TestFaultSoakQueueCloseInterrupted: see runQCloseSoak.
func TestFaultSoakQueueCloseInterrupted(t *testing.T) {
	soak.Seeds(t, 16, 4, 60*time.Millisecond, 25*time.Millisecond, runQCloseSoak)
}
