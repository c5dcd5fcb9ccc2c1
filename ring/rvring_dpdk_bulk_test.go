package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// DPDK's test_ring.c at its own sizes (RING_SIZE 4096, MAX_BULK 32), with the values it checks:
// test_ring_burst_bulk_tests1 to 4 and test_ring_basic_ex, for every producer API (sendVia's five)
// against both consumers (Dequeue, and the peek consumer: Tail/Slot/SetHWHead then a completion
// pass, DPDK's dequeue_bulk_start/finish), every implementation, with the indices starting at 0,
// just below 2^32 and just below 2^64. After every enqueue the free space (DPDK's free_space
// out-parameter: FreeCnt) and after every dequeue the count still available (DPDK's available:
// Tail-HWHead) are what DPDK returns; rte_ring_count, free_count, full and empty are Used,
// FreeCnt, FreeCnt()==0 and Empty; every dequeued descriptor is the one enqueued there (DPDK's
// memcmp), stamped with its index's generation. Element sizes, exact-size rings and the burst
// enqueue have no counterpart here (16-byte descriptors, capacity Size()-1, all-or-nothing
// reservations); the burst dequeue is Dequeue, and a bulk dequeue of n is a Dequeue of n with at
// least n published.

// dpdkBulk is one ring under DPDK's functional tests: the ring, a producer API, a consumer, and
// the descriptors in flight (what the next dequeue must return).
type dpdkBulk struct {
	t        *testing.T
	name     string
	r        *Ring
	api      int  // sendVia's producer API
	peek     bool // the peek consumer; else Dequeue
	val      uint64
	inFlight []desc.Desc // enqueued, not dequeued, in order (unstamped)
	rng      *rand.Rand
	buf      []desc.Desc // enq's batch and deq's destination, reused
}

// scratch returns b.buf resized to n. (enq, deq and counts call t.Helper only on their failure
// paths, and reuse this buffer: per call, Helper and the allocations were most of the test's CPU
// under -race.)
func (b *dpdkBulk) scratch(n int) []desc.Desc {
	if cap(b.buf) < n {
		b.buf = make([]desc.Desc, n)
	}
	return b.buf[:n]
}

// enq is a bulk enqueue of n that must succeed (ok) or be refused with ErrFull changing nothing;
// it checks DPDK's free_space after it.
func (b *dpdkBulk) enq(n int, ok bool) {
	capacity := b.r.Size() - 1
	used := b.r.Used()
	ds := b.scratch(n)
	for i := range ds {
		b.val++
		ds[i] = desc.Desc{Qw0: b.val, Qw1: ^b.val | desc.GenerationSMask}
	}
	err := sendVia(b.r, b.api, ds)
	if !ok {
		if err != ErrFull || b.r.Used() != used || b.r.Reserved() != b.r.Tail() {
			b.t.Helper()
			b.t.Fatalf("%s: bulk of %d with %d free: %v, Used %d -> %d: want the bare ErrFull, nothing changed", b.name, n, capacity-used, err, used, b.r.Used())
		}
		b.val -= uint64(n)
		return
	}
	if err != nil {
		b.t.Helper()
		b.t.Fatalf("%s: bulk of %d with %d free: %v", b.name, n, capacity-used, err)
	}
	b.inFlight = append(b.inFlight, ds...)
	if got, want := b.r.FreeCnt(), capacity-used-n; got != want {
		b.t.Helper()
		b.t.Fatalf("%s: free space after a bulk of %d: %d, want %d", b.name, n, got, want)
	}
}

