package alloc_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/internal/membarrier"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests here exercise the magazines' plain mode (magazine.go: a P's owner pops and pushes
// its loaded magazine with plain loads and stores, drainers revoke with a process-wide barrier).
// The race detector does not see the plain accesses, and plain mode is off under -race: these
// tests check exactly-once handing out by themselves (the owner marks), in every build, and
// exercise plain mode in the builds that have it (linux/amd64 outside -race and purego).

// TestPlainModeChosen: where membarrier is available, a Slab's and a List's Ps take plain mode
// after their CAS pops and pushes (the default count, then a lowered one); elsewhere they never
// do.
func TestPlainModeChosen(t *testing.T) {
	want := alloc.PlainCapable && membarrier.Available()
	for _, after := range []uint32{0, 4} { // 0: the default
		mk := map[string]func() alloc.Allocator[obj]{
			"slab": func() alloc.Allocator[obj] {
				s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 64})
				require.NoError(t, err)
				return s
			},
			"list": func() alloc.Allocator[obj] {
				l, err := alloc.NewList[obj](256, nil)
				require.NoError(t, err)
				return l
			},
		}
		for name, newAlloc := range mk {
			t.Run(fmt.Sprintf("impl=%s/after=%d", name, after), func(t *testing.T) {
				a := newAlloc()
				require.Equal(t, want, alloc.Biased(a))
				// A goroutine that moves to another P drains (and revokes) the one it left, if
				// the new one has no objects: look for plain mode after every pair, and allow
				// for a few moves.
				ops := 20 * (1 << 14)
				if after != 0 || !want {
					alloc.SetPlainAfter(a, after)
					ops = 1000
				}
				plain := 0
				for range ops {
					o, err := a.Get()
					require.NoError(t, err)
					require.NoError(t, a.Put(o))
					if plain = alloc.PlainPs(a); plain > 0 && want {
						break
					}
				}
				if !want {
					assert.Zero(t, plain, "plain mode without a barrier")
					return
				}
				assert.Positive(t, plain, "no P took plain mode")
			})
		}
	}
}

// TestPlainModeStress: workers get and put objects (in plain mode, re-earned after every CAS
// pop or push) while drainers force drains: on a List by getting until ErrEmpty (every P's
// magazines are drained before it), on a Slab with few objects by getting past its free objects
// (drained before it grows, and at MaxSlabs before ErrEmpty). Every object is held by one
// goroutine at a time (the owner mark), and at the end every object is free exactly once.
func TestPlainModeStress(t *testing.T) {
	rounds := 30000
	if testing.Short() {
		rounds = 6000
	}
	workers, drainers := 2*runtime.GOMAXPROCS(0)+1, 2
	l, err := alloc.NewList[obj](48, nil)
	require.NoError(t, err)
	s, err := alloc.NewSlab(alloc.SlabConfig[obj]{ObjectsPerSlab: 5, MaxSlabs: 12})
	require.NoError(t, err)
	for name, a := range map[string]counted{"list": l, "slab": s} {
		t.Run("impl="+name, func(t *testing.T) {
			alloc.SetPlainAfter[obj](a, 1)
			var failed atomic.Bool
			fail := func(format string, args ...any) {
				failed.Store(true)
				t.Errorf(format, args...)
			}
			var gets, puts atomic.Int64
			get := func(id int64) (*obj, bool) {
				o, err := a.Get()
				if errors.Is(err, alloc.ErrEmpty) {
					return nil, false
				}
				if err != nil {
					fail("%v", err)
					return nil, false
				}
				if !o.owner.CompareAndSwap(0, id) {
					fail("goroutine %d got an object held by %d", id, o.owner.Load())
					return nil, false
				}
				gets.Add(1)
				return o, true
			}
			put := func(id int64, o *obj) {
				if !o.owner.CompareAndSwap(id, 0) {
					fail("object changed hands while held by %d", id)
					return
				}
				if err := a.Put(o); err != nil {
					fail("%v", err)
				}
				puts.Add(1)
			}
			var wg sync.WaitGroup
			for w := range workers + drainers {
				wg.Add(1)
				go func(id int64, drainer bool) {
					defer wg.Done()
					held := make([]*obj, 0, 64)
					for r := range rounds {
						if failed.Load() {
							return
						}
						n := 1 + r%3 // a worker holds a few at a time
						if drainer && r%4 == 0 {
							n = 64 // more than are free: the last Gets drain every P
						}
						for range n {
							o, ok := get(id)
							if !ok {
								break
							}
							held = append(held, o)
						}
						for _, o := range held {
							put(id, o)
						}
						held = held[:0]
						if r%16 == 0 {
							runtime.Gosched()
						}
					}
				}(int64(w+1), w >= workers)
			}
			wg.Wait()
			require.False(t, failed.Load())
			require.Equal(t, gets.Load(), puts.Load())
			checkAllFree(t, a, name == "list")
			if alloc.Biased(a) {
				t.Logf("revocations: %d", alloc.Revokes(a))
			}
		})
	}
}
