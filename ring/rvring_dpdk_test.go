package ring

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// TestRVRingDPDKCensus: rte_ring's test_ring.c scenarios, every producer API (MP: Reserve+Write+
// Publish, ReserveWrite+PublishRelease, Enqueue; SP: EnqueueSP), every implementation, at the
// smallest and largest sizes, with indices starting just below a generation change, 2^32 and
// 2^64: a bulk of 0 and of capacity+1 refused (ErrSize, ErrTooBig), the ring filled to exactly
// full in odd bulks (FreeCnt after each, then a bulk of 1 refused with the bare ErrFull and
// nothing changed), emptied in bursts that ask for more than is there (each burst returns what
// is available; a burst at empty returns 0 and changes nothing), and a bulk of the whole capacity
// into the empty ring. Every descriptor comes out once, in order, stamped with its index's
// generation, and the implementations leave identical slot arrays.
func TestRVRingDPDKCensus(t *testing.T) {
	type key struct {
		api   string
		size  int
		start uint64
	}
	arrays := map[key][]desc.Desc{}
	apis := []string{"Reserve", "ReserveWrite", "Enqueue", "EnqueueSP"}
	for _, impl := range Implementations() {
		restore, err := setImplementation(impl)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{MinSize, MaxSize} {
			if raceEnabled && testing.Short() && size == MaxSize {
				continue
			}
			for _, start := range []uint64{0, uint64(size)*4 - 5, 1<<32 - uint64(size) - 3, ^uint64(0) - uint64(size) - 7, ^uint64(0) - 2} {
				for _, api := range apis {
					name := fmt.Sprintf("%s/size=%d/start=%#x/%s", impl, size, start, api)
					s := runDPDKCensus(t, name, api, size, start)
					k := key{api, size, start}
					if prev, ok := arrays[k]; ok && !slices.Equal(prev, s) {
						t.Errorf("%s: the slot array differs from another implementation's", name)
					}
					arrays[k] = s
				}
			}
		}
		restore()
	}
}

// runDPDKCensus runs the census on one ring and returns its slot array.
func runDPDKCensus(t *testing.T, name, api string, size int, start uint64) []desc.Desc {
	t.Helper()
	r, err := newAt(size, start)
	if err != nil {
		t.Fatal(err)
	}
	capacity := size - 1
	val := uint64(0)
	mkBatch := func(n int) []desc.Desc {
		ds := make([]desc.Desc, n)
		for k := range ds {
			val++
			ds[k] = desc.Desc{Qw0: val, Qw1: val<<32 | desc.GenerationSMask}
		}
		return ds
	}
	enq := func(ds []desc.Desc) (uint64, error) {
		switch api {
		case "Reserve":
			v, err := r.Reserve(len(ds))
			if err != nil {
				return 0, err
			}
			v.Write(0, ds, 0)
			v.Publish()
			return v.Start(), nil
		case "ReserveWrite":
			v, err := r.ReserveWrite(ds, 0)
			if err != nil {
				return 0, err
			}
			v.PublishRelease()
			return v.Start(), nil
		case "Enqueue":
			return r.Enqueue(ds, 0)
		}
		return r.EnqueueSP(ds, 0)
	}
	state := func() [5]uint64 {
		return [5]uint64{r.Reserved(), r.Tail(), r.HWHead(), r.SwHead(), uint64(r.FreeCnt())}
	}
	expect := uint64(1) // the next value a burst must return
	next := start       // the next index a burst must return
	deq := func(k, want int) {
		t.Helper()
		dst := make([]desc.Desc, k)
		before := state()
		got := r.Dequeue(dst)
		if got != want {
			t.Fatalf("%s: Dequeue(%d) = %d, want %d", name, k, got, want)
		}
		if got == 0 && state() != before {
			t.Fatalf("%s: an empty Dequeue changed the ring: %v -> %v", name, before, state())
		}
		for i, d := range dst[:got] {
			idx := next + uint64(i)
			if d.Qw0 != expect || d.Qw1&^desc.GenerationSMask != expect<<32 || d.Generation() != desc.Generation(idx/uint64(size)%4) {
				t.Fatalf("%s: index %#x: %+v, want value %d generation %d", name, idx, d, expect, idx/uint64(size)%4)
			}
			expect++
		}
		next += uint64(got)
	}
	refuse := func(n int, want error) {
		t.Helper()
		before := state()
		_, err := enq(mkBatch(n))
		if want == ErrFull && err != ErrFull {
			t.Fatalf("%s: bulk of %d: %v, want the bare ErrFull", name, n, err)
		}
		if !isErrTarget(err, want) {
			t.Fatalf("%s: bulk of %d: %v, want %v", name, n, err, want)
		}
		if state() != before {
			t.Fatalf("%s: a refused bulk of %d changed the ring: %v -> %v", name, n, before, state())
		}
		val -= uint64(max(n, 0))
	}

	for round := 0; round < 3; round++ {
		refuse(0, ErrSize)
		refuse(capacity+1, ErrTooBig)
		deq(0, 0)
		deq(5, 0) // a burst at empty

		// Fill to exactly full in odd bulks, checking the free count after each.
		free := capacity
		for b := 0; free > 0; b++ {
			n := min([]int{1, 3, 7, 2, 13, 64}[b%6], free)
			s, err := enq(mkBatch(n))
			if err != nil {
				t.Fatalf("%s: bulk of %d with %d free: %v", name, n, free, err)
			}
			if want := r.Tail() - uint64(n); s != want {
				t.Fatalf("%s: bulk of %d at %#x, want %#x", name, n, s, want)
			}
			free -= n
			if r.FreeCnt() != free || r.Used() != capacity-free || r.InProcess() != size-free {
				t.Fatalf("%s: FreeCnt %d Used %d InProcess %d, want %d %d %d", name, r.FreeCnt(), r.Used(), r.InProcess(), free, capacity-free, size-free)
			}
		}
		refuse(1, ErrFull)
		refuse(capacity, ErrFull)

		// Empty in bursts that ask for more than is there at the end.
		left := capacity
		for b := 0; left > 0; b++ {
			k := []int{1, 4, 5, 17, 3, 100}[b%6]
			deq(k, min(k, left))
			left -= min(k, left)
			if r.FreeCnt() != capacity-left {
				t.Fatalf("%s: FreeCnt %d after a burst, want %d", name, r.FreeCnt(), capacity-left)
			}
		}
		deq(capacity+5, 0)
		if !r.Empty() {
			t.Fatalf("%s: drained, not Empty", name)
		}

		// The whole capacity in one bulk, and out in one burst larger than the ring.
		if _, err := enq(mkBatch(capacity)); err != nil {
			t.Fatalf("%s: bulk of the capacity into the empty ring: %v", name, err)
		}
		refuse(1, ErrFull)
		deq(size+1, capacity)
	}
	return slices.Clone(r.slots)
}

func isErrTarget(err, target error) bool {
	if target == nil {
		return err == nil
	}
	return err != nil && (err == target || isErr(any(err), target))
}
