package alloc_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/stretchr/testify/require"
)

// TestListCloseModel: workers Get, GetCtx (some with a context another goroutine cancels) and
// Put on a List of few objects (so that GetCtx waits), in plain mode re-earned after every second
// CAS (where it is built in), while GOMAXPROCS moves and the List is closed halfway. Every object
// is held by one worker at a time (its owner word, set by a CAS); a Get or GetCtx that starts
// after Close returned gets ErrClosed; a GetCtx either gets an object, ErrClosed or its context's
// error; every Put succeeds, also after Close; and at the end Stats says no object is in use: no
// object was lost to a waiter that gave up, to a magazine or to Close.
func TestListCloseModel(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	for round := range rounds {
		t.Run(fmt.Sprintf("round=%d", round), func(t *testing.T) {
			const n, workers = 5, 6
			l, err := alloc.NewList(n, resetObj)
			require.NoError(t, err)
			if round%2 == 1 {
				alloc.SetPlainAfter[obj](l, 2)
			}
			var closedAt atomic.Bool // set once Close returned
			var gets, puts atomic.Int64
			stop := alloc.Churn(func(k int) {
				runtime.GOMAXPROCS(1 + (k*7+round)%5)
				runtime.Gosched()
			})
			cancels := make(chan context.CancelFunc, 64)
			stopCancel := alloc.Churn(func(int) {
				select {
				case c := <-cancels:
					runtime.Gosched()
					c()
				default:
					runtime.Gosched()
				}
			})
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
					var held []*obj
					put := func(o *obj) {
						if !o.owner.CompareAndSwap(int64(w+1), 0) {
							t.Errorf("worker %d: object owned by %d at its Put", w, o.owner.Load()-1)
						}
						if err := l.Put(o); err != nil {
							t.Errorf("worker %d: Put: %v", w, err)
						}
						puts.Add(1)
					}
					for i := range 400 {
						if w == 0 && i == 200 {
							require.NoError(t, l.Close())
							closedAt.Store(true)
						}
						if len(held) > 0 && (len(held) >= 2 || r.IntN(2) == 0) {
							k := r.IntN(len(held))
							put(held[k])
							held = append(held[:k], held[k+1:]...)
							continue
						}
						after := closedAt.Load()
						var o *obj
						var err error
						op := r.IntN(3)
						if len(held) > 0 {
							op = 0 // only a worker holding nothing waits: the holders go on and Put
						}
						switch op {
						case 0:
							o, err = l.Get()
							if err != nil && !errors.Is(err, alloc.ErrEmpty) && !errors.Is(err, alloc.ErrClosed) {
								t.Errorf("worker %d: Get: %v", w, err)
							}
						case 1:
							o, err = l.GetCtx(context.Background())
							if err != nil && !errors.Is(err, alloc.ErrClosed) {
								t.Errorf("worker %d: GetCtx: %v", w, err)
							}
						case 2:
							ctx, cancel := context.WithCancel(context.Background())
							cancels <- cancel
							o, err = l.GetCtx(ctx)
							cancel()
							if err != nil && !errors.Is(err, alloc.ErrClosed) && !errors.Is(err, context.Canceled) {
								t.Errorf("worker %d: GetCtx: %v", w, err)
							}
						}
						if after && err == nil {
							t.Errorf("worker %d: an object after Close returned", w)
						}
						if after && o == nil && !errors.Is(err, alloc.ErrClosed) {
							t.Errorf("worker %d: after Close: %v, want ErrClosed", w, err)
						}
						if o == nil {
							if closedAt.Load() {
								break
							}
							continue
						}
						gets.Add(1)
						if !o.owner.CompareAndSwap(0, int64(w+1)) {
							t.Errorf("worker %d: object handed out while worker %d holds it", w, o.owner.Load()-1)
							continue
						}
						held = append(held, o)
					}
					for _, o := range held {
						put(o)
					}
				})
			}
			wg.Wait()
			stopCancel()
			stop()
			for len(cancels) > 0 {
				(<-cancels)()
			}
			require.Equal(t, gets.Load(), puts.Load())
			s := l.Stats()
			require.Zero(t, s.InUse, "objects in use after every Put: %+v", s)
			require.EqualValues(t, n, s.Objects)
			_, err = l.Get()
			require.ErrorIs(t, err, alloc.ErrClosed)
		})
	}
}
