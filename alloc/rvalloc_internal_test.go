package alloc

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rvObj is an object with an owner word: a Get's CAS from 0 fails if the object is held.
type rvObj struct {
	owner atomic.Int64
	_     [40]byte
}

// TestRvallocChaosExactlyOnce: every object handed out exactly once at a time, and none lost,
// while GOMAXPROCS moves below and above the count the allocator was made with, Ps take plain
// mode after every CAS op (plainAfter 1, where available), goroutines migrate while holding
// objects, GetCtx waiters park and are woken, and drainers run. At the end every object is free
// in exactly one place and a lone goroutine gets exactly the capacity.
func TestRvallocChaosExactlyOnce(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	const n = 48
	rounds := 1500
	if testing.Short() {
		rounds = 400
	}
	for _, c := range []struct {
		made      int
		withReset bool
	}{{3, false}, {3, true}, {1, false}, {6, true}} {
		withReset := c.withReset
		runtime.GOMAXPROCS(c.made) // the allocators' magazines: one pair per P now
		var reset func(*rvObj)
		if withReset {
			reset = func(o *rvObj) {
				if o.owner.Load() != 0 {
					panic("reset of an owned object")
				}
			}
		}
		l, err := NewList[rvObj](n, reset)
		require.NoError(t, err)
		l.s.plainAfter = 1
		sl, err := NewSlab(SlabConfig[rvObj]{ObjectsPerSlab: 7, MaxSlabs: 7, Reset: reset})
		require.NoError(t, err)
		sl.s.plainAfter = 1
		for name, a := range map[string]Allocator[rvObj]{"list": l, "slab": sl} {
			t.Run(name, func(t *testing.T) {
				var failed atomic.Bool
				procs := rand.New(rand.NewPCG(1, 2))
				stopProcs := Churn(func(int) { // GOMAXPROCS below and above 3
					runtime.GOMAXPROCS(1 + procs.IntN(7))
					runtime.Gosched()
				})
				s := stackOf[rvObj](a)
				stopDrain := Churn(func(int) { s.drain(); runtime.Gosched() })
				var wg sync.WaitGroup
				for w := range 6 {
					wg.Add(1)
					go func(id int64) {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(id), 7))
						var held []*rvObj
						for r := range rounds {
							if failed.Load() {
								return
							}
							for range 1 + rng.IntN(12) {
								var o *rvObj
								var err error
								if w%3 == 0 && name == "list" {
									ctx, cancel := context.WithCancel(context.Background())
									// A worker holding objects never waits: two waiters holding
									// all n between them would wait for each other for ever
									// (a CI run hung so, the others done). Waiting with nothing
									// held, a waiter must be woken by the others' Puts.
									if rng.IntN(4) == 0 || len(held) > 0 {
										cancel()
									}
									o, err = l.GetCtx(ctx)
									cancel()
								} else {
									o, err = a.Get()
								}
								if errors.Is(err, ErrEmpty) || errors.Is(err, context.Canceled) {
									break
								}
								if err != nil {
									t.Error(err)
									failed.Store(true)
									return
								}
								if !o.owner.CompareAndSwap(0, id) {
									t.Errorf("object handed out while held by %d", o.owner.Load())
									failed.Store(true)
									return
								}
								held = append(held, o)
							}
							if r%3 == 0 {
								runtime.Gosched() // move to another P while holding
							}
							rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
							keep := 0
							if rng.IntN(2) == 0 {
								keep = rng.IntN(len(held) + 1)
							}
							for _, o := range held[keep:] {
								o.owner.Store(0)
								if err := a.Put(o); err != nil {
									t.Error(err)
									failed.Store(true)
									return
								}
							}
							held = held[:keep]
						}
						for _, o := range held {
							o.owner.Store(0)
							if err := a.Put(o); err != nil {
								t.Error(err)
								failed.Store(true)
							}
						}
					}(int64(w + 1))
				}
				wg.Wait()
				stopProcs()
				stopDrain()
				require.False(t, failed.Load())
				st := s.stats()
				assert.Zero(t, st.InUse)
				free := freeCells(t, s)
				assert.Len(t, free, int(st.Objects))
				t.Logf("revocations %d, objects %d", s.revokes.Load(), st.Objects)
				// A lone goroutine, moving between Ps, gets exactly the capacity.
				var got []*rvObj
				for k := 0; ; k++ {
					o, err := a.Get()
					if err != nil {
						require.ErrorIs(t, err, ErrEmpty)
						break
					}
					require.True(t, o.owner.CompareAndSwap(0, -1), "handed out twice")
					got = append(got, o)
					if k%5 == 0 {
						runtime.Gosched()
					}
				}
				assert.Len(t, got, a.Traits().Capacity)
				for _, o := range got {
					o.owner.Store(0)
					require.NoError(t, a.Put(o))
				}
			})
		}
	}
}

