package membarrier

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/internal/relaxed"
)

// TestAvailableStable: the probe answers the same every time, and Barrier returns when it is
// available.
func TestAvailableStable(t *testing.T) {
	a := Available()
	for range 3 {
		if Available() != a {
			t.Fatal("Available changed its answer")
		}
	}
	if a {
		Barrier()
	} else if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" && !raceEnabled && !purego {
		t.Log("membarrier private expedited unavailable on this kernel: pairs keep their fences")
	}
}

// TestDekkerPair runs the asymmetric pair many times: a frequent side that stores x and loads y
// with no fence, a rare side that stores y with an atomic add, calls Barrier and loads x. Never
// may both loads miss the other side's store (with plain store/load on both sides they can on
// amd64: that is the reordering the barrier is for).
func TestDekkerPair(t *testing.T) {
	if !Available() {
		t.Skip("no process-wide barrier here")
	}
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	var x atomic.Uint32 // the frequent side's store: a plain MOV (relaxed.StoreRelease32)
	var y atomic.Int32  // the rare side's store: a locked add
	for r := range rounds {
		var seenX uint32
		var seenY int32
		x.Store(0)
		y.Store(0)
		var wg sync.WaitGroup
		var start atomic.Bool
		wg.Add(2)
		go func() { // frequent side: store, then load, no fence
			defer wg.Done()
			for !start.Load() {
			}
			relaxed.StoreRelease32(&x, 1)
			seenY = y.Load()
		}()
		go func() { // rare side
			defer wg.Done()
			for !start.Load() {
			}
			y.Add(1)
			Barrier()
			seenX = x.Load()
		}()
		start.Store(true)
		wg.Wait()
		if seenY == 0 && seenX == 0 {
			t.Fatalf("round %d: both sides missed the other's store", r)
		}
	}
}
