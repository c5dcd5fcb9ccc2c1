package alloc_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gosdma/gosdma/alloc"
	"github.com/stretchr/testify/require"
)

// opWorkers runs each op it is sent on one of several goroutines, one op at a time (the caller
// waits for each): so the ops are sequential, but run on goroutines spread over the Ps, some
// locked to their threads, and the allocator sees a lone user that moves between Ps.
type opWorkers struct {
	ch   []chan func()
	done chan struct{}
	wg   sync.WaitGroup
}

func newOpWorkers(n int) *opWorkers {
	w := &opWorkers{done: make(chan struct{})}
	for k := range n {
		c := make(chan func())
		w.ch = append(w.ch, c)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			if k%2 == 1 {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			for f := range c {
				f()
				w.done <- struct{}{}
			}
		}()
	}
	return w
}

func (w *opWorkers) run(k int, f func()) {
	w.ch[k%len(w.ch)] <- f
	<-w.done
}

func (w *opWorkers) stop() {
	for _, c := range w.ch {
		close(c)
	}
	w.wg.Wait()
}

// TestRev4SequentialAcrossPsExact: a lone user whose Gets and Puts run one at a time on
// goroutines spread over the Ps (and GOMAXPROCS changing between them) sees the counts and
// errors of one shared free list: a List reports ErrEmpty exactly when all n are in use, a Slab
// grows exactly when all its objects are in use, and Stats is exact after every op (InUse the
// objects held, HighWater the most held at once).
func TestRev4SequentialAcrossPsExact(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	ops := 6000
	if testing.Short() {
		ops = 2000
	}
	for _, made := range []int{1, 2, 4} {
		runtime.GOMAXPROCS(made)
		impls := countedImpls(t, 50)
		for name, a := range impls {
			t.Run(fmt.Sprintf("made=%d/%s", made, name), func(t *testing.T) {
				isList := name[:4] == "list"
				w := newOpWorkers(6)
				defer w.stop()
				rng := rand.New(rand.NewPCG(uint64(made), 7))
				var held []*obj
				high := int64(0)
				for op := range ops {
					if op%500 == 250 {
						runtime.GOMAXPROCS(1 + rng.IntN(6))
					}
					get := rng.IntN(100) < 55 || len(held) == 0
					if op%700 > 600 { // long runs of Gets and of Puts: past the magazines
						get = true
					} else if op%700 > 500 {
						get = len(held) == 0
					}
					k := rng.IntN(6)
					if get {
						before := a.Stats()
						var o *obj
						var err error
						w.run(k, func() { o, err = a.Get() })
						if isList && int64(len(held)) == before.Objects {
							require.ErrorIs(t, err, alloc.ErrEmpty, "op %d", op)
							continue
						}
						require.NoError(t, err, "op %d: %d of %d held", op, len(held), before.Objects)
						require.True(t, o.owner.CompareAndSwap(0, 1), "op %d: handed out twice", op)
						held = append(held, o)
						if after := a.Stats(); after.Objects != before.Objects {
							require.EqualValues(t, len(held)-1, before.Objects, "op %d: grew with free objects", op)
						}
					} else {
						j := rng.IntN(len(held))
						o := held[j]
						held[j] = held[len(held)-1]
						held = held[:len(held)-1]
						o.owner.Store(0)
						var err error
						w.run(k, func() { err = a.Put(o) })
						require.NoError(t, err, "op %d", op)
						w.run(k+1, func() { err = a.Put(o) })
						require.ErrorIs(t, err, alloc.ErrDoublePut, "op %d", op)
					}
					high = max(high, int64(len(held)))
					st := a.Stats()
					require.EqualValues(t, len(held), st.InUse, "op %d", op)
					require.Equal(t, high, st.HighWater, "op %d", op)
				}
				for _, o := range held {
					o.owner.Store(0)
					require.NoError(t, a.Put(o))
				}
				checkAllFree(t, a, isList)
			})
		}
	}
}

