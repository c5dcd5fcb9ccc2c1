package ring

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// DPDK's test_ring.c walks a ring through every fill level (test_ring_basic_full_empty,
// test_ring_burst_bulk_tests' "fill and empty the ring" loops, rte_ring_count/free_count/full/
// empty after every step), with the indices placed so that the walk crosses the index wrap. The
// tests here do that for every ring size, every producer API and every implementation, and add
// the two DPDK scenarios the other census tests do not: Reset with descriptors inside
// (rte_ring_reset), at many fill levels, and bursts at every head offset of the slot array with
// the destination's unused tail watched for stray stores.

// levelState is everything a fill level shows: the four indices, the counts, Empty.
type levelState struct {
	res, tail, hw, sw        uint64
	free, used, inproc, avai int
	empty                    bool
}

func levelOf(r *Ring) levelState {
	return levelState{
		res: r.Reserved(), tail: r.Tail(), hw: r.HWHead(), sw: r.SwHead(),
		free: r.FreeCnt(), used: r.Used(), inproc: r.InProcess(), avai: int(r.Tail() - r.HWHead()),
		empty: r.Empty(),
	}
}

// wantLevel is the state of a ring whose indices sit at sw <= hw <= tail == res.
func wantLevel(size int, sw, hw, tail uint64) levelState {
	used := int(tail - sw)
	return levelState{
		res: tail, tail: tail, hw: hw, sw: sw,
		free: size - 1 - used, used: used, inproc: size - (size - 1 - used), avai: int(tail - hw),
		empty: used == 0,
	}
}

// levelSizes are the ring sizes of the walk: every power of two from MinSize to MaxSize (-short
// stops at 4096, and at 512 under -race: the walk is linear in the size, the detector slows it
// tenfold).
func levelSizes() []int {
	var sizes []int
	for s := MinSize; s <= MaxSize; s *= 2 {
		if testing.Short() && (s > 4096 || raceEnabled && s > 512) {
			break
		}
		sizes = append(sizes, s)
	}
	return sizes
}

// levelStarts places a ring of size slots so that a walk of a ring's worth of indices from it
// crosses, in its middle, the slot array's end at a generation change, 2^32, and 2^64.
func levelStarts(size int) []uint64 {
	s := uint64(size)
	return []uint64{0, 3*s + s/2, 1<<32 - s/2 - 1, ^uint64(0) - s/2 + 1}
}

// TestRVRingDPDKEveryFillLevel: from empty to full one descriptor at a time, and back one at a
// time, on every ring size (64 to 32768), each walk crossing a generation change, 2^32 or 2^64
// in its middle, every implementation. Each descriptor goes in through the next producer API
// (Enqueue, Reserve+Write+Publish, ReserveWrite+PublishRelease, ReserveIn+Write+PublishRelease,
// EnqueueSP). At every fill level f: FreeCnt is capacity-f, Used f, InProcess f+1, Empty only at
// 0, Tail-HWHead (DPDK's available) what was published and not consumed; bulk is all-or-nothing:
// a reservation of capacity-f+1 is refused with the bare ErrFull and changes nothing (from every
// API), one of capacity-f would fit (checked by the next step when f is capacity-1). On the way
// down each descriptor leaves through Dequeue(1) or the split consumer (SetHWHead, then a
// completion pass a step later: the heads apart, hwHead's release not freeing room), in order,
// with its index's generation.
func TestRVRingDPDKEveryFillLevel(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, size := range levelSizes() {
			for _, start := range levelStarts(size) {
				name := fmt.Sprintf("size=%d/start=%#x", size, start)
				walkFillLevels(t, name, size, start)
			}
		}
	})
}

