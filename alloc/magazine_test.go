package alloc_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/alloc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests here exercise the per-P magazines (see the package documentation) through the
// public API. CI runs them at -cpu 1,2,4 and under -race; burst is longer than two magazines
// (a P caches up to 32 objects), so objects go through the depot too.
const burst = 40

// counted is an allocator with Stats, as Slab and List are.
type counted interface {
	alloc.Allocator[obj]
	Stats() alloc.Stats
}

func countedImpls(t *testing.T, n int) map[string]counted {
	s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 7, Reset: resetObj})
	require.NoError(t, err)
	l, err := alloc.NewList(n, resetObj)
	require.NoError(t, err)
	// Without a reset hook, Put takes its one-pass path (stack.put's common case).
	sn, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 7})
	require.NoError(t, err)
	ln, err := alloc.NewList[obj](n, nil)
	require.NoError(t, err)
	// And with plain mode (magazine.go) re-earned after every second CAS pop or push, so that
	// drains revoke it often, where it is available.
	sp, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 7})
	require.NoError(t, err)
	alloc.SetPlainAfter[obj](sp, 2)
	lp, err := alloc.NewList[obj](n, nil)
	require.NoError(t, err)
	alloc.SetPlainAfter[obj](lp, 2)
	return map[string]counted{"slab": s, "list": l, "slab-nohook": sn, "list-nohook": ln, "slab-plain-nohook": sp, "list-plain-nohook": lp}
}

// getRetry gets an object, retrying (a bounded number of times) while the allocator reports
// ErrEmpty: under concurrent use a List may, while others move its last free objects.
func getRetry(a alloc.Allocator[obj]) (*obj, error) {
	for try := 0; ; try++ {
		o, err := a.Get()
		if !errors.Is(err, alloc.ErrEmpty) || try == 1000 {
			return o, err
		}
		runtime.Gosched()
	}
}

// checkAllFree asserts, on a quiescent allocator, that nothing is in use and that every object
// can be had once, without growing (and then, for a List, that it is empty).
func checkAllFree(t *testing.T, a counted, isList bool) {
	t.Helper()
	st := a.Stats()
	require.Zero(t, st.InUse)
	seen := make(map[*obj]bool, st.Objects)
	for range st.Objects {
		o, err := a.Get()
		require.NoError(t, err, "a free object was lost (in a magazine?)")
		require.False(t, seen[o], "object free twice")
		seen[o] = true
	}
	assert.Equal(t, st.Objects, a.Stats().Objects, "no growth: every object was free")
	if isList {
		_, err := a.Get()
		require.ErrorIs(t, err, alloc.ErrEmpty)
	}
	for o := range seen {
		require.NoError(t, a.Put(o))
	}
	require.Equal(t, alloc.Stats{InUse: 0, HighWater: st.Objects, Objects: st.Objects, Slabs: st.Slabs}, a.Stats(), "all were in use at once")
}

