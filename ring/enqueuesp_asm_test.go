//go:build amd64 && gc && !purego && !race

package ring

import (
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// enqueueSPAsm calls EnqueueSP with the closed flag set and the reservation word unmarked, a
// state no API call makes: the single-call assembly reads only the word (a closed ring's carries
// closedMark) and so enqueues, while the Go path it falls back to reads the flag and refuses with
// ErrClosed. It reports whether the batch took the assembly path. The flag is cleared again.
func enqueueSPAsm(t *testing.T, r *Ring, n int) bool {
	t.Helper()
	r.closed.Store(true)
	defer r.closed.Store(false)
	tail := r.Tail()
	got, err := r.EnqueueSP(make([]desc.Desc, n), 0)
	switch {
	case err == ErrClosed && r.Tail() == tail:
		return false
	case err != nil || got != tail || r.Tail() != tail+uint64(n):
		t.Fatalf("EnqueueSP(%d) at %d: start %d, %v, tail %d", n, tail, got, err, r.Tail())
	}
	return true
}

// TestEnqueueSPAsmPathAfterReset: EnqueueSP takes its single-call assembly on a ring that a Reset
// moved (base != 0), as sdma's ring after every halt's sw clean, in its three shapes (one
// descriptor with AVX, a batch, a batch that refreshes the cached head), with both assembly
// writers. It fell back to the Go path whenever base was not 0, so after an engine's first halt
// every Send took the slow path.
func TestEnqueueSPAsmPathAfterReset(t *testing.T) {
	for _, impl := range []string{"asm", "asm-movq"} {
		restore, err := setImplementation(impl)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := New(64)
		if err != nil {
			t.Fatal(err)
		}
		if !enqueueSPAsm(t, fresh, 1) {
			t.Fatalf("%s: a fresh ring's EnqueueSP did not take the assembly: the probe does not work", impl)
		}
		for _, start := range resetStarts {
			r := resetRing(t, start)
			for _, n := range []int{1, 5, 34} {
				if !enqueueSPAsm(t, r, n) {
					t.Errorf("%s, Reset(%d) (base %#x): EnqueueSP of %d took the Go path", impl, start, r.base.Load(), n)
				}
			}
			r.SetHWHead(r.Tail())
			r.SetSwHead(r.Tail())
			// The cached head is Reset's start, 40 behind swHead: 30 more need the refresh.
			if !enqueueSPAsm(t, r, 30) {
				t.Errorf("%s, Reset(%d): EnqueueSP refreshing the cached head took the Go path", impl, start)
			}
			if r.headCache.Load() != r.SwHead() {
				t.Errorf("%s, Reset(%d): cached head %d after the refresh, swHead %d", impl, start, r.headCache.Load(), r.SwHead())
			}
		}
		restore()
	}
}