func walkFillLevels(t *testing.T, name string, size int, start uint64) {
	t.Helper()
	r, err := newAt(size, start)
	if err != nil {
		t.Fatal(err)
	}
	capacity := size - 1
	check := func(when string, want levelState) {
		t.Helper()
		if got := levelOf(r); got != want {
			t.Fatalf("%s: %s: %+v, want %+v", name, when, got, want)
		}
	}
	one := make([]desc.Desc, 1)
	// refuseBulk asks for one more than the room through every API: all refused, bare ErrFull.
	refuseBulk := func(f int) {
		t.Helper()
		n := capacity - f + 1
		if n > capacity {
			return // ErrTooBig, not a fill-level matter (the census has it)
		}
		before := levelOf(r)
		ds := make([]desc.Desc, n)
		for api := range 5 {
			if err := sendVia(r, api, ds); err != ErrFull {
				t.Fatalf("%s: fill %d: bulk of %d via API %d: %v, want the bare ErrFull", name, f, n, api, err)
			}
		}
		if after := levelOf(r); after != before {
			t.Fatalf("%s: fill %d: a refused bulk changed the ring: %+v -> %+v", name, f, before, after)
		}
	}
	mkOne := func(i uint64) []desc.Desc {
		one[0] = desc.Desc{Qw0: i, Qw1: ^i | desc.GenerationSMask}
		return one
	}

	check("new", wantLevel(size, start, start, start))
	// Up: f descriptors in the ring before each step. refuseBulk at every level costs a
	// ring's worth of allocation per level on big rings: do it on the small ones, and near
	// both ends on the rest.
	for f := 0; f < capacity; f++ {
		if size <= 256 || f < 8 || f > capacity-8 {
			refuseBulk(f)
		}
		idx := start + uint64(f)
		if err := sendVia(r, f%5, mkOne(idx)); err != nil {
			t.Fatalf("%s: fill %d: API %d: %v", name, f, f%5, err)
		}
		check(fmt.Sprintf("fill %d", f+1), wantLevel(size, start, start, idx+1))
	}
	refuseBulk(capacity)
	for api := range 5 {
		if err := sendVia(r, api, mkOne(0)); err != ErrFull {
			t.Fatalf("%s: full: one more via API %d: %v, want the bare ErrFull", name, api, err)
		}
	}

	// Down: Dequeue(1), or SetHWHead with the completion pass one step behind.
	end := start + uint64(capacity)
	sw, hw := start, start
	dst := make([]desc.Desc, 1)
	for hw != end {
		var d desc.Desc
		if (hw-start)%3 == 0 && sw == hw {
			if got := r.Dequeue(dst); got != 1 {
				t.Fatalf("%s: Dequeue(1) at %#x: %d", name, hw, got)
			}
			d = dst[0]
			hw++
			sw = hw
		} else {
			d = r.Slot(hw)
			if (hw-start)%2 == 0 {
				r.SetHWHead(hw + 1)
			} else {
				r.StoreHWHead(hw + 1)
			}
			hw++ // consumed, not yet freed: the completion pass comes a step later
		}
		if d.Qw0 != hw-1 || d.Qw1&^desc.GenerationSMask != ^(hw-1)&^desc.GenerationSMask || d.Generation() != r.Generation(hw-1) {
			t.Fatalf("%s: index %#x: %+v", name, hw-1, d)
		}
		check(fmt.Sprintf("drain to %#x (sw %#x)", hw, sw), wantLevel(size, sw, hw, end))
		if sw != hw && (hw-start)%3 == 2 {
			r.BeginWrite()
			r.StoreSwHead(hw)
			r.EndWrite()
			sw = hw
			check(fmt.Sprintf("completed to %#x", hw), wantLevel(size, sw, hw, end))
		}
	}
	if sw != hw {
		r.BeginWrite()
		r.SetSwHead(hw)
		r.EndWrite()
	}
	check("drained", wantLevel(size, end, end, end))
	if got := r.Dequeue(make([]desc.Desc, 4)); got != 0 {
		t.Fatalf("%s: Dequeue of the drained ring: %d", name, got)
	}
	check("empty Dequeue", wantLevel(size, end, end, end))
}

