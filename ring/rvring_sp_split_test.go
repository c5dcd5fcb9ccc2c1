package ring

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// TestStressSPSplitConsumer is DPDK's SP/SC stress with the consumer split as sdma splits it:
// EnqueueSP (one assembly call per batch outside -race: room check, write, plain-MOV publication)
// with random batches of 1 to 16 that carry AHG edit descriptors (skip 0 to 3, copied raw),
// against a hardware-model goroutine (Tail, Slot, SetHWHead or StoreHWHead, bursts of random
// size) and a completion goroutine (HWHead, then SetSwHead or StoreSwHead inside a write section,
// freeing all or part of what was read), on a ring of 64 that wraps and fills all the time, from
// indices just below 2^64. An observer reads the accessors the whole time: swHead <= hwHead <=
// tail <= reserved loaded in that order, FreeCnt and Used in [0, capacity], a HeadSeq snapshot
// that HeadRetry does not call stale has seen no swHead change. The hardware model checks every
// descriptor exactly once, in order, the edit descriptors raw and the rest stamped with their
// index's generation. Run under -race and at -cpu 1,2,4, and without -race for the assembly.
func TestStressSPSplitConsumer(t *testing.T) {
	total := uint64(300000)
	switch {
	case testing.Short() && raceEnabled:
		total = 3000
	case testing.Short():
		total = 30000
	case raceEnabled:
		total = 40000 // 300000 took 30 s at -cpu 4 under the detector
	}
	forEachImpl(t, func(t *testing.T) {
		r, err := newAt(MinSize, ^uint64(0)-700)
		if err != nil {
			t.Fatal(err)
		}
		capacity := uint64(MinSize - 1)
		first := r.Tail()
		errs := make(errSink, 8)
		var stop atomic.Bool // set when the hardware model has seen everything, or on failure
		mix := func(k uint64) uint64 { return k*0x9e3779b97f4a7c15 | desc.GenerationSMask }
		var wg sync.WaitGroup

		// The producer.
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(7, 11))
			ds := make([]desc.Desc, 16)
			for k := uint64(0); k < total && !stop.Load(); {
				n := min(1+rng.IntN(16), int(total-k))
				skip := rng.IntN(4)
				for j := range n {
					raw := uint64(0)
					if j >= 1 && j <= skip {
						raw = 1 << 63
					}
					ds[j] = desc.Desc{Qw0: (k + uint64(j)) | raw, Qw1: mix(k + uint64(j))}
				}
				for !stop.Load() {
					s, err := r.EnqueueSP(ds[:n], skip)
					if err == nil {
						if s != first+k {
							errs.report("EnqueueSP at %#x, want %#x", s, first+k)
							stop.Store(true)
						}
						break
					}
					if err != ErrFull {
						errs.report("EnqueueSP: %v", err)
						stop.Store(true)
						return
					}
					runtime.Gosched()
				}
				k += uint64(n)
			}
		}()

		// The completion pass.
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(3, 5))
			for !stop.Load() || r.SwHead() != r.HWHead() {
				sw, hw := r.SwHead(), r.HWHead()
				if sw == hw {
					runtime.Gosched()
					continue
				}
				to := sw + 1 + uint64(rng.IntN(int(hw-sw)))
				r.BeginWrite()
				if rng.IntN(2) == 0 {
					r.SetSwHead(to)
				} else {
					r.StoreSwHead(to)
				}
				r.EndWrite()
				if rng.IntN(4) == 0 {
					runtime.Gosched()
				}
			}
		}()

		// The observer.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				seq := r.HeadSeq()
				sw := r.SwHead()
				hw, tl, res := r.HWHead(), r.Tail(), r.Reserved()
				// Loaded in this order, each index is at least the one before it (the
				// later loads see later values); how far apart depends on the moves between
				// the loads (the goroutine may be descheduled between two), so only the order
				// is checked.
				if hw-sw >= 1<<32 || tl-hw >= 1<<32 || res-tl >= 1<<32 {
					errs.report("indices out of order: sw %#x hw %#x tail %#x res %#x", sw, hw, tl, res)
					stop.Store(true)
				}
				if f, u := r.FreeCnt(), r.Used(); f < 0 || uint64(f) > capacity || u < 0 || uint64(u) > capacity {
					errs.report("FreeCnt %d Used %d", f, u)
					stop.Store(true)
				}
				if sw2 := r.SwHead(); !r.HeadRetry(seq) && sw2 != sw {
					errs.report("swHead moved %#x -> %#x under a snapshot HeadRetry calls current", sw, sw2)
					stop.Store(true)
				}
				if i%8 == 0 {
					runtime.Gosched()
				}
			}
		}()

		// The hardware model, here.
		rng := rand.New(rand.NewPCG(1, 2))
		for k := uint64(0); k < total && !stop.Load(); {
			hw, tl := r.HWHead(), r.Tail()
			if hw == tl {
				runtime.Gosched()
				continue
			}
			to := hw + 1 + uint64(rng.IntN(int(tl-hw)))
			for i := hw; i != to; i++ {
				d := r.Slot(i)
				want := desc.Desc{Qw0: k, Qw1: mix(k)}
				if d.Qw0&^(1<<63) != k {
					errs.report("index %#x: descriptor %d, want %d (%+v)", i, d.Qw0&^(1<<63), k, d)
					stop.Store(true)
					break
				}
				if d.Qw0>>63 != 0 {
					want.Qw0 |= 1 << 63
				} else {
					want = want.WithGeneration(r.Generation(i))
				}
				if d != want {
					errs.report("index %#x: %+v, want %+v", i, d, want)
					stop.Store(true)
					break
				}
				k++
			}
			if rng.IntN(2) == 0 {
				r.SetHWHead(to)
			} else {
				r.StoreHWHead(to)
			}
		}
		stop.Store(true)
		wg.Wait()
		errs.check(t)
		if !t.Failed() && (r.Tail() != first+total || !r.Empty()) {
			t.Fatalf("end: tail %#x (want %#x), empty %v", r.Tail(), first+total, r.Empty())
		}
	})
}