// TestRvallocPutNeverHandedOut: a Slab's Init hook sees every object of a new slab before any
// Get hands it out. A Put of such an object is of one the Slab did not hand out: ErrForeign (the
// package documentation and ErrForeign's own), not ErrDoublePut ("put back twice", when it was
// never put back nor handed out), on the fast path (no Reset hook) and the general one, and in
// plain mode; the Slab is unchanged (its objects are handed out once each, then ErrEmpty).
func TestRvallocPutNeverHandedOut(t *testing.T) {
	for _, reset := range []func(*rvObj){nil, func(*rvObj) {}} {
		var seen []*rvObj
		sl, err := NewSlab(SlabConfig[rvObj]{ObjectsPerSlab: 8, MaxSlabs: 1, Reset: reset,
			Init: func(o *rvObj) { seen = append(seen, o) }})
		require.NoError(t, err)
		sl.s.plainAfter = 1
		x, err := sl.Get()
		require.NoError(t, err)
		require.Len(t, seen, 8)
		for round := range 4 { // the magazines go through both modes
			for _, o := range seen {
				if o == x {
					continue
				}
				err := sl.Put(o)
				require.ErrorIs(t, err, ErrForeign, "round %d: Put of an object never handed out", round)
				require.NotErrorIs(t, err, ErrDoublePut)
			}
			require.NoError(t, sl.Put(x))
			require.ErrorIs(t, sl.Put(x), ErrDoublePut, "a real double put")
			x, err = sl.Get()
			require.NoError(t, err)
		}
		require.NoError(t, sl.Put(x))
		st := sl.Stats()
		assert.Equal(t, Stats{InUse: 0, HighWater: 1, Objects: 8, Slabs: 1}, st)
		got := map[*rvObj]bool{}
		for range 8 {
			o, err := sl.Get()
			require.NoError(t, err)
			require.False(t, got[o], "handed out twice")
			got[o] = true
		}
		_, err = sl.Get()
		require.ErrorIs(t, err, ErrEmpty)
	}
}

// TestRvallocSlabIndexSpace: a MaxSlabs past the index space caps at the largest whole number
// of slabs below nilIndex: 2^32-1 objects of one per slab (the documented bound; it said 2^32-2).
func TestRvallocSlabIndexSpace(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("32-bit int: Traits.Capacity stops at MaxInt")
	}
	big := int64(1) << 40 // a MaxSlabs past the index space (a variable: no constant overflow on 32-bit)
	for _, c := range []struct{ per, want int64 }{{1, 1<<32 - 1}, {3, (1<<32 - 1) / 3 * 3}, {1 << 20, (1<<32 - 1) >> 20 << 20}} {
		sl, err := NewSlab(SlabConfig[int]{ObjectsPerSlab: int(c.per), MaxSlabs: int(big)})
		require.NoError(t, err)
		assert.Equal(t, c.want, int64(sl.Traits().Capacity), "ObjectsPerSlab %d", c.per)
	}
}

