package ring

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// TestStressRVRingClosePromise checks Close's promise directly: once Close has returned, no
// reservation succeeds until Open, so Reserved() read after Close bounds every reservation made
// before Open. Producers of every multi-producer API (Reserve, ReserveWrite on its inline path and
// past it, ReserveIn, Enqueue) hammer a ring while the main goroutine closes it, reads R =
// Reserved(), marks the phase closed, consumes until the tail reaches R, then marks it open and
// reopens. A producer whose call succeeded and that still sees the closed phase afterwards made
// its reservation before Open: it must end at or below R. Run under -race and at -cpu 1,2,4.
func TestStressRVRingClosePromise(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	r, err := newAt(64, ^uint64(0)-500)
	if err != nil {
		t.Fatal(err)
	}
	var (
		phase  atomic.Int32  // 1 while closed (set after R is stored)
		bound  atomic.Uint64 // R: Reserved() read after Close returned
		stop   atomic.Bool
		wg     sync.WaitGroup
		errs   = make(chan string, 8)
		report = func(s string) {
			select {
			case errs <- s:
			default:
			}
		}
	)
	for pid := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds := make([]desc.Desc, 8)
			for i := 0; !stop.Load(); i++ {
				n := 1 + i%7
				if pid == 1 {
					n = 1 + i%3 // ReserveWrite's inline path
				}
				var (
					start uint64
					err   error
					v     Reservation
				)
				switch pid {
				case 0:
					v, err = r.Reserve(n)
				case 1, 2:
					v, err = r.ReserveWrite(ds[:n], 0)
				case 3:
					v, err = r.ReserveIn(n, r.Epoch())
				case 4:
					start, err = r.Enqueue(ds[:n], 0)
				}
				if err != nil {
					if err != ErrFull && err != ErrClosed {
						report(err.Error())
						return
					}
					runtime.Gosched()
					continue
				}
				if pid != 4 {
					start = v.Start()
				}
				if phase.Load() == 1 {
					if b := bound.Load(); start+uint64(n)-b-1 < 1<<62 { // start+n > b, modular
						report("a reservation made after Close returned: ends past Reserved() read then")
					}
				}
				if pid != 4 {
					if pid == 0 || pid == 3 {
						v.Write(0, ds[:n], 0)
					}
					v.Publish()
				}
			}
		}()
	}
	dst := make([]desc.Desc, 64)
	for round := 0; round < rounds; round++ {
		for range 20 {
			r.Dequeue(dst)
			runtime.Gosched()
		}
		r.Close()
		bound.Store(r.Reserved())
		phase.Store(1)
		for r.Tail() != bound.Load() {
			r.Dequeue(dst)
			runtime.Gosched()
		}
		for range 5 { // let producers try, and be refused, while closed
			r.Dequeue(dst)
			runtime.Gosched()
		}
		if r.Reserved() != bound.Load() {
			t.Fatalf("round %d: Reserved moved from %#x to %#x while closed", round, bound.Load(), r.Reserved())
		}
		phase.Store(0)
		r.Open()
		select {
		case e := <-errs:
			t.Fatal(e)
		default:
		}
	}
	stop.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			select {
			case e := <-errs:
				t.Fatal(e)
			default:
			}
			return
		default:
			r.Dequeue(dst) // a producer's Publish may wait for room freed by nobody else
			runtime.Gosched()
		}
	}
}
