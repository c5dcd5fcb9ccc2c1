package ring

import (
	"errors"
	"sync"
	"testing"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/internal/census"
)

// TestConcurrentClosesMarkOnce: Closes racing each other mark the reservation word once, and each
// returns only once the ring refuses reservations; the Open after them reopens a ring that works.
// Close loaded the flag, then stored it, then added closedMark: two Closes that both loaded it
// clear added the mark twice, 2^64, that is nothing, so the closed ring took reservations, and the
// Open after them subtracted the mark from the open word: its producers, which saw the flag
// clear and no room, looked again for ever (a hang under census.Timeout here).
func TestConcurrentClosesMarkOnce(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 500
	}
	forEachImpl(t, func(t *testing.T) {
		const closers = 8
		for round := range rounds {
			r, err := newAt(64, ^uint64(0)-uint64(round%80)) // now and then across the uint64 wrap
			if err != nil {
				t.Fatal(err)
			}
			start := r.Reserved()
			var ready, wg sync.WaitGroup
			ready.Add(closers)
			gate := make(chan struct{})
			var leaked sync.Map // reservations made after a Close returned
			for i := range closers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ready.Done()
					<-gate
					r.Close()
					if res, err := r.Reserve(1); !errors.Is(err, ErrClosed) {
						leaked.Store(i, res.Start())
					}
				}()
			}
			ready.Wait()
			close(gate)
			wg.Wait()
			leaked.Range(func(k, v any) bool {
				t.Errorf("round %d: closer %d reserved at %#x after its Close returned", round, k, v)
				return true
			})
			if t.Failed() {
				return
			}
			if !r.Closed() || r.Reserved() != start {
				t.Fatalf("round %d: after the Closes Closed %v, Reserved %#x, want true, %#x", round, r.Closed(), r.Reserved(), start)
			}
			if _, err := r.Reserve(1); !errors.Is(err, ErrClosed) {
				t.Fatalf("round %d: Reserve of the closed ring: %v, want ErrClosed", round, err)
			}
			r.Open()
			res := census.Call(func() error {
				for i := range 3 {
					if _, err := r.Enqueue([]desc.Desc{mk(uint64(i))}, 0); err != nil {
						return err
					}
				}
				return nil
			})
			if res.Hung || res.Panicked || res.Err != nil {
				t.Fatalf("round %d: Enqueue after the Open: %v", round, res)
			}
			if r.Closed() || r.Reserved() != start+3 || r.Tail() != start+3 || r.FreeCnt() != 64-1-3 {
				t.Fatalf("round %d: after the Open and 3 Enqueues: Closed %v, Reserved %#x, Tail %#x, FreeCnt %d; want false, %#x, %#x, %d",
					round, r.Closed(), r.Reserved(), r.Tail(), r.FreeCnt(), start+3, start+3, 64-1-3)
			}
		}
	})
}
