package alloc

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// plainList returns a List of n ints whose Ps take plain mode after every `after` CAS pops, or
// skips t where plain mode is not available.
func plainList(t *testing.T, n int, after uint32) *List[int] {
	t.Helper()
	l, err := NewList[int](n, nil)
	require.NoError(t, err)
	if !l.s.biased {
		t.Skip("no plain mode here (not linux/amd64, -race, purego, or no membarrier)")
	}
	l.s.plainAfter = after
	return l
}

// TestPlainModeFrequentDrains: drains that find a P's cur in plain mode revoke it, with one
// barrier each, but the P takes plain mode again only after plainAfter CAS pops, so frequent
// drains pay for few barriers: a P's owner pops and pushes (on a played P, as FuzzMagazines
// does) with a drain after every fourth pair, and the revocations stay within one per
// plainAfter pops, far fewer than the drains.
func TestPlainModeFrequentDrains(t *testing.T) {
	const after, pairs = 32, 4000
	l := plainList(t, 64, after)
	s := &l.s
	s.mags = make([]magazines, 2) // two played Ps; this goroutine is P 0's owner and the drainer
	m := &s.mags[0]
	drains, plainPops := 0, 0
	for k := range pairs {
		w := m.cur.Load()
		c := s.popCur(m)
		if c == nil {
			c, _ = s.getSlowOn(0)
		} else if w&magPlain != 0 {
			plainPops++
		}
		require.NotNil(t, c)
		c, i, err := s.free(&c.obj)
		require.NoError(t, err)
		s.putOn(0, c, i) // cur holds cells: a drain has something to take
		if k%4 == 3 {
			s.drain()
			drains++
		}
	}
	revokes := int(s.revokes.Load())
	t.Logf("%d pairs, %d drains, %d revocations, %d plain pops", pairs, drains, revokes, plainPops)
	assert.Positive(t, revokes, "plain mode never revoked: never taken?")
	assert.Positive(t, plainPops)
	assert.LessOrEqual(t, revokes, pairs/after+1, "a revocation per drain, not per plainAfter pops")
	assert.Len(t, freeCells(t, s), 64)
}

// TestRevokeWaitsForOwner: a drainer that finds a P's cur in plain mode while the P's owner is
// inside a section (busy, set here by hand) announces itself (stop) and then does not touch the
// word until the section ends.
func TestRevokeWaitsForOwner(t *testing.T) {
	l := plainList(t, 64, 1)
	s := &l.s
	s.mags = make([]magazines, 1)
	m := &s.mags[0]
	c, _ := s.getSlowOn(0)
	require.NotNil(t, c)
	c, i, err := s.free(&c.obj)
	require.NoError(t, err)
	s.putOn(0, c, i)
	w := m.cur.Load()
	require.NotZero(t, w)
	m.cur.Store(w | magPlain) // plain mode, as popCur's calmed sets it
	m.busy.Store(1)           // the owner is inside a section
	done := make(chan bool)
	go func() { done <- s.drain() }()
	for m.stop.Load() == 0 {
		runtime.Gosched()
	}
	for range 1000 {
		runtime.Gosched()
		require.Equal(t, w|magPlain, m.cur.Load(), "the drainer took cur inside the owner's section")
	}
	m.busy.Store(0) // the section ends
	require.True(t, <-done)
	assert.Zero(t, m.cur.Load(), "drained, and out of plain mode")
	assert.Zero(t, m.stop.Load())
	assert.Equal(t, uint64(1), s.revokes.Load())
	assert.Len(t, freeCells(t, s), 64)
}

// TestPlainDrainersConcurrent: goroutines get and put objects of a List and a Slab through the
// public API, in plain mode re-earned after every CAS pop, while other goroutines drain every
// P's magazines in a loop (revoking plain mode each time they find it). Every object is held by
// one goroutine at a time, and at the end every free cell is in exactly one place.
func TestPlainDrainersConcurrent(t *testing.T) {
	rounds := 20000
	if testing.Short() {
		rounds = 4000
	}
	l := plainList(t, 96, 1)
	sl, err := NewSlab(SlabConfig[int]{ObjectsPerSlab: 8})
	require.NoError(t, err)
	sl.s.plainAfter = 1
	for name, a := range map[string]struct {
		Allocator[int]
		s *stack[int]
	}{"list": {l, &l.s}, "slab": {sl, &sl.s}} {
		t.Run("impl="+name, func(t *testing.T) {
			owner := sync.Map{} // object -> holder id; a second holder is a double hand-out
			var failed atomic.Bool
			var wg, drainWg sync.WaitGroup
			stopDrain := make(chan struct{})
			for range 2 {
				drainWg.Add(1)
				go func() {
					defer drainWg.Done()
					for {
						select {
						case <-stopDrain:
							return
						default:
						}
						a.s.drain()
						runtime.Gosched()
					}
				}()
			}
			for w := range 2 * runtime.GOMAXPROCS(0) {
				wg.Add(1)
				go func(id int) {
					defer wg.Done()
					var held []*int
					for r := range rounds {
						if failed.Load() {
							return
						}
						for range 1 + r%4 {
							p, err := a.Get()
							if err != nil {
								break // a List may be empty for a moment
							}
							if prev, dup := owner.LoadOrStore(p, id); dup {
								t.Errorf("object handed out to %d while held by %v", id, prev)
								failed.Store(true)
								return
							}
							held = append(held, p)
						}
						for _, p := range held {
							owner.Delete(p)
							if err := a.Put(p); err != nil {
								t.Error(err)
								failed.Store(true)
								return
							}
						}
						held = held[:0]
					}
				}(w + 1)
			}
			wg.Wait()
			close(stopDrain)
			drainWg.Wait()
			require.False(t, failed.Load())
			t.Logf("revocations: %d", a.s.revokes.Load())
			st := a.s.stats()
			assert.Zero(t, st.InUse)
			assert.Len(t, freeCells(t, a.s), int(st.Objects))
		})
	}
}