// TestRvallocPaddingThreshold: what decides the padded layout is the cell (object and 16-byte
// header) against half a padding unit, as the package documentation now says; it said objects
// "larger than half a cache line", which objects of 49 to 64 bytes (padded) and of 33 to 48
// bytes (packed, on a 64-byte line) both contradicted.
func TestRvallocPaddingThreshold(t *testing.T) {
	gap := func(a, b uintptr) uintptr { return max(a, b) - min(a, b) }
	big, err := NewList[[cacheLine/2 - cellHeader + 1]byte](2, nil)
	require.NoError(t, err)
	x, _ := big.Get()
	y, _ := big.Get()
	assert.Equal(t, uintptr(cacheLine), gap(addrOf(x), addrOf(y)), "cell over half a unit: padded")
	small, err := NewList[[cacheLine/2 - cellHeader]byte](2, nil)
	require.NoError(t, err)
	p, _ := small.Get()
	q, _ := small.Get()
	assert.Equal(t, uintptr(cacheLine/2), gap(addrOf(p), addrOf(q)), "cell of half a unit: packed")
}

// TestRvallocPoolChaos: Pool objects are handed out once at a time while the garbage collector
// runs (taking idle chunks back) and GOMAXPROCS moves; Puts of fresh heap objects of the same
// type (which may reuse a collected chunk's memory) are ErrForeign. (A second Put here could
// race with another goroutine's Get of the object: double puts are checked where that cannot be.)
func TestRvallocPoolChaos(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	p := NewPool[rvObj](func(o *rvObj) {
		if o.owner.Load() != 0 {
			panic("reset of an owned object")
		}
	})
	stop := Churn(func(k int) {
		runtime.GC()
		runtime.GOMAXPROCS(1 + k%4)
	})
	failed := rvWorkers(4, 3000, 1000, func(id int64, r int, held *[]*rvObj) bool {
		for range 1 + r%20 {
			o, err := p.Get()
			if err != nil || !o.owner.CompareAndSwap(0, id) {
				t.Errorf("Get: %v, or handed out while held", err)
				return false
			}
			*held = append(*held, o)
		}
		ok := true
		if err := p.Put(new(rvObj)); !errors.Is(err, ErrForeign) {
			t.Errorf("Put of a heap object: %v", err)
			ok = false
		}
		for _, o := range *held {
			o.owner.Store(0)
			if err := p.Put(o); err != nil {
				t.Error(err)
				return false
			}
		}
		*held = (*held)[:0]
		return ok
	})
	stop()
	require.False(t, failed)
}

// rvWorkers runs n goroutines (ids 1 to n), each calling round(id, r, &held) for r from 0 to
// rounds-1 (shortRounds under -short) with a held list of its own that lives across its rounds.
// A goroutine ends after a round that returned false (a failure, reported by round), and every
// other before its next round; rvWorkers returns, when all have ended, whether any round failed.
func rvWorkers(n, rounds, shortRounds int, round func(id int64, r int, held *[]*rvObj) bool) (failed bool) {
	if testing.Short() {
		rounds = shortRounds
	}
	var bad atomic.Bool
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func(id int64) {
			defer wg.Done()
			var held []*rvObj
			for r := range rounds {
				if bad.Load() {
					return
				}
				if !round(id, r, &held) {
					bad.Store(true)
					return
				}
			}
		}(int64(w + 1))
	}
	wg.Wait()
	return bad.Load()
}