// TestRev4ChaosWaitersAndMoves: many goroutines get (with Get and GetCtx, some with short
// deadlines), hand objects to other goroutines to put back, yield, lock threads, while another
// changes GOMAXPROCS; every object is held by one goroutine at a time, and at the end all n are
// free again, then Close wakes the waiters left.
func TestRev4ChaosWaitersAndMoves(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	rounds := 3000
	if testing.Short() {
		rounds = 800
	}
	for _, plainAfter := range []uint32{2, 1 << 14} {
		t.Run(fmt.Sprintf("plainAfter=%d", plainAfter), func(t *testing.T) {
			const n = 37
			l, err := alloc.NewList[obj](n, nil)
			require.NoError(t, err)
			alloc.SetPlainAfter[obj](l, plainAfter)
			stop := alloc.Churn(func(k int) {
				runtime.GOMAXPROCS(1 + k%4)
				time.Sleep(200 * time.Microsecond)
			})
			handoff := make(chan *obj, 64)
			var putters sync.WaitGroup
			for k := range 3 {
				putters.Add(1)
				go func() {
					defer putters.Done()
					if k == 0 {
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
					}
					for o := range handoff {
						o.owner.Store(0)
						if err := l.Put(o); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func(id int64) {
					defer wg.Done()
					if id%3 == 0 {
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
					}
					rng := rand.New(rand.NewPCG(uint64(id), 1))
					var mine []*obj
					for r := range rounds {
						var o *obj
						var err error
						if r%3 == 0 {
							ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(50))*time.Microsecond)
							o, err = l.GetCtx(ctx)
							cancel()
							if errors.Is(err, context.DeadlineExceeded) {
								continue
							}
						} else {
							o, err = l.Get()
							if errors.Is(err, alloc.ErrEmpty) {
								runtime.Gosched()
								continue
							}
						}
						if err != nil {
							t.Error(err)
							return
						}
						if !o.owner.CompareAndSwap(0, id) {
							t.Errorf("object handed out twice")
							return
						}
						mine = append(mine, o)
						if len(mine) >= 1+rng.IntN(8) {
							for _, o := range mine {
								if rng.IntN(2) == 0 {
									handoff <- o
								} else {
									o.owner.Store(0)
									if err := l.Put(o); err != nil {
										t.Error(err)
									}
								}
							}
							mine = mine[:0]
						}
						if r%17 == 0 {
							runtime.Gosched()
						}
					}
					for _, o := range mine {
						handoff <- o
					}
				}(int64(g + 1))
			}
			wg.Wait()
			close(handoff)
			putters.Wait()
			stop()
			checkAllFree(t, l, true)
			// With all n held, a waiter waits; Close wakes it with ErrClosed.
			var all []*obj
			for range n {
				o, err := l.Get()
				require.NoError(t, err)
				all = append(all, o)
			}
			res := make(chan error)
			go func() {
				_, err := l.GetCtx(context.Background())
				res <- err
			}()
			time.Sleep(5 * time.Millisecond)
			require.NoError(t, l.Close())
			require.ErrorIs(t, <-res, alloc.ErrClosed)
			for _, o := range all {
				require.NoError(t, l.Put(o))
			}
			require.Zero(t, l.Stats().InUse)
			_, err = l.Get()
			require.ErrorIs(t, err, alloc.ErrClosed)
		})
	}
}

// TestRev4SlabInitPanic: an Init hook that panics (once) while a slab is created leaves the Slab
// as it was: the Get panics, and later Gets and Puts work on, every object handed out once, with
// exact Stats. The slab's cells were carved from a region that holds several slabs (after 24
// slabs of one object, a region holds 3): the panic used to leave the carved window skipped but
// counted, so the next slab's objects' indices, found by address, no longer matched the slab
// table, and a Get of a put-back object indexed past the table and panicked.
func TestRev4SlabInitPanic(t *testing.T) {
	for _, at := range []int{1, 2, 26, 40} {
		t.Run(fmt.Sprintf("at=%d", at), func(t *testing.T) {
			calls := 0
			s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 1, Init: func(o *obj) {
				calls++
				if calls == at {
					panic("init")
				}
				o.val = 7
			}})
			require.NoError(t, err)
			var held []*obj
			seen := map[*obj]bool{}
			for len(held) < 60 {
				o, err := func() (o *obj, err error) {
					defer func() {
						if p := recover(); p != nil {
							err = fmt.Errorf("panic: %v", p)
						}
					}()
					return s.Get()
				}()
				if err != nil {
					require.Equal(t, at, calls, "only the Init panic escapes: %v", err)
					continue
				}
				require.False(t, seen[o], "handed out twice")
				require.Equal(t, 7, o.val, "Init ran")
				seen[o] = true
				held = append(held, o)
			}
			require.Equal(t, alloc.Stats{InUse: 60, HighWater: 60, Objects: 60, Slabs: 60}, s.Stats())
			for _, o := range held {
				require.NoError(t, s.Put(o))
			}
			for range 3 {
				clear(seen)
				for range 60 {
					o, err := s.Get()
					require.NoError(t, err)
					require.False(t, seen[o], "handed out twice")
					seen[o] = true
				}
				for o := range seen {
					require.NoError(t, s.Put(o))
				}
			}
			require.Equal(t, alloc.Stats{InUse: 0, HighWater: 60, Objects: 60, Slabs: 60}, s.Stats())
		})
	}
}
