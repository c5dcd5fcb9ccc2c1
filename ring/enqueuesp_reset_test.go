package ring

import (
	"errors"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// resetStarts are the indices TestEnqueueSPAfterReset restarts a ring at: 0 (the sw clean's),
// others that leave base != 0 and start mid-ring, just before a wrap, far up the index space,
// around 2^63 (the closed mark's distance) and where the indices wrap past 2^64 within the run.
var resetStarts = []uint64{0, 7, 60, 1<<40 + 61, 1<<62 + 30, 1<<63 - 70, 1<<63 - 3, 1<<63 + 3, ^uint64(0) - 40, ^uint64(0) - 2, ^uint64(0)}

// resetRing returns a ring of 64 slots that ran a few batches and was then closed, Reset to
// start and opened again, as sdma's sw clean leaves its ring after a halt: base is no longer 0
// (the word of the new epoch lies past every word handed out before).
func resetRing(t *testing.T, start uint64) *Ring {
	t.Helper()
	r, err := New(64)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.EnqueueSP(make([]desc.Desc, 5), 0); err != nil {
			t.Fatal(err)
		}
		r.SetHWHead(r.Tail())
		r.SetSwHead(r.Tail())
	}
	r.Close()
	r.Reset(start)
	r.Open()
	if r.base.Load() == 0 {
		t.Fatalf("Reset(%d): base still 0", start)
	}
	return r
}

// TestEnqueueSPAfterReset: after a Reset (base moved), EnqueueSP hands out the indices from
// Reset's start, writes each batch's slots as Write does (generation from the index, AHG edit
// descriptors raw), publishes them, keeps the reservation word at the index plus base, refuses a
// full ring with ErrFull, a pending reservation with ErrOrder and a closed ring with ErrClosed,
// with every implementation (the assembly, the 8-byte-store assembly, the Go path; under purego
// and -race the Go path only).
func TestEnqueueSPAfterReset(t *testing.T) {
	for _, impl := range Implementations() {
		restore, err := setImplementation(impl)
		if err != nil {
			t.Fatal(err)
		}
		for _, start := range resetStarts {
			enqueueSPAfterReset(t, impl, start)
		}
		restore()
	}
}

func enqueueSPAfterReset(t *testing.T, impl string, start uint64) {
	t.Helper()
	r := resetRing(t, start)
	want := make([]desc.Desc, r.Size()) // the slots as the Go writer would leave them
	copy(want, r.slots)
	next, seq := start, uint64(1)
	for i, n := range []int{1, 3, 1, 7, 2, 1, 16, 1, 5, 9, 1, 30} {
		ds := make([]desc.Desc, n)
		for k := range ds {
			ds[k] = desc.Desc{Qw0: seq, Qw1: seq<<4 | 0xF} // generation bits set: the writer replaces them
			seq++
		}
		skip := i % 3 // 0, 1, 2: edit descriptors after the first, copied raw
		if skip > n-1 {
			skip = n - 1
		}
		got, err := r.EnqueueSP(ds, skip)
		if err != nil || got != next {
			t.Fatalf("%s, Reset(%d), batch %d of %d: start %d, %v; want %d, nil", impl, start, i, n, got, err, next)
		}
		writeGo(want, r.mask, r.shift, next, ds, skip)
		next += uint64(n)
		if r.Tail() != next || r.Reserved() != next || r.reserved.Load() != next+r.base.Load() {
			t.Fatalf("%s, Reset(%d), batch %d: tail %d reserved %d word %#x, want %d and the word %#x",
				impl, start, i, r.Tail(), r.Reserved(), r.reserved.Load(), next, next+r.base.Load())
		}
		for s := range want {
			if r.slots[s] != want[s] {
				t.Fatalf("%s, Reset(%d), batch %d: slot %d is %+v, want %+v", impl, start, i, s, r.slots[s], want[s])
			}
		}
		if i%4 == 3 { // complete what was published: the producer wraps and refreshes its cached head
			r.SetHWHead(r.Tail())
			r.SetSwHead(r.Tail())
		}
		if fc := r.FreeCnt(); fc != r.Size()-1-int(next-r.SwHead()) {
			t.Fatalf("%s, Reset(%d), batch %d: FreeCnt %d with [%d, %d) in use", impl, start, i, fc, r.SwHead(), next)
		}
	}
	// Fill the ring: the next descriptor does not fit.
	if fc := r.FreeCnt(); fc > 0 {
		if _, err := r.EnqueueSP(make([]desc.Desc, fc), 0); err != nil {
			t.Fatalf("%s, Reset(%d): filling %d free slots: %v", impl, start, fc, err)
		}
	}
	tail := r.Tail()
	if _, err := r.EnqueueSP(make([]desc.Desc, 1), 0); err != ErrFull || r.Tail() != tail {
		t.Fatalf("%s, Reset(%d): EnqueueSP on a full ring: %v, tail %d -> %d; want ErrFull, unchanged", impl, start, err, tail, r.Tail())
	}
	r.SetHWHead(tail)
	r.SetSwHead(tail)
	v, err := r.Reserve(2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.EnqueueSP(make([]desc.Desc, 1), 0); !errors.Is(err, ErrOrder) {
		t.Fatalf("%s, Reset(%d): EnqueueSP over an unpublished reservation: %v, want ErrOrder", impl, start, err)
	}
	v.Write(0, make([]desc.Desc, 2), 0)
	v.Publish()
	r.Close()
	if _, err := r.EnqueueSP(make([]desc.Desc, 1), 0); err != ErrClosed || r.Tail() != tail+2 {
		t.Fatalf("%s, Reset(%d): EnqueueSP on a closed ring: %v, tail %d; want ErrClosed, %d", impl, start, err, r.Tail(), tail+2)
	}
}
