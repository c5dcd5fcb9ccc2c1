package ring

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// DPDK's ring stress (test_ring_stress_impl.h, run by test_ring_mpmc_stress.c, _hts_, _rts_,
// _mt_peek_, _st_peek_ and their _zc_ variants) circulates a pool of objects through one ring:
// the ring (2*num slots) starts holding all num objects, and every worker loops "dequeue a bulk of
// 28..43, check each object is in its default state and mark it as this worker's, check the marks
// are still its own and restore the default, enqueue the bulk back", with both bulk operations
// required to move exactly what was asked (check_ring_op). An object dequeued twice, or handed to
// a worker while another holds it, fails the marks; a lost or duplicated slot fails the counts.
//
// Here the consumer side is single (Dequeue, or the split hardware model and completion pass), so
// the workers take turns at it under a mutex, as DPDK's _st_ variants take a spinlock around the
// SC dequeue: every worker runs the consumer in turn, from its own goroutine, and Dequeue's
// cached tail, the heads and the seqcount pass from one to the next through the mutex. The
// producer side is each multi-producer API lock-free, or EnqueueSP under a second mutex (the
// _st_ variants' SP enqueue). The zero-copy variants' enqueue (reserve, then fill the ring's
// slots in place, then finish) is Reserve with the descriptors written in pieces; the peek
// variants' dequeue (start, read in place, finish) is Tail/Slot/SetHWHead with the completion pass
// sometimes left to the next worker.
//
// On top of DPDK's checks, each descriptor carries its producer and sequence number: the
// consumer checks that every producer's descriptors come out in the order it sent them (and, with
// the one serialised SP producer, in the global order), with the generation of the index they
// were written at.

// circMode is one DPDK stress variant.
type circMode struct {
	name string
	sp   bool // EnqueueSP under a producer mutex (the _st_ variants); else the MP APIs, lock-free
	peek int  // the consumer: 0 Dequeue, 1 the split consumer (the _peek_ variants), 2 either, by turns at random
}

// circDesc packs a pool object's descriptor: qw0 = id<<48 | producer<<40 | seq; qw1 = a check
// word of qw0 in 63:32 and the generation field set (stamping must overwrite it).
func circDesc(id, pid, seq uint64) desc.Desc {
	qw0 := id<<48 | pid<<40 | seq
	return desc.Desc{Qw0: qw0, Qw1: uint64(check32(qw0))<<32 | desc.GenerationSMask}
}

// TestStressRVRingDPDKCirculate: DPDK's per-lcore stress on this ring. Four workers circulate a
// pool of 256 objects through a ring of 512 slots (DPDK's sizes: the ring twice the pool, the
// pool 2*BULK_NUM per worker, BULK_NUM 32), starting just below 2^64 or 2^32 so that the indices
// wrap during the run, in six variants (MP or SP producers; Dequeue, the peek consumer, or either
// by turns, Dequeue then freeing a pass the peek consumer left), every implementation. Checked,
// as DPDK checks: every dequeue returns exactly the bulk asked (the pool guarantees enough
// published objects), every enqueue succeeds at once (the ring always has room for the whole
// pool), every object a worker receives is unowned (not dequeued twice, not held by another
// worker) and is still its own when it gives it back. Then each producer's order and the
// generations, and at the end: the ring holds the whole pool, each object exactly once, none
// held, Used and FreeCnt say so. Run under -race and at -cpu 1,2,4 (-short: 150 rounds per
// worker).
func TestStressRVRingDPDKCirculate(t *testing.T) {
	rounds := 1500
	switch {
	case testing.Short():
		rounds = 150
	case raceEnabled:
		rounds = 500 // 1500 took 28 s at -cpu 4 under the detector
	}
	modes := []circMode{{"MP/Dequeue", false, 0}, {"MP/peek", false, 1}, {"MP/mixed", false, 2}, {"SP/Dequeue", true, 0}, {"SP/peek", true, 1}, {"SP/mixed", true, 2}}
	forEachImpl(t, func(t *testing.T) {
		for i, m := range modes {
			for j, start := range []uint64{^uint64(0) - 3000, 1<<32 - 3000} {
				t.Run(fmt.Sprintf("%s/start=%#x", m.name, start), func(t *testing.T) {
					circulate(t, m, start, rounds, uint64(i*2+j))
				})
			}
		}
	})
}