// TestConcurrentMagazinesExactlyOnce: goroutines get bursts of objects and give them back, some
// themselves and some through another goroutine (a Put on a different P than the Get, as a
// completion on the engine's goroutine does). Every object is held by one goroutine at a time
// (the owner mark), each Get is matched by one Put, and at the end every object is free once.
func TestConcurrentMagazinesExactlyOnce(t *testing.T) {
	workers, rounds := 2*runtime.GOMAXPROCS(0)+2, 300
	if testing.Short() {
		rounds = 60
	}
	for name, a := range countedImpls(t, 3*burst) {
		t.Run("impl="+name, func(t *testing.T) {
			inbox := make([]chan *obj, workers) // objects another worker hands over to put back
			for w := range inbox {
				inbox[w] = make(chan *obj, rounds*burst)
			}
			var gets, puts atomic.Int64
			var wg sync.WaitGroup
			var failed atomic.Bool
			fail := func(format string, args ...any) {
				failed.Store(true)
				t.Errorf(format, args...)
			}
			hook := !strings.HasSuffix(name, "-nohook")
			putBack := func(w int64, o *obj) {
				if !o.owner.CompareAndSwap(w, 0) {
					fail("object changed hands while held by %d", w)
					return
				}
				if !hook {
					o.val = 0 // the allocator's reset hook's work
				}
				if err := a.Put(o); err != nil {
					fail("%v", err)
				}
				puts.Add(1)
			}
			for w := range workers {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					id := int64(w + 1)
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					held := make([]*obj, 0, burst)
					for range rounds {
						if failed.Load() {
							return
						}
						for len(inbox[w]) > 0 {
							o := <-inbox[w]
							o.owner.Store(id) // handed over: ours now
							putBack(id, o)
						}
						for range 1 + rng.IntN(burst) {
							o, err := a.Get()
							if errors.Is(err, alloc.ErrEmpty) {
								break
							}
							if err != nil {
								fail("%v", err)
								return
							}
							if !o.owner.CompareAndSwap(0, id) {
								fail("worker %d got an object held by %d", id, o.owner.Load())
								return
							}
							if o.val != 0 {
								fail("dirty object")
							}
							o.val = int(id)
							gets.Add(1)
							held = append(held, o)
						}
						next := (w + 1) % workers
						for k, o := range held {
							if k%2 == 0 {
								putBack(id, o)
							} else {
								o.owner.Store(0) // in transit: the next worker takes it over
								inbox[next] <- o
							}
						}
						held = held[:0]
					}
				}(w)
			}
			wg.Wait()
			for w := range inbox {
				for len(inbox[w]) > 0 {
					o := <-inbox[w]
					o.owner.Store(1)
					putBack(1, o)
				}
			}
			require.False(t, failed.Load())
			assert.Positive(t, gets.Load())
			assert.Equal(t, gets.Load(), puts.Load())
			checkAllFree(t, a, strings.HasPrefix(name, "list"))
		})
	}
}

// TestListCapacityConcurrent: goroutines on several Ps get objects and put most of them back,
// so their Ps' magazines hold free objects, then park holding one each. With them parked, a Get
// elsewhere must still have every free object, to the last, before ErrEmpty; and after all
// Puts, nothing is in use and the whole capacity is free.
func TestListCapacityConcurrent(t *testing.T) {
	holders := 2 * runtime.GOMAXPROCS(0)
	const each = 12 // each holder gets 12, puts 11 back (into its P's magazine), keeps 1
	n := holders * (each + 4)
	l, err := alloc.NewList[obj](n, nil)
	require.NoError(t, err)
	var ready, done sync.WaitGroup
	release := make(chan struct{})
	ready.Add(holders)
	errs := make(chan error, holders)
	for range holders {
		done.Add(1)
		go func() {
			defer done.Done()
			var keep *obj
			for k := range each {
				o, err := getRetry(l)
				if err != nil {
					errs <- err
					ready.Done()
					return
				}
				if keep == nil {
					keep = o
					continue
				}
				if k%3 == 0 {
					runtime.Gosched() // move around: more Ps' magazines get objects
				}
				if err := l.Put(o); err != nil {
					errs <- err
				}
			}
			ready.Done()
			<-release
			if err := l.Put(keep); err != nil {
				errs <- err
			}
		}()
	}
	ready.Wait()
	// Quiescent now: every Get must succeed until exactly the holders' objects are out.
	var mine []*obj
	for {
		o, err := l.Get()
		if errors.Is(err, alloc.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		mine = append(mine, o)
	}
	require.Len(t, mine, n-holders, "free objects cached on other Ps were lost")
	assert.Equal(t, alloc.Stats{InUse: int64(n), HighWater: int64(n), Objects: int64(n), Slabs: 1}, l.Stats())
	close(release)
	done.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, int64(n-holders), l.Stats().InUse)
	for _, o := range mine {
		require.NoError(t, l.Put(o))
	}
	assert.Equal(t, alloc.Stats{InUse: 0, HighWater: int64(n), Objects: int64(n), Slabs: 1}, l.Stats())
	var all []*obj
	for range n {
		o, err := l.Get()
		require.NoError(t, err)
		all = append(all, o)
	}
	_, err = l.Get()
	require.ErrorIs(t, err, alloc.ErrEmpty)
	for _, o := range all {
		require.NoError(t, l.Put(o))
	}
}