// TestRvallocCloseMidRun: Close while getters, GetCtx waiters and putters run. Every GetCtx
// returns an object (then put back) or ErrClosed / its context's error; objects out at Close are
// put back after it without error, a second Put of each is ErrDoublePut, and at the end every
// object is free in exactly one place (the free list is whole, though Get no longer hands out).
func TestRvallocCloseMidRun(t *testing.T) {
	for round := range 20 {
		l, err := NewList[rvObj](16, nil)
		require.NoError(t, err)
		l.s.plainAfter = 1
		var wg sync.WaitGroup
		var failed atomic.Bool
		var outMu sync.Mutex
		var out []*rvObj // objects held when their goroutine saw ErrClosed
		var ops atomic.Int64
		for w := range 6 {
			wg.Add(1)
			go func(id int64) {
				defer wg.Done()
				var held []*rvObj
				defer func() {
					outMu.Lock()
					out = append(out, held...)
					outMu.Unlock()
				}()
				fail := func(args ...any) { t.Error(args...); failed.Store(true) }
				putOldest := func() bool {
					held[0].owner.Store(0)
					if err := l.Put(held[0]); err != nil {
						fail(err)
						return false
					}
					held = held[1:]
					return true
				}
				for k := 0; ; k++ {
					if ops.Add(1); k%8 == 7 {
						runtime.Gosched() // let the closer run at GOMAXPROCS 1
					}
					var o *rvObj
					var err error
					if w%2 == 0 {
						o, err = l.GetCtx(context.Background())
					} else {
						o, err = l.Get()
					}
					switch {
					case errors.Is(err, ErrClosed):
						return
					case errors.Is(err, ErrEmpty):
						if len(held) > 0 && !putOldest() {
							return
						}
						runtime.Gosched()
						continue
					case err != nil:
						fail(err)
						return
					}
					if !o.owner.CompareAndSwap(0, id) {
						fail("handed out while held")
						return
					}
					held = append(held, o)
					if len(held) > 4 && !putOldest() {
						return
					}
				}
			}(int64(w + 1))
		}
		for ops.Load() < int64(200*(round%4+1)) { // Close after some traffic
			runtime.Gosched()
		}
		require.NoError(t, l.Close())
		wg.Wait()
		require.False(t, failed.Load())
		for _, o := range out {
			o.owner.Store(0)
			require.NoError(t, l.Put(o), "Put after Close")
			require.ErrorIs(t, l.Put(o), ErrDoublePut)
		}
		_, err = l.Get()
		require.ErrorIs(t, err, ErrClosed)
		assert.Zero(t, l.Stats().InUse)
		assert.Len(t, freeCells(t, &l.s), 16)
		assert.Zero(t, l.waiters.Load())
		assert.Empty(t, l.queue)
	}
}

// TestRvallocHookPanicsConcurrent: a fault schedule under concurrency: Init panics on every
// seventh object it sees and Reset on every fifth call, while six goroutines get and put (plain
// mode after every CAS op where available; GOMAXPROCS moving). A Get that grew panics on and
// changes nothing; a Put whose Reset panics is undone (the object stays the caller's, who puts it
// back again). Every object is handed out once at a time, and at the end the Slab is whole.
func TestRvallocHookPanicsConcurrent(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	var inits, resets atomic.Int64
	sl, err := NewSlab(SlabConfig[rvObj]{ObjectsPerSlab: 3, MaxSlabs: 40,
		Init: func(o *rvObj) {
			if inits.Add(1)%7 == 0 {
				panic("init fault")
			}
		},
		Reset: func(o *rvObj) {
			if o.owner.Load() != 0 {
				panic("reset of an owned object")
			}
			if resets.Add(1)%5 == 0 {
				panic("reset fault")
			}
		}})
	require.NoError(t, err)
	sl.s.plainAfter = 1
	try := func(f func()) (v any) {
		defer func() { v = recover() }()
		f()
		return nil
	}
	stop := Churn(func(k int) {
		runtime.GOMAXPROCS(1 + k%5)
		runtime.Gosched()
	})
	failed := rvWorkers(6, 600, 200, func(id int64, r int, held *[]*rvObj) bool {
		for range 1 + r%9 {
			var o *rvObj
			var err error
			if v := try(func() { o, err = sl.Get() }); v != nil {
				if v != "init fault" {
					t.Errorf("Get panicked: %v", v)
					return false
				}
				continue
			}
			if errors.Is(err, ErrEmpty) {
				break
			}
			if err != nil || !o.owner.CompareAndSwap(0, id) {
				t.Errorf("Get: %v, or handed out while held", err)
				return false
			}
			*held = append(*held, o)
		}
		for _, o := range *held {
			o.owner.Store(0)
			for {
				var err error
				v := try(func() { err = sl.Put(o) })
				if v == nil && err == nil {
					break
				}
				if v != "reset fault" || err != nil {
					t.Errorf("Put: %v, panic %v", err, v)
					return false
				}
			}
		}
		*held = (*held)[:0]
		return true
	})
	stop()
	require.False(t, failed)
	st := sl.Stats()
	assert.Zero(t, st.InUse)
	assert.Len(t, freeCells(t, &sl.s), int(st.Objects))
	assert.Equal(t, st.Objects, int64(st.Slabs)*3)
	t.Logf("stats %+v, inits %d, resets %d", st, inits.Load(), resets.Load())
}

