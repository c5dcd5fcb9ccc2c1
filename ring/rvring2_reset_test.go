package ring

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// TestStressResetFarStartRefusesProducers: producers of the multi-producer APIs (Reserve,
// ReserveWrite on its inline path, ReserveIn; Enqueue reserves as Reserve does, and one that
// succeeded here would never return from its Publish) call a ring that stays closed for the whole
// test, while the closer Resets it again and again to a start half the index space (2^63, plus a
// few) past the previous one. Reset stores the reservation word's base, the word and the cached
// head one after the other; a producer that loads the word from one side of a store and base or
// the cached head from the other computes its room from indices of two epochs, and when the start
// lies 2^63 past the old cached head that room is not the closed mark's 2^63 but a ring's worth:
// its CAS succeeded on the closed ring, at an index of neither epoch (its Publish then waits for
// a tail that never comes, and its Write lands in the new epoch's slots). Every call must be
// refused with ErrClosed (ReserveIn: or ErrReset). Bounded by the number of Resets; the Write
// implementation plays no part. Run under -race and at -cpu 1,2,4.
func TestStressResetFarStartRefusesProducers(t *testing.T) {
	resets := 1000000
	if testing.Short() {
		resets = 200000
	}
	if raceEnabled {
		resets /= 8 // the detector slows each Reset; the producers race it all the same
	}
	r, err := New(64)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, 3)
	for pid := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds := make([]desc.Desc, 3)
			for i := 0; !stop.Load(); i++ {
				n := 1 + i%3
				var v Reservation
				var err error
				switch pid {
				case 0:
					v, err = r.Reserve(n)
				case 1:
					v, err = r.ReserveWrite(ds[:n], 0)
				case 2:
					v, err = r.ReserveIn(n, r.Epoch())
				}
				if err == nil || (err != ErrClosed && (pid != 2 || err != ErrReset)) {
					errs <- fmt.Sprintf("producer %d, call %d on the closed ring: start %#x, err %v", pid, i, v.Start(), err)
					stop.Store(true)
					return
				}
			}
		}()
	}
	start := uint64(0)
	i := 0
	for ; i < resets && !stop.Load(); i++ {
		start += 1<<63 + 1 + uint64(i%62) // 2^63 past the cached head, within a ring's worth
		if e := panicOf(func() { r.Reset(start) }); e != nil {
			t.Errorf("Reset %d: %v", i, e) // a reservation made on the closed ring, unpublished
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("after %d Resets: %s", i, e)
	}
}