// TestPutOnOtherPConcurrent is the engine's shape: a producer gets objects and a consumer
// goroutine puts them back, so Gets and Puts run on different Ps. The List holds little more
// than two magazines, so the producer must take the consumer's cached objects (and, with
// GetCtx, be woken for them). Each object is held once at a time, and all come back.
func TestPutOnOtherPConcurrent(t *testing.T) {
	items := 20000
	if testing.Short() {
		items = 3000
	}
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprintf("GetCtx=%v", wait), func(t *testing.T) {
			n := 2*16 + 3
			l, err := alloc.NewList(n, resetObj)
			require.NoError(t, err)
			// ctx bounds the producer's waits for objects, with GetCtx or by retrying Get: a
			// minute for the subtest, which takes well under a second (a hang guard: objects
			// lost or a wake-up missed); the consumer's failure ends it at once.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ch := make(chan *obj, n)
			var consumerErr error
			// failed: the consumer failed; it puts nothing back from then on (it drains ch, so
			// that no send blocks) and cancels ctx, and the producer, which would wait for
			// objects until ctx's end, stops.
			var failed atomic.Bool
			fail := func(err error) {
				consumerErr = err
				failed.Store(true)
				cancel()
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the consumer: the completion side
				defer wg.Done()
				for o := range ch {
					if failed.Load() {
						continue
					}
					if !o.owner.CompareAndSwap(1, 0) {
						fail(errors.New("object changed hands in flight"))
						continue
					}
					if err := l.Put(o); err != nil {
						fail(err)
					}
				}
			}()
			// The producer, on this goroutine: its failure (err, or a check below) is reported
			// once the consumer stopped, after the consumer's, which it may be the effect of.
			for range items {
				var o *obj
				if wait {
					o, err = l.GetCtx(ctx)
				} else {
					for o, err = l.Get(); errors.Is(err, alloc.ErrEmpty) && ctx.Err() == nil; o, err = l.Get() {
						runtime.Gosched()
					}
				}
				if err != nil || failed.Load() {
					break
				}
				if !assert.True(t, o.owner.CompareAndSwap(0, 1), "object handed out while in flight") ||
					!assert.Zero(t, o.val, "dirty object") {
					break
				}
				o.val = 1
				ch <- o
			}
			close(ch)
			wg.Wait()
			require.NoError(t, consumerErr)
			require.NoError(t, err, "producer starved: an object was lost or a wakeup missed")
			if t.Failed() {
				return // a check of the producer's
			}
			checkAllFree(t, l, true)
		})
	}
}

// TestGOMAXPROCSChangeConcurrent: an allocator made at one GOMAXPROCS keeps its promises at
// another. Raised: goroutines on the new Ps (no magazines of their own) take the shared path
// beside those that have them. Lowered: magazines of Ps that are gone still give their objects
// back.
func TestGOMAXPROCSChangeConcurrent(t *testing.T) {
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	for _, pr := range []struct{ made, run int }{{1, 4}, {4, 1}, {2, 3}} {
		t.Run(fmt.Sprintf("made=%d/run=%d", pr.made, pr.run), func(t *testing.T) {
			prev := runtime.GOMAXPROCS(pr.made)
			defer runtime.GOMAXPROCS(prev)
			impls := countedImpls(t, 4*burst)
			runtime.GOMAXPROCS(pr.made + pr.run) // spread objects over every P first
			for name, a := range impls {
				churn(t, a, 8, rounds/4)
				runtime.GOMAXPROCS(pr.run)
				churn(t, a, 8, rounds)
				checkAllFree(t, a, strings.HasPrefix(name, "list"))
				runtime.GOMAXPROCS(pr.made + pr.run)
			}
		})
	}
}