// TestRVRingDPDKResetWithElementsInside is rte_ring_reset on a ring that holds descriptors: at
// fill levels from empty to full, with some consumed and not yet freed (hwHead ahead of swHead),
// Reset to a start near a generation change, 2^32 or 2^64 empties the ring: every count says
// empty, Dequeue and Tail see nothing, no descriptor from before the Reset ever comes out, the
// whole capacity can be enqueued again from the new start (each slot stamped with the new
// index's generation) and comes out in order, every implementation.
func TestRVRingDPDKResetWithElementsInside(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, size := range []int{64, 128, 2048} {
			capacity := size - 1
			for _, start := range levelStarts(size) {
				for _, f := range []int{0, 1, 2, 31, capacity / 2, capacity - 1, capacity} {
					for _, consumed := range []int{0, f / 3, f} {
						name := fmt.Sprintf("size=%d/start=%#x/fill=%d/consumed=%d", size, start, f, consumed)
						resetWithInside(t, name, size, start, f, consumed)
					}
				}
			}
		}
	})
}

func resetWithInside(t *testing.T, name string, size int, start uint64, f, consumed int) {
	t.Helper()
	r, err := newAt(size, start+uint64(size/3))
	if err != nil {
		t.Fatal(err)
	}
	capacity := size - 1
	old := make([]desc.Desc, f)
	for i := range old {
		old[i] = desc.Desc{Qw0: 1<<40 | uint64(i), Qw1: 0xdead0000}
	}
	if f > 0 {
		if _, err := r.Enqueue(old, 0); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Consume part: hwHead past it, swHead half-way.
		h := r.HWHead() + uint64(consumed)
		r.SetHWHead(h)
		r.BeginWrite()
		r.SetSwHead(r.SwHead() + uint64(consumed/2))
		r.EndWrite()
	}
	seq := r.HeadSeq()
	r.Reset(start)
	if !r.HeadRetry(seq) {
		t.Fatalf("%s: a snapshot from before the Reset is not stale", name)
	}
	if got, want := levelOf(r), wantLevel(size, start, start, start); got != want {
		t.Fatalf("%s: after Reset: %+v, want %+v", name, got, want)
	}
	dst := make([]desc.Desc, size+1)
	if got := r.Dequeue(dst); got != 0 {
		t.Fatalf("%s: Dequeue after Reset: %d descriptors (%+v)", name, got, dst[0])
	}
	// The whole capacity again, in bulks of 5 through every API.
	for i, api := 0, 0; i < capacity; api++ {
		n := min(5, capacity-i)
		ds := make([]desc.Desc, n)
		for k := range ds {
			v := start + uint64(i+k)
			ds[k] = desc.Desc{Qw0: v, Qw1: ^v | desc.GenerationSMask}
		}
		if err := sendVia(r, api%5, ds); err != nil {
			t.Fatalf("%s: refill at %d via API %d: %v", name, i, api%5, err)
		}
		i += n
	}
	if err := sendVia(r, 0, dst[:1]); err != ErrFull {
		t.Fatalf("%s: full after Reset and refill: %v", name, err)
	}
	if got := r.Dequeue(dst); got != capacity {
		t.Fatalf("%s: Dequeue after the refill: %d, want %d", name, got, capacity)
	}
	for k, d := range dst[:capacity] {
		i := start + uint64(k)
		if d.Qw0 != i || d.Qw1&^desc.GenerationSMask != ^i&^desc.GenerationSMask || d.Generation() != r.Generation(i) {
			t.Fatalf("%s: index %#x after Reset: %+v", name, i, d)
		}
	}
	if got, want := levelOf(r), wantLevel(size, start+uint64(capacity), start+uint64(capacity), start+uint64(capacity)); got != want {
		t.Fatalf("%s: drained: %+v, want %+v", name, got, want)
	}
}

// TestRVRingDPDKBurstEveryOffset: DPDK's burst dequeue returns as many as are there, up to the
// request, and touches nothing else. On rings of 64 and 128 slots, with the head at every slot
// of the array (the indices from 0, and near 2^64), and numbers of published descriptors from
// none to full (around the assembly's runs of four and the ring's half), Dequeue bursts of 0 to a little past the ring are checked: the count returned is
// min(request, available), each descriptor is its index's, the destination past what was
// returned keeps its sentinel (no stray store by the assembly's four-at-a-time copy or its
// wrap), and an empty result changes no index and no seqcount. Every implementation.
func TestRVRingDPDKBurstEveryOffset(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, size := range []int{64, 128} {
			for _, base := range []uint64{0, ^uint64(0) - uint64(size)/2} {
				burstEveryOffset(t, size, base)
			}
		}
	})
}