// brokenCtx is a Context whose Done channel is closed while its Err is nil: it breaks the
// context.Context contract, a bad input.
type brokenCtx struct{ context.Context }

var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (brokenCtx) Done() <-chan struct{} { return closedDone }
func (brokenCtx) Err() error            { return nil }

// TestRvallocGetCtxBrokenContext: GetCtx on an empty List with a Context whose Done is closed but
// whose Err is nil returns an error, not (nil, nil), which a caller would take for an object; it
// leaves no waiter behind, and the List works on.
func TestRvallocGetCtxBrokenContext(t *testing.T) {
	l, err := NewList[rvObj](1, nil)
	require.NoError(t, err)
	x, err := l.Get()
	require.NoError(t, err)
	o, err := l.GetCtx(brokenCtx{context.Background()})
	require.Error(t, err, "no object and no error")
	require.Nil(t, o)
	assert.Zero(t, l.waiters.Load())
	assert.Empty(t, l.queue)
	require.NoError(t, l.Put(x))
	y, err := l.GetCtx(brokenCtx{context.Background()}) // free: no wait
	require.NoError(t, err)
	require.Same(t, x, y)
}

// TestRvallocPaddedSlabMemory: padded cells are allocated at least 32 KiB at a time (a large
// object, to start on a page). A Slab of one object per slab used to make a region of one slab
// per grow while small, each such an allocation: 64 objects of 128 bytes took 29 regions, over
// 1 MiB (the documentation promises under a padding unit of overhead per object). Now a region
// holds as many slabs as its allocation does.
func TestRvallocPaddedSlabMemory(t *testing.T) {
	type obj100 [100]byte
	sl, err := NewSlab(SlabConfig[obj100]{ObjectsPerSlab: 1})
	require.NoError(t, err)
	require.True(t, sl.s.lay.padded)
	minCells := sl.s.lay.minCells()
	var held []*obj100
	get := func(n int) {
		for range n {
			o, err := sl.Get()
			require.NoError(t, err)
			held = append(held, o)
		}
	}
	get(64)
	tab := sl.s.tab.Load()
	assert.Len(t, tab.byAddr, 1, "64 slabs of one padded object: one allocation")
	get(minCells) // past the first allocation
	tab = sl.s.tab.Load()
	assert.Len(t, tab.byAddr, 2)
	allocated := 0
	for _, r := range tab.byAddr {
		allocated += max(r.cells.n, minCells) * int(sl.s.lay.stride)
	}
	assert.LessOrEqual(t, allocated, 2*minCells*int(sl.s.lay.stride), "bytes allocated for %d objects", len(held))
	st := sl.Stats()
	assert.Equal(t, Stats{InUse: int64(len(held)), HighWater: int64(len(held)), Objects: int64(len(held)), Slabs: len(held)}, st)
	for _, o := range held {
		require.NoError(t, sl.Put(o))
	}
	assert.Len(t, freeCells(t, &sl.s), len(held))
}