// deq dequeues a burst of up to n (Dequeue) or, with the peek consumer, a bulk of n if that many
// are available (else nothing, as DPDK's dequeue_bulk_start); it must return want, the oldest
// descriptors in flight in order, and leave DPDK's available count.
func (b *dpdkBulk) deq(n, want int) {
	h := b.r.HWHead()
	avail := int(b.r.Tail() - h)
	dst := b.scratch(n)
	got := 0
	if !b.peek {
		got = b.r.Dequeue(dst)
	} else if avail >= n {
		for i := range n {
			dst[i] = b.r.Slot(h + uint64(i))
		}
		got = n
		if b.rng.IntN(2) == 0 {
			b.r.SetHWHead(h + uint64(n))
		} else {
			b.r.StoreHWHead(h + uint64(n))
		}
		b.r.BeginWrite()
		b.r.SetSwHead(h + uint64(n))
		b.r.EndWrite()
	}
	if got != want {
		b.t.Helper()
		b.t.Fatalf("%s: dequeue of %d with %d available: %d, want %d", b.name, n, avail, got, want)
	}
	for i, d := range dst[:got] {
		idx := h + uint64(i)
		if w := b.inFlight[i].WithGeneration(b.r.Generation(idx)); d != w {
			b.t.Helper()
			b.t.Fatalf("%s: index %#x: %+v, want %+v", b.name, idx, d, w)
		}
	}
	b.inFlight = b.inFlight[got:]
	if a := int(b.r.Tail() - b.r.HWHead()); a != avail-got || a != len(b.inFlight) {
		b.t.Helper()
		b.t.Fatalf("%s: available after a dequeue of %d: %d, want %d", b.name, got, a, avail-got)
	}
}

// counts checks rte_ring_count, free_count, full and empty against the descriptors in flight.
func (b *dpdkBulk) counts(when string) {
	capacity := b.r.Size() - 1
	n := len(b.inFlight)
	if b.r.Used() != n || b.r.FreeCnt() != capacity-n || (b.r.FreeCnt() == 0) != (n == capacity) || b.r.Empty() != (n == 0) {
		b.t.Helper()
		b.t.Fatalf("%s: %s: count %d free %d empty %v, want %d, %d, %v", b.name, when, b.r.Used(), b.r.FreeCnt(), b.r.Empty(), n, capacity-n, n == 0)
	}
}

// TestRVRingDPDKBurstBulk runs test_ring_burst_bulk_tests1 (random shift, then fill to full in
// one bulk of the capacity and empty it in one), 2 (1, 2, MAX_BULK in, then out), 3 (MAX_BULK in
// and out over the ring's length), 4 (fill to exactly full, the last bulk MAX_BULK-3, a bulk of
// MAX_BULK refused, then out in MAX_BULK, 2 and MAX_BULK-3) and test_ring_basic_ex (RING_SIZE-1
// single enqueues to full, as many single dequeues to empty, then a burst and a bulk of 2), one
// after the other on the same ring, so that each starts where the last left the indices.
func TestRVRingDPDKBurstBulk(t *testing.T) {
	const (
		ringSize = 4096
		maxBulk  = 32
		rsz      = ringSize - 1
	)
	iters := 8 // TEST_RING_FULL_EMPTY_ITER
	if testing.Short() && raceEnabled {
		iters = 2
	}
	forEachImpl(t, func(t *testing.T) {
		for _, start := range []uint64{0, 1<<32 - 3*ringSize - 17, ^uint64(0) - 3*ringSize - 17} {
			for api := range 5 {
				for _, peek := range []bool{false, true} {
					if testing.Short() && raceEnabled && peek != (api%2 == 0) {
						continue // half the pairs: each API and each consumer still run
					}
					r, err := newAt(ringSize, start)
					if err != nil {
						t.Fatal(err)
					}
					b := &dpdkBulk{t: t, name: fmt.Sprintf("start=%#x/api=%d/peek=%v", start, api, peek), r: r, api: api, peek: peek, rng: rand.New(rand.NewPCG(start, uint64(api)))}

					// tests1: random full/empty.
					for range iters {
						shift := max(b.rng.IntN(ringSize), 1)
						b.enq(shift, true)
						b.deq(shift, shift)
						b.enq(rsz, true)
						b.counts("filled")
						b.enq(1, false)
						b.deq(rsz, rsz)
						b.counts("emptied")
					}
					// tests2: 1, 2, MAX_BULK objects in and out.
					for _, n := range []int{1, 2, maxBulk} {
						b.enq(n, true)
					}
					for _, n := range []int{1, 2, maxBulk} {
						b.deq(n, n)
					}
					b.counts("tests2")
					// tests3: MAX_BULK in and out, the ring's length over.
					for range ringSize / maxBulk {
						b.enq(maxBulk, true)
						b.deq(maxBulk, maxBulk)
					}
					// tests4: fill to exactly full, refuse, empty.
					for range ringSize/maxBulk - 1 {
						b.enq(maxBulk, true)
					}
					b.enq(2, true)
					b.enq(maxBulk-3, true)
					b.counts("tests4 full")
					b.enq(maxBulk, false)
					for range ringSize/maxBulk - 1 {
						b.deq(maxBulk, maxBulk)
					}
					b.deq(2, 2)
					// The rest: a bulk of MAX_BULK-3, or a burst of MAX_BULK that returns them.
					if peek {
						b.deq(maxBulk, 0) // a bulk of more than is there: nothing
						b.deq(maxBulk-3, maxBulk-3)
					} else {
						b.deq(maxBulk, maxBulk-3)
					}
					b.counts("tests4 empty")
					// basic_ex: single objects to full and back, then a burst and a bulk of 2.
					for range rsz {
						b.enq(1, true)
					}
					b.counts("basic_ex full")
					b.enq(1, false)
					for range rsz {
						b.deq(1, 1)
					}
					b.counts("basic_ex empty")
					b.enq(2, true)
					b.deq(2, 2)
					b.enq(2, true)
					b.deq(2, 2)
					b.counts("basic_ex end")
				}
			}
		}
	})
}