var sentinel = desc.Desc{Qw0: 0x5e17_1e15_5e17_1e15, Qw1: 0xfeed_face_feed_face}

func burstEveryOffset(t *testing.T, size int, base uint64) {
	t.Helper()
	capacity := size - 1
	requests := []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, capacity, size, size + 3}
	dst := make([]desc.Desc, size+8)
	src := make([]desc.Desc, capacity)
	avails := []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, size/2 - 1, size / 2, capacity - 4, capacity - 1, capacity}
	step := 1
	if raceEnabled && testing.Short() {
		step = 7 // every offset mod 4 still, and each run's end, at a seventh of the cost
	}
	for off := 0; off < size; off += step {
		r, err := newAt(size, base+uint64(off))
		if err != nil {
			t.Fatal(err)
		}
		for _, avail := range avails {
			for _, k := range requests {
				// Publish avail descriptors at the head (the ring is empty here).
				h := r.HWHead()
				if avail > 0 {
					for i := range src[:avail] {
						v := h + uint64(i)
						src[i] = desc.Desc{Qw0: v, Qw1: ^v | desc.GenerationSMask}
					}
					if _, err := r.EnqueueSP(src[:avail], 0); err != nil {
						t.Fatalf("size %d off %d avail %d: %v", size, off, avail, err)
					}
				}
				for i := range dst {
					dst[i] = sentinel
				}
				seq := r.Seq().Count()
				got := r.Dequeue(dst[:k])
				if want := min(k, avail); got != want {
					t.Fatalf("size %d head %#x: Dequeue(%d) with %d published = %d, want %d", size, h, k, avail, got, want)
				}
				for i, d := range dst[:got] {
					v := h + uint64(i)
					if d.Qw0 != v || d.Generation() != r.Generation(v) {
						t.Fatalf("size %d head %#x: Dequeue(%d): dst[%d] = %+v, want index %#x's", size, h, k, i, d, v)
					}
				}
				for i, d := range dst[got:] {
					if d != sentinel {
						t.Fatalf("size %d head %#x: Dequeue(%d) of %d: dst[%d] written past the result: %+v", size, h, k, avail, got+i, d)
					}
				}
				wantSeq := seq
				if got > 0 {
					wantSeq += 2
				}
				if r.Seq().Count() != wantSeq || r.HWHead() != h+uint64(got) || r.SwHead() != h+uint64(got) {
					t.Fatalf("size %d head %#x: Dequeue(%d) of %d: hw %#x sw %#x seq %d, want %#x, %d", size, h, k, avail, r.HWHead(), r.SwHead(), r.Seq().Count(), h+uint64(got), wantSeq)
				}
				// Drain the rest and put the head back at its offset: Reset needs no
				// reservation pending, which holds.
				for r.Dequeue(dst) > 0 {
				}
				r.Reset(h)
			}
		}
	}
}

// TestRVRingDPDKNewEverySize: rte_ring_create's size check over every size from -1 to past
// MaxSize: exactly the powers of two in [MinSize, MaxSize] make a ring, of that size, capacity
// size-1; every other size is refused with an *Error matching ErrSize that names it.
func TestRVRingDPDKNewEverySize(t *testing.T) {
	for size := -1; size <= 2*MaxSize+1; size++ {
		r, err := New(size)
		pow := size > 0 && size&(size-1) == 0
		want := size == 0 || pow && size >= MinSize && size <= MaxSize
		if want != (err == nil) {
			t.Fatalf("New(%d): %v", size, err)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrSize) || r != nil {
				t.Fatalf("New(%d): %v (ring %v)", size, err, r != nil)
			}
			continue
		}
		if size != 0 && (r.Size() != size || r.FreeCnt() != size-1 || int(r.Mask()) != size-1 || 1<<r.Shift() != size) {
			t.Fatalf("New(%d): size %d free %d mask %#x shift %d", size, r.Size(), r.FreeCnt(), r.Mask(), r.Shift())
		}
	}
}
