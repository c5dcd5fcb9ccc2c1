package alloc_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// obj is the test payload: an owner mark to catch two goroutines holding the same object, and
// fields the reset hook must clear.
type obj struct {
	owner atomic.Int64 // 0 when free; the owning goroutine's id (from 1) while held
	val   int
	buf   [24]byte
}

func resetObj(o *obj) {
	o.val = 0
	o.buf = [24]byte{}
}

// impl builds a fresh allocator of one kind, with room for at least n objects held at once.
type impl struct {
	name string
	make func(t testing.TB, n int) alloc.Allocator[obj]
}

var impls = []impl{
	{"slab", func(t testing.TB, n int) alloc.Allocator[obj] {
		s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 7, Reset: resetObj})
		require.NoError(t, err)
		return s
	}},
	{"list", func(t testing.TB, n int) alloc.Allocator[obj] {
		l, err := alloc.NewList(n, resetObj)
		require.NoError(t, err)
		return l
	}},
	{"pool", func(t testing.TB, n int) alloc.Allocator[obj] {
		return alloc.NewPool(resetObj)
	}},
}

// forEach runs f once per allocator kind, as a subtest named impl=kind.
func forEach(t *testing.T, f func(t *testing.T, im impl)) {
	for _, im := range impls {
		t.Run("impl="+im.name, func(t *testing.T) { f(t, im) })
	}
}

func TestTraits(t *testing.T) {
	s, _ := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 4, MaxSlabs: 3})
	assert.Equal(t, alloc.Traits{Concurrent: true, LockFree: true, OnEmpty: alloc.EmptyGrow, Capacity: 12}, s.Traits())
	s, _ = alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 4})
	assert.Equal(t, 0, s.Traits().Capacity)
	l, _ := alloc.NewList[obj](5, nil)
	assert.Equal(t, alloc.Traits{Concurrent: true, LockFree: true, OnEmpty: alloc.EmptyFail, CanWait: true, Capacity: 5}, l.Traits())
	p := alloc.NewPool[obj](nil)
	assert.Equal(t, alloc.Traits{Concurrent: true, LockFree: true, OnEmpty: alloc.EmptyGrow, Shrinks: true}, p.Traits())
	forEach(t, func(t *testing.T, im impl) {
		assert.True(t, im.make(t, 1).Traits().Concurrent, "all three are safe for concurrent use")
	})
	assert.Equal(t, "grow", alloc.EmptyGrow.String())
	assert.Equal(t, "fail", alloc.EmptyFail.String())
	assert.Equal(t, "EmptyPolicy(9)", alloc.EmptyPolicy(9).String())
}

// TestConcurrentOwnership: goroutines get, mark, use and put objects; every object must be held
// by one goroutine at a time (the owner mark), and come back clean (the reset hook).
func TestConcurrentOwnership(t *testing.T) {
	forEach(t, func(t *testing.T, im impl) {
		workers, rounds, hold := 8, 2000, 3
		if testing.Short() {
			rounds = 300
		}
		// The list has fewer objects than the workers want, so Get also fails and retries.
		a := im.make(t, workers*hold/2)
		var gets atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func(id int64) {
				defer wg.Done()
				held := make([]*obj, 0, hold)
				for r := range rounds {
					for len(held) < 1+r%hold {
						o, err := a.Get()
						if errors.Is(err, alloc.ErrEmpty) {
							break
						}
						if err != nil {
							errs <- err
							return
						}
						if !o.owner.CompareAndSwap(0, id) {
							errs <- fmt.Errorf("worker %d got an object owned by %d", id, o.owner.Load())
							return
						}
						if o.val != 0 || o.buf != [24]byte{} {
							errs <- fmt.Errorf("worker %d got a dirty object (val %d)", id, o.val)
							return
						}
						o.val = int(id)
						o.buf[r%24] = byte(id)
						gets.Add(1)
						held = append(held, o)
					}
					if len(held) == 0 {
						runtime.Gosched()
						continue
					}
					o := held[len(held)-1]
					held = held[:len(held)-1]
					if o.val != int(id) || !o.owner.CompareAndSwap(id, 0) {
						errs <- fmt.Errorf("worker %d: object changed hands while held", id)
						return
					}
					if err := a.Put(o); err != nil {
						errs <- err
						return
					}
				}
				for _, o := range held {
					o.owner.Store(0)
					if err := a.Put(o); err != nil {
						errs <- err
						return
					}
				}
			}(int64(w + 1))
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		assert.Positive(t, gets.Load())
		if st, ok := a.(interface{ Stats() alloc.Stats }); ok && im.name != "pool" {
			s := st.Stats()
			assert.Zero(t, s.InUse)
			assert.Positive(t, s.HighWater)
			assert.LessOrEqual(t, s.HighWater, int64(workers*hold))
			// Nothing lost, nothing duplicated: every object the allocator owns is free, once,
			// and can be had without growing.
			seen := map[*obj]bool{}
			for range s.Objects {
				o, err := a.Get()
				require.NoError(t, err)
				require.False(t, seen[o], "object free twice")
				seen[o] = true
			}
			assert.Equal(t, s.Slabs, st.Stats().Slabs, "all objects were free: no slab added")
			if im.name == "list" {
				_, err := a.Get()
				require.ErrorIs(t, err, alloc.ErrEmpty)
			}
			for o := range seen {
				require.NoError(t, a.Put(o))
			}
		}
	})
}