// TestRVRingDPDKSeqCountWrap: the ring's one 32-bit index is the head seqcount (DPDK's indices
// are 32-bit and wrap at 2^32; the ring's are 64-bit). With the count started just below 2^32,
// every way of moving it (Dequeue, the assembly's INCL and the Go path's write section; a
// completion pass; Reset) is run across the wrap, every implementation: each pass adds exactly 2
// (mod 2^32), a snapshot taken before a pass is stale after it and one taken after is current,
// a snapshot taken inside an open section (odd count, 2^32-1 included) is stale once it closes,
// BeginWait returns the even count, and a second BeginWrite at 2^32-1 is still refused.
func TestRVRingDPDKSeqCountWrap(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, c0 := range []uint32{1<<32 - 2, 1<<32 - 4, 1<<32 - 6} {
			r, err := newAt(64, ^uint64(0)-20)
			if err != nil {
				t.Fatal(err)
			}
			r.seq.seq.Store(c0)
			dst := make([]desc.Desc, 8)
			for step := range 12 {
				c := r.Seq().Count()
				s := r.HeadSeq()
				if s != c || r.HeadRetry(s) || r.Seq().BeginWait() != c {
					t.Fatalf("count %#x: HeadSeq %#x, HeadRetry %v, BeginWait %#x", c, s, r.HeadRetry(s), r.Seq().BeginWait())
				}
				if _, err := r.EnqueueSP(batch(uint64(step), 3), 0); err != nil {
					t.Fatal(err)
				}
				switch step % 3 {
				case 0:
					if got := r.Dequeue(dst); got != 3 {
						t.Fatalf("count %#x: Dequeue = %d", c, got)
					}
				case 1:
					r.SetHWHead(r.Tail())
					r.BeginWrite()
					in := r.HeadSeq()
					if r.Seq().Count() != c+1 || in != c || !r.HeadRetry(in) {
						t.Fatalf("count %#x: inside the section count %#x, HeadSeq %#x, HeadRetry %v", c, r.Seq().Count(), in, r.HeadRetry(in))
					}
					if p := panicOf(r.BeginWrite); !isErr(p, ErrOrder) || r.Seq().Count() != c+1 {
						t.Fatalf("count %#x: a second BeginWrite: %v, count %#x", c+1, p, r.Seq().Count())
					}
					r.SetSwHead(r.Tail())
					r.EndWrite()
					if !r.HeadRetry(in) {
						t.Fatalf("count %#x: the snapshot %#x from inside the section is current after it", r.Seq().Count(), in)
					}
				default:
					r.Reset(r.Tail() + 1) // quiescent: the 3 published are dropped, as rte_ring_reset's
				}
				if got := r.Seq().Count(); got != c+2 || !r.HeadRetry(s) {
					t.Fatalf("step %d from %#x: count %#x, want %#x; HeadRetry(%#x) %v", step, c, got, c+2, s, r.HeadRetry(s))
				}
			}
		}
	})
}
