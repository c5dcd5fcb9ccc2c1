package pcpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestPinIsExclusive: while pinned, no other goroutine runs on the same P, so per-P slots
// written without atomics never see two writers at once. Each goroutine marks its P's slot busy
// (a CAS that must succeed), does plain work, and clears it.
func TestPinIsExclusive(t *testing.T) {
	if !Enabled {
		t.Skip("purego: Pin does not pin")
	}
	n := Max()
	busy := make([]atomic.Int32, n)
	counts := make([]int64, n) // plain: written only by the pinned owner of the slot
	var wg sync.WaitGroup
	var bad atomic.Int64
	const workers, rounds = 8, 20000
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				id := Pin()
				if id < 0 || id >= n {
					Unpin()
					bad.Add(1)
					continue
				}
				if !busy[id].CompareAndSwap(0, 1) {
					bad.Add(1)
				}
				counts[id]++
				busy[id].Store(0)
				Unpin()
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()
	if b := bad.Load(); b != 0 {
		t.Fatalf("%d pins saw another goroutine on their P or an index outside [0,%d)", b, n)
	}
	var sum int64
	for _, c := range counts {
		sum += c
	}
	if sum != workers*rounds {
		t.Fatalf("per-P counts sum to %d, want %d", sum, workers*rounds)
	}
}

// TestHintInRange: Hint returns a P index in [0, Max()).
func TestHintInRange(t *testing.T) {
	for range 1000 {
		if h := Hint(); h < 0 || (Enabled && h >= Max()) {
			t.Fatalf("Hint() = %d, Max() = %d", h, Max())
		}
	}
}

func BenchmarkPinUnpin(b *testing.B) {
	for b.Loop() {
		Pin()
		Unpin()
	}
}

// TestMaxFollowsGOMAXPROCS: Max is GOMAXPROCS at each call, not the value of the first call, so
// a cache made after GOMAXPROCS changed sizes its slots for the new count.
func TestMaxFollowsGOMAXPROCS(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(old)
	for _, n := range []int{1, old + 3, 2} {
		runtime.GOMAXPROCS(n)
		if got := Max(); got != n {
			t.Fatalf("GOMAXPROCS %d: Max() = %d", n, got)
		}
	}
}