func TestDoublePut(t *testing.T) {
	forEach(t, func(t *testing.T, im impl) {
		a := im.make(t, 4)
		o, err := a.Get()
		require.NoError(t, err)
		o2, err := a.Get()
		require.NoError(t, err)
		require.NotSame(t, o, o2)
		require.NoError(t, a.Put(o))

		err = a.Put(o)
		require.ErrorIs(t, err, alloc.ErrDoublePut)
		var pe *alloc.PutError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, im.name, pe.Allocator)
		assert.NotZero(t, pe.Addr)
		assert.Contains(t, err.Error(), "put back twice")

		// The refused put changed nothing: o comes back once, o2 is still ours.
		seen := map[*obj]bool{}
		for range 2 {
			p, err := a.Get()
			require.NoError(t, err)
			require.False(t, seen[p], "same object handed out twice")
			require.NotSame(t, o2, p)
			seen[p] = true
		}
		require.NoError(t, a.Put(o2))
		require.ErrorIs(t, a.Put(o2), alloc.ErrDoublePut)
	})
}

func TestForeignPut(t *testing.T) {
	forEach(t, func(t *testing.T, im impl) {
		a, other := im.make(t, 4), im.make(t, 4)
		mine, err := a.Get()
		require.NoError(t, err)
		theirs, err := other.Get()
		require.NoError(t, err)
		arr := make([]obj, 3)
		for name, p := range map[string]*obj{
			"nil":           nil,
			"new":           new(obj),
			"slice element": &arr[1],
			"other alloc":   theirs,
		} {
			err := a.Put(p)
			require.ErrorIs(t, err, alloc.ErrForeign, name)
			require.False(t, errors.Is(err, alloc.ErrDoublePut), name)
		}
		// Nothing changed: our object still goes back once, theirs still goes back to them.
		require.NoError(t, a.Put(mine))
		require.NoError(t, other.Put(theirs))
		require.ErrorIs(t, other.Put(mine), alloc.ErrForeign)
	})
}

// TestOwns: Slab and List tell their own objects, free or in use.
func TestOwns(t *testing.T) {
	s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 2})
	require.NoError(t, err)
	l, err := alloc.NewList[obj](2, nil)
	require.NoError(t, err)
	for _, a := range []interface {
		alloc.Allocator[obj]
		Owns(*obj) bool
	}{s, l} {
		o, err := a.Get()
		require.NoError(t, err)
		assert.True(t, a.Owns(o))
		require.NoError(t, a.Put(o))
		assert.True(t, a.Owns(o), "free objects are still owned")
		assert.False(t, a.Owns(new(obj)))
		assert.False(t, a.Owns(nil))
	}
}

// TestZeroAllocs: Get and Put allocate nothing in steady state.
func TestZeroAllocs(t *testing.T) {
	forEach(t, func(t *testing.T, im impl) {
		if im.name == "pool" && raceEnabled {
			t.Skip("sync.Pool drops objects on purpose under -race")
		}
		a := im.make(t, 4)
		// Warm up: let the slab or pool make its objects.
		var warm []*obj
		for range 4 {
			o, err := a.Get()
			require.NoError(t, err)
			warm = append(warm, o)
		}
		for _, o := range warm {
			require.NoError(t, a.Put(o))
		}
		n := testing.AllocsPerRun(1000, func() {
			o, err := a.Get()
			if err != nil {
				panic(err)
			}
			o.val++
			if err := a.Put(o); err != nil {
				panic(err)
			}
		})
		assert.Zero(t, n)
	})
	// List.GetCtx allocates only when it has to wait.
	t.Run("impl=list/GetCtx", func(t *testing.T) {
		l, err := alloc.NewList[obj](2, nil)
		require.NoError(t, err)
		ctx := context.Background()
		assert.Zero(t, testing.AllocsPerRun(1000, func() {
			o, err := l.GetCtx(ctx)
			if err != nil {
				panic(err)
			}
			if err := l.Put(o); err != nil {
				panic(err)
			}
		}))
	})
}