// churn runs workers that get and put bursts concurrently, checking the owner marks.
func churn(t *testing.T, a alloc.Allocator[obj], workers, rounds int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(id int64) {
			defer wg.Done()
			held := make([]*obj, 0, burst)
			for r := range rounds {
				for range 1 + (r*int(id))%burst {
					o, err := a.Get()
					if errors.Is(err, alloc.ErrEmpty) {
						break
					}
					if !assert.NoError(t, err) || !assert.True(t, o.owner.CompareAndSwap(0, id), "object handed out twice") {
						return
					}
					held = append(held, o)
				}
				for _, o := range held {
					o.owner.Store(0)
					if !assert.NoError(t, a.Put(o)) {
						return
					}
				}
				held = held[:0]
			}
		}(int64(w + 1))
	}
	wg.Wait()
}

// TestZeroAllocsMagazines: Gets and Puts in bursts longer than two magazines, so that full
// magazines go to the depot and come back, allocate nothing.
func TestZeroAllocsMagazines(t *testing.T) {
	for name, a := range countedImpls(t, 2*burst) {
		t.Run("impl="+name, func(t *testing.T) {
			held := make([]*obj, 0, 2*burst)
			cycle := func() {
				for range 2 * burst {
					o, err := a.Get()
					if err != nil {
						panic(err)
					}
					held = append(held, o)
				}
				for _, o := range held {
					if err := a.Put(o); err != nil {
						panic(err)
					}
				}
				held = held[:0]
			}
			cycle() // warm up: the slab's slabs
			assert.Zero(t, testing.AllocsPerRun(100, cycle))
		})
	}
}

// TestConcurrentDoublePutRace: two goroutines put back the same object at once, on the fast path
// (no reset hook: the link CAS and the magazine CAS, pinned to each one's P) and with a hook: one
// Put succeeds and the other is refused with ErrDoublePut, every round, and the object is free
// once (a List hands out each of its objects once, then reports ErrEmpty).
func TestConcurrentDoublePutRace(t *testing.T) {
	const n, rounds = 8, 3000
	for _, reset := range []func(*obj){nil, resetObj} {
		l, err := alloc.NewList[obj](n, reset)
		require.NoError(t, err)
		s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: n, MaxSlabs: 1, Reset: reset})
		require.NoError(t, err)
		for _, a := range []alloc.Allocator[obj]{l, s} {
			for r := range rounds {
				o, err := a.Get()
				require.NoError(t, err)
				var ok, double atomic.Int32
				var start, done sync.WaitGroup
				start.Add(1)
				for range 2 {
					done.Add(1)
					go func() {
						defer done.Done()
						start.Wait()
						switch err := a.Put(o); {
						case err == nil:
							ok.Add(1)
						case errors.Is(err, alloc.ErrDoublePut):
							double.Add(1)
						default:
							t.Errorf("round %d: %v", r, err)
						}
					}()
				}
				start.Done()
				done.Wait()
				require.Equal(t, int32(1), ok.Load(), "round %d: puts that succeeded", r)
				require.Equal(t, int32(1), double.Load(), "round %d: puts refused as double", r)
			}
			seen := map[*obj]bool{}
			for range n {
				p, err := a.Get()
				require.NoError(t, err)
				require.False(t, seen[p], "an object handed out twice")
				seen[p] = true
			}
			_, err := a.Get()
			require.ErrorIs(t, err, alloc.ErrEmpty)
			for p := range seen {
				require.NoError(t, a.Put(p))
			}
		}
	}
}