// circulate runs one variant: workers goroutines, rounds rounds each.
func circulate(t *testing.T, m circMode, start uint64, rounds int, seed uint64) {
	const (
		workers = 4
		bulk    = 32                 // DPDK's BULK_NUM
		pool    = 2 * bulk * workers // DPDK's RING_SIZE objects
		size    = 2 * pool           // DPDK's ring of 2 * RING_SIZE
		minBulk = 7 * bulk / 8       // num in [7/8, 11/8] of BULK_NUM
		maxBulk = minBulk + bulk/2 - 1
		unowned = ^uint32(0) // DPDK's def_elm: nobody holds the object
		filler  = workers    // the producer id of the initial fill
	)
	r, err := newAt(size, start)
	if err != nil {
		t.Fatal(err)
	}
	owner := make([]atomic.Uint32, pool) // DPDK's ring_elem contents: unowned, or the holder's id
	errs := make(errSink, 8)
	var stop atomic.Bool
	fail := func(format string, args ...any) {
		errs.report(format, args...)
		stop.Store(true)
	}

	// The consumer's state, owned by whoever holds cmu.
	var cmu sync.Mutex
	next := make([]uint64, workers+1) // each producer's next sequence number
	var nextGlobal uint64             // SP: the serialised producer's next sequence number
	lagging := false                  // peek: a completion pass left to the next consumer
	// The SP producer's state, owned by whoever holds pmu.
	var pmu sync.Mutex
	var global uint64

	// check verifies the descriptor read at index idx and returns its object id; under cmu.
	check := func(idx uint64, d desc.Desc) (uint64, bool) {
		id, pid, seq := d.Qw0>>48, d.Qw0>>40&0xff, d.Qw0&(1<<40-1)
		switch {
		case id >= pool || pid > filler || d.Qw1&^desc.GenerationSMask != uint64(check32(d.Qw0))<<32:
			fail("index %#x: not a pool descriptor: %#x", idx, d)
		case d.Generation() != r.Generation(idx):
			fail("index %#x: generation %d, want %d", idx, d.Generation(), r.Generation(idx))
		case m.sp && seq != nextGlobal:
			fail("index %#x: the SP producer's sequence %d, want %d", idx, seq, nextGlobal)
		case !m.sp && seq != next[pid]:
			fail("index %#x: producer %d's sequence %d, want %d", idx, pid, seq, next[pid])
		default:
			nextGlobal++
			next[pid]++
			return id, true
		}
		return 0, false
	}
	// complete runs the completion pass up to hwHead (StoreSwHead or SetSwHead); under cmu.
	complete := func(rng *rand.Rand) {
		r.BeginWrite()
		if rng.IntN(2) == 0 {
			r.SetSwHead(r.HWHead())
		} else {
			r.StoreSwHead(r.HWHead())
		}
		r.EndWrite()
		lagging = false
	}
	// dequeue takes exactly len(ids) objects, as DPDK's bulk dequeue, or reports; under cmu.
	dequeue := func(rng *rand.Rand, ids []uint64, dst []desc.Desc) bool {
		n := len(ids)
		h := r.HWHead()
		if m.peek == 0 || m.peek == 2 && rng.IntN(2) == 0 {
			// A pass the previous (peek) consumer left is freed by Dequeue's own: swHead
			// goes from behind hwHead to past what it reads.
			if got := r.Dequeue(dst[:n]); got != n {
				fail("Dequeue(%d) at %#x = %d (tail %#x): the pool leaves at least %d published", n, h, got, r.Tail(), pool-(workers-1)*maxBulk)
				return false
			}
			if r.SwHead() != h+uint64(n) {
				fail("Dequeue(%d) from %#x: swHead %#x, want %#x", n, h, r.SwHead(), h+uint64(n))
				return false
			}
			lagging = false
		} else {
			if lagging {
				complete(rng) // the previous consumer's pass: at most one bulk behind
			}
			if avail := r.Tail() - h; avail < uint64(n) {
				fail("peek of %d at %#x: %d published: the pool leaves at least %d", n, h, avail, pool-(workers-1)*maxBulk)
				return false
			}
			for i := range n {
				dst[i] = r.Slot(h + uint64(i))
			}
			if rng.IntN(2) == 0 {
				r.SetHWHead(h + uint64(n))
			} else {
				r.StoreHWHead(h + uint64(n))
			}
			if lagging = rng.IntN(3) == 0; !lagging {
				complete(rng)
			}
		}
		for i := range n {
			id, ok := check(h+uint64(i), dst[i])
			if !ok {
				return false
			}
			ids[i] = id
		}
		return true
	}

	// The initial fill: the whole pool, one object per enqueue, as DPDK's mt1_init.
	for id := range uint64(pool) {
		if _, err := r.EnqueueSP([]desc.Desc{circDesc(id, filler, id)}, 0); err != nil {
			t.Fatalf("fill %d: %v", id, err)
		}
		owner[id].Store(unowned)
	}
	global = pool

	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(lc uint32) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(lc)))
			ids := make([]uint64, maxBulk)
			dst := make([]desc.Desc, maxBulk)
			ds := make([]desc.Desc, maxBulk)
			var seq uint64
			for round := 0; round < rounds && !stop.Load(); round++ {
				n := minBulk + rng.IntN(bulk/2)
				cmu.Lock()
				ok := dequeue(rng, ids[:n], dst)
				cmu.Unlock()
				if !ok {
					return
				}
				// check_updt_elem(obj, num, &def_elm, &loc_elm), then (&loc_elm, &def_elm).
				for _, id := range ids[:n] {
					if !owner[id].CompareAndSwap(unowned, lc) {
						fail("worker %d: object %d dequeued while held by %d", lc, id, owner[id].Load())
						return
					}
				}
				if rng.IntN(4) == 0 {
					runtime.Gosched() // hold the objects a while
				}
				for _, id := range ids[:n] {
					if !owner[id].CompareAndSwap(lc, unowned) {
						fail("worker %d: object %d taken over by %d while held", lc, id, owner[id].Load())
						return
					}
				}
				if m.sp {
					pmu.Lock()
					for i, id := range ids[:n] {
						ds[i] = circDesc(id, uint64(lc), global+uint64(i))
					}
					_, err := r.EnqueueSP(ds[:n], 0)
					if err == nil {
						global += uint64(n)
					}
					pmu.Unlock()
					if err != nil {
						fail("worker %d: EnqueueSP of %d: %v: the ring has room for the whole pool", lc, n, err)
						return
					}
					continue
				}
				for i, id := range ids[:n] {
					ds[i] = circDesc(id, uint64(lc), seq+uint64(i))
				}
				if err := circEnqueueMP(r, rng, round%5, ds[:n]); err != nil {
					fail("worker %d: enqueue of %d via API %d: %v: the ring has room for the whole pool", lc, n, round%5, err)
					return
				}
				seq += uint64(n)
			}
		}(uint32(w))
	}
	wg.Wait()
	errs.check(t)
	if t.Failed() {
		return
	}

	// The whole pool is back in the ring, each object once, none held.
	rng := rand.New(rand.NewPCG(seed, 99))
	if lagging {
		complete(rng)
	}
	if r.Used() != pool || r.FreeCnt() != size-1-pool || r.Reserved() != r.Tail() || r.Tail()-r.HWHead() != pool {
		t.Fatalf("end: Used %d FreeCnt %d, reserved %#x tail %#x hwHead %#x: want the pool of %d published", r.Used(), r.FreeCnt(), r.Reserved(), r.Tail(), r.HWHead(), pool)
	}
	dst := make([]desc.Desc, pool+1)
	h := r.HWHead()
	if got := r.Dequeue(dst); got != pool {
		t.Fatalf("end: Dequeue = %d, want %d", got, pool)
	}
	seen := make([]bool, pool)
	for i, d := range dst[:pool] {
		id, ok := check(h+uint64(i), d)
		if !ok {
			errs.check(t)
			return
		}
		if seen[id] {
			t.Fatalf("end: object %d twice in the ring", id)
		}
		seen[id] = true
		if o := owner[id].Load(); o != unowned {
			t.Fatalf("end: object %d still held by %d", id, o)
		}
	}
	if !r.Empty() {
		t.Fatal("end: drained, not Empty")
	}
}

// circEnqueueMP enqueues ds through a multi-producer API: sendVia's 0-3 (Enqueue, Reserve+Write+
// Publish, ReserveWrite+PublishRelease, ReserveIn+Write+PublishRelease), or 4, DPDK's zero-copy
// enqueue: Reserve, then the slots filled in place in random pieces, then Publish.
func circEnqueueMP(r *Ring, rng *rand.Rand, api int, ds []desc.Desc) error {
	if api < 4 {
		return sendVia(r, api, ds)
	}
	v, err := r.Reserve(len(ds))
	if err != nil {
		return err
	}
	for off := 0; off < len(ds); {
		k := 1 + rng.IntN(len(ds)-off)
		v.Write(off, ds[off:off+k], 0)
		off += k
	}
	v.Publish()
	return nil
}