// TestResetPanics: a reset hook that panics undoes the Put. The object is neither lost (it can be
// put back again once the hook behaves) nor handed out half reset, and the counters are unchanged.
func TestResetPanics(t *testing.T) {
	fail := true
	reset := func(o *obj) {
		if fail {
			panic("reset failed")
		}
		resetObj(o)
	}
	s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 2, MaxSlabs: 1, Reset: reset})
	require.NoError(t, err)
	l, err := alloc.NewList(2, reset)
	require.NoError(t, err)
	for name, a := range map[string]alloc.Allocator[obj]{"slab": s, "list": l, "pool": alloc.NewPool(reset)} {
		t.Run("impl="+name, func(t *testing.T) {
			fail = true
			o, err := a.Get()
			require.NoError(t, err)
			o.val = 5
			before := a.(interface{ Stats() alloc.Stats }).Stats()
			assert.PanicsWithValue(t, "reset failed", func() { _ = a.Put(o) })
			assert.Equal(t, before, a.(interface{ Stats() alloc.Stats }).Stats(), "counters unchanged")
			// Still the caller's: the other object comes out, never o.
			o2, err := a.Get()
			require.NoError(t, err)
			require.NotSame(t, o, o2)
			fail = false
			require.NoError(t, a.Put(o), "the undone Put can be done again")
			require.NoError(t, a.Put(o2))
			require.ErrorIs(t, a.Put(o), alloc.ErrDoublePut)
			// Both objects are free again, clean.
			x, err := a.Get()
			require.NoError(t, err)
			y, err := a.Get()
			require.NoError(t, err)
			require.NotSame(t, x, y)
			assert.Zero(t, x.val)
			assert.Zero(t, y.val)
			require.NoError(t, a.Put(x))
			require.NoError(t, a.Put(y))
		})
	}
}

// TestStatsExactAfterConcurrentUse: Slab and List keep no counters on Get and Put; Stats counts by
// reading every object. Once the goroutines stop it is exact: InUse is what they hold and
// HighWater the largest number ever held at once, reached here at a known moment, with the slab
// growing while others put objects back. While they run, every snapshot has InUse <= HighWater <=
// Objects.
func TestStatsExactAfterConcurrentUse(t *testing.T) {
	workers, low, peak, rounds := 4, 3, 9, 400
	if testing.Short() {
		rounds = 100
	}
	for _, im := range impls {
		if im.name == "pool" {
			continue // Pool does not count objects in use
		}
		t.Run("impl="+im.name, func(t *testing.T) {
			a := im.make(t, workers*peak)
			st := a.(interface{ Stats() alloc.Stats })
			var failed atomic.Bool // a worker's Get or Put went wrong (reported): the rest stop
			get := func(w int64, held []*obj) []*obj {
				o, err := a.Get()
				if !assert.NoError(t, err) || !assert.True(t, o.owner.CompareAndSwap(0, w), "object handed out twice") {
					failed.Store(true)
					return held
				}
				return append(held, o)
			}
			put := func(held []*obj) []*obj {
				o := held[len(held)-1]
				o.owner.Store(0)
				if !assert.NoError(t, a.Put(o)) {
					failed.Store(true)
				}
				return held[:len(held)-1]
			}
			// churn gets and puts, holding at most low objects.
			churn := func(w int64, held []*obj) []*obj {
				for r := 0; r < rounds && !failed.Load(); r++ {
					if len(held) == 0 || (len(held) < low && r%3 != 2) {
						held = get(w, held)
					} else {
						held = put(held)
					}
				}
				return held
			}
			var wg sync.WaitGroup
			var atPeak, release sync.WaitGroup
			atPeak.Add(workers)
			release.Add(1)
			stop := make(chan struct{})
			go func() { // a reader of snapshots
				for {
					select {
					case <-stop:
						return
					default:
					}
					s := st.Stats()
					if s.InUse < 0 || s.InUse > s.HighWater || s.HighWater > s.Objects {
						t.Errorf("inconsistent snapshot %+v", s)
						return
					}
					runtime.Gosched()
				}
			}()
			for w := range workers {
				wg.Add(1)
				go func(w int64) {
					defer wg.Done()
					held := churn(w, nil)
					for len(held) < peak && !failed.Load() {
						held = get(w, held)
					}
					atPeak.Done()
					release.Wait()
					if failed.Load() {
						return
					}
					for len(held) > 0 {
						held = put(held)
					}
					held = churn(w, held)
					for len(held) > 0 {
						held = put(held)
					}
				}(int64(w + 1))
			}
			atPeak.Wait()
			if failed.Load() {
				release.Done()
				wg.Wait()
				close(stop)
				return
			}
			s := st.Stats()
			assert.Equal(t, int64(workers*peak), s.InUse)
			assert.Equal(t, int64(workers*peak), s.HighWater)
			release.Done()
			wg.Wait()
			close(stop)
			s = st.Stats()
			assert.Zero(t, s.InUse)
			assert.Equal(t, int64(workers*peak), s.HighWater)
		})
	}
}
