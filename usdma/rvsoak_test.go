package usdma

// Fault-schedule soak of the message path (review rvsoak): seeded random schedules mixing, on
// one device shared by several packet queues, injected halts, planned random halts, Stop/Start,
// failing, stalling and panicking sinks, Done callbacks that panic, pin-cache invalidation (deregistration of the vectors'
// registrations while their packets are in flight), context cancellation of Submit, bounded
// allocators, both completion modes, and the queues' and the device's Close or Shutdown at a
// random point. The ledger at the end: every request a Submit accepted ended exactly once
// (Done, the test hook and Stats agree), no slot is left QUEUED, every Wait returned, every
// txreq is back in its allocator, Close returned, no goroutine is left.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// rvPanicSink panics on every period-th delivery, else passes the packet on.
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

type rvQueue struct {
	pq    *PktQ
	a     interface{ Stats() alloc.Stats }
	done  sync.Map // slot -> *atomic.Int64: Done calls
	ndone atomic.Int64
	hook  atomic.Int64
	shut  atomic.Bool // Close returned nil: no request may end after it
}

func runRVUsdmaSoak(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	cfg := sdma.Config{
		Engines:  1 + rng.IntN(2),
		RingSize: []int{64, 128, 256}[rng.IntN(3)],
		Sink: &rvPanicSink{period: uint64([]int{0, 37, 101}[rng.IntN(3)]), inner: &sdmatest.FaultSink{
			Sink: &sdmatest.DiscardSink{}, FailRate: 0.05, StallRate: 0.02, Stall: 20 * time.Microsecond, Seed: seed,
		}},
	}
	poll := rng.IntN(3) == 0
	if poll {
		cfg.Completion = sdma.CompletePoll
	}
	if rng.IntN(2) == 0 {
		cfg.Mapper = testIOMMU(t)
	}
	cfg.Manual = rng.IntN(4) == 0 // driven by the poller goroutines below
	dev, err := sdma.NewDevice(cfg)
	require.NoError(t, err)
	desc := fmt.Sprintf("seed %d: engines %d ring %d poll %v manual %v", seed, cfg.Engines, cfg.RingSize, poll, cfg.Manual)
	how := rng.IntN(4) // how it ends
	desc += fmt.Sprintf(" end %d", how)
	for i := range dev.NumEngines() {
		if rng.IntN(2) == 0 {
			require.NoError(t, sdmatest.SetFaults(dev.Engine(i), sdmatest.FaultPlan{HaltRate: 0.01, Seed: seed}))
		}
	}
	const slots = 4
	panicky := rng.IntN(3) == 0 // every 7th Done panics: on the completion pass, or out of Submit
	if panicky {
		desc += " panicky"
	}
	nq := 1 + rng.IntN(3)
	qs := make([]*rvQueue, nq)
	for i := range qs {
		q := &rvQueue{}
		var a alloc.Allocator[TxReq]
		switch rng.IntN(3) {
		case 0:
			l, err := alloc.NewList[TxReq](4+rng.IntN(8), nil)
			require.NoError(t, err)
			a, q.a = l, l
		case 1:
			s, err := alloc.NewSlab(alloc.SlabConfig[TxReq]{ObjectsPerSlab: 4 + rng.IntN(8), MaxSlabs: 1})
			require.NoError(t, err)
			a, q.a = s, s
		default:
			s, err := alloc.NewSlab(alloc.SlabConfig[TxReq]{ObjectsPerSlab: 64})
			require.NoError(t, err)
			a, q.a = s, s
		}
		qc := Config{Device: dev, Slots: slots, Alloc: a, Ctxt: uint16(i), Timeout: 200 * time.Microsecond,
			DisableAHG: rng.IntN(4) == 0, PinLimit: []int{0, 4, NoPinLimit}[rng.IntN(3)]}
		qc.Done = func(slot int, e CompEntry) {
			v, _ := q.done.LoadOrStore(slot, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			q.ndone.Add(1)
			if q.shut.Load() {
				t.Errorf("%s: slot %d ended after Close returned", desc, slot)
			}
			if panicky && q.ndone.Load()%7 == 0 {
				panic("rvsoak: Done panic")
			}
			if e.Status != Complete && e.Status != Error {
				t.Errorf("%s: Done with state %v", desc, e.Status)
			}
		}
		q.pq, err = New(qc)
		require.NoError(t, err)
		testHooks(q.pq).onEnd = func(int, CompState) { q.hook.Add(1) }
		qs[i] = q
	}
	// Vectors: a few buffers, some shared between queues (one registration, several pins).
	bufs := make([][]byte, 6)
	for i := range bufs {
		bufs[i] = pattern(1+rng.IntN(20000), byte(i))
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bg sync.WaitGroup
	var stopped atomic.Bool
	// Pollers for CompletePoll.
	if poll || cfg.Manual {
		sdmatest.DriveEngines(dev, cfg.Manual, &stopped, &bg)
	}
	// Submitters: one per queue, random messages round-robin on the slots.
	for qi, q := range qs {
		wg.Add(1)
		go func(qi int, q *rvQueue, seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(qi)))
			ended := func(slot int, err error) bool {
				if err == context.DeadlineExceeded { // Wait's own context, not the slot's outcome
					t.Errorf("%s: queue %d slot %d never ended: %v", desc, qi, slot, q.pq.Comp(slot))
					return false
				}
				return true
			}
			soakProduce(q.pq, slots, 20*time.Second, stop, ended, func(slot int) bool {
				nv := 1 + rng.IntN(3)
				vecs := make([][]byte, nv)
				for k := range vecs {
					b := bufs[rng.IntN(len(bufs))]
					off := rng.IntN(len(b))
					vecs[k] = b[off : off+1+rng.IntN(len(b)-off)]
				}
				frag := []int{64, 256, 1024, 4096}[rng.IntN(4)]
				info, hdr := Message(slot, frag, testTemplate, vecs...)
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if rng.IntN(4) == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(200))*time.Microsecond)
				}
				var err error
				func() {
					defer func() {
						if p := recover(); p != nil && p != "rvsoak: Done panic" {
							panic(p)
						}
					}()
					err = q.pq.Submit(ctx, info, &hdr, vecs...) // a request that ends here calls Done here
				}()
				cancel()
				switch {
				case err == nil:
				case errors.Is(err, ErrClosed):
					if q.pq.closed.Load() {
						return false
					}
				case errors.Is(err, ErrNotRunning), errors.Is(err, ErrFault), errors.Is(err, ErrNoMem),
					errors.Is(err, ErrInvalid), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
					if errors.Is(err, ErrNotRunning) {
						time.Sleep(10 * time.Microsecond)
					}
				default:
					t.Errorf("%s: queue %d: Submit: unexpected %v", desc, qi, err)
				}
				return true
			})
		}(qi, q, seed)
	}
	// Chaos.
	chaos := sdmatest.Chaos{Rand: rand.New(rand.NewPCG(seed, 99)), Memory: func(rng *rand.Rand) {
		b := bufs[rng.IntN(len(bufs))]
		qs[rng.IntN(len(qs))].pq.Invalidate(b)
	}}
	if err := chaos.Run(dev, &stopped, &bg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(steps) * time.Duration(1+rng.IntN(3)) * time.Millisecond)

	// The end, in a random order.
	closeQueues := func() {
		for qi, q := range qs {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := q.pq.Close(ctx)
			cancel()
			q.shut.Store(err == nil)
			if err != nil {
				t.Errorf("%s: queue %d: Close: %v (busy %d, reqs %d)", desc, qi, err, q.pq.busy.Busy(), q.pq.nreqs)
			}
		}
	}
	switch how {
	case 0: // queues first, chaos still running, then the device
		closeQueues()
		close(stop)
		wg.Wait()
		stopped.Store(true)
		bg.Wait()
		require.NoError(t, dev.Close())
	case 1: // the device closes under the submitters, then the queues
		require.NoError(t, dev.Close())
		close(stop)
		closeQueues()
		wg.Wait()
		stopped.Store(true)
		bg.Wait()
	case 2: // Shutdown under the submitters
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := dev.Shutdown(ctx)
		cancel()
		if err != nil {
			t.Errorf("%s: Shutdown: %v", desc, err)
		}
		close(stop)
		closeQueues()
		wg.Wait()
		stopped.Store(true)
		bg.Wait()
		require.NoError(t, dev.Close())
	default: // queues and device at once
		close(stop)
		var cw sync.WaitGroup
		cw.Add(1)
		go func() { defer cw.Done(); closeQueues() }()
		require.NoError(t, dev.Close())
		cw.Wait()
		wg.Wait()
		stopped.Store(true)
		bg.Wait()
	}
	for qi, q := range qs {
		st := q.pq.Stats()
		assert.EqualValues(t, st.Requests, q.ndone.Load(), "%s: queue %d: requests vs Done calls", desc, qi)
		assert.EqualValues(t, st.Requests, q.hook.Load(), "%s: queue %d: requests vs ends", desc, qi)
		assert.EqualValues(t, st.Requests, st.Completed+st.Failed, "%s: queue %d", desc, qi)
		for s := range slots {
			assert.NotEqual(t, Queued, q.pq.Comp(s).Status, "%s: queue %d slot %d", desc, qi, s)
		}
		assert.Zero(t, q.a.Stats().InUse, "%s: queue %d: txreqs not back", desc, qi)
		assert.Zero(t, q.pq.Stats().Pins.Pages, "%s: queue %d: pages still pinned", desc, qi)
	}
	if testing.Verbose() {
		for qi, q := range qs {
			st := q.pq.Stats()
			t.Logf("%s: queue %d: %d requests, %d complete, %d error, %d packets, %d deferrals", desc, qi, st.Requests, st.Completed, st.Failed, st.Packets, st.Deferrals)
		}
	}
	if t.Failed() {
		for i := range dev.NumEngines() {
			t.Logf("engine %d: %v %v", i, sdmatest.EngineState(dev.Engine(i)), dev.Engine(i).Stats())
		}
	}
}

// TestRVSoakUsdmaFaultSchedules: see runRVUsdmaSoak.
func TestRVSoakUsdmaFaultSchedules(t *testing.T) {
	soak.Seeds(t, 24, 6, 20, 8, runRVUsdmaSoak)
}

// soakProduce is the soaks' producer loop on pq: until stop closes, request i goes on slot
// i % slots, from the second round on once the slot's previous request ended (Wait, for at most
// within). ended judges Wait's error (false: the slot never ended, which it reported; the loop
// ends); send sends the next request on slot and reports whether to go on.
func soakProduce(pq *PktQ, slots int, within time.Duration, stop <-chan struct{}, ended func(slot int, err error) bool, send func(slot int) bool) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		slot := i % slots
		if i >= slots {
			ctx, cancel := context.WithTimeout(context.Background(), within)
			err := pq.Wait(ctx, slot)
			cancel()
			if !ended(slot, err) {
				return
			}
		}
		if !send(slot) {
			return
		}
	}
}
