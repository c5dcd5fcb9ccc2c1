package alloc

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMagazinesOwnCacheLine: each P's magazine pair fills whole cache lines (the slice's
// elements are line-sized, so no two Ps share one), and the depot's head shares its line with
// neither the free stack's head nor the read-mostly fields.
func TestMagazinesOwnCacheLine(t *testing.T) {
	assert.Equal(t, uintptr(cacheLine), unsafe.Sizeof(magazines{}))
	var s stack[int]
	head, depot, tab := unsafe.Offsetof(s.head), unsafe.Offsetof(s.depot), unsafe.Offsetof(s.tab)
	assert.GreaterOrEqual(t, depot-head, uintptr(cacheLine))
	assert.GreaterOrEqual(t, tab-depot, uintptr(cacheLine))
}

// freeCells walks every place a free cell can be (each P's magazines, the depot, the free stack)
// on a quiescent stack and returns the indices found, failing t if a cell is found twice or is
// marked in use, or if a magazine's count and its chain disagree with the depot's record.
func freeCells[T any](t *testing.T, s *stack[T]) map[uint32]string {
	t.Helper()
	tab := s.tab.Load()
	found := map[uint32]string{}
	add := func(i uint32, where string) {
		t.Helper()
		require.NotContains(t, found, i, "cell %d free twice: in %s and %s", i, found[i], where)
		require.Zero(t, tab.cell(i, s.per).link.Load()&linkInUse, "cell %d in %s is marked in use", i, where)
		found[i] = where
	}
	chain := func(w uint64, where string) {
		i := uint32(w)
		for k := uint32(0); k < uint32(w>>32); k++ {
			add(i, where)
			// The link holds the word of the magazine below (what a pop leaves in cur).
			l := tab.cell(i, s.per).link.Load()
			require.NotZero(t, l&linkTouched, "cell %d in %s: not marked touched", i, where)
			if below := uint32(w>>32) - k - 1; below == 0 {
				require.Zero(t, l&^linkTouched, "cell %d, the last in %s: link %#x", i, where, l)
			} else {
				require.Equal(t, uint64(below), l&^linkTouched>>32, "cell %d in %s: link %#x", i, where, l)
			}
			i = uint32(l)
		}
	}
	for k := range s.mags {
		c := s.mags[k].cur.Load() &^ magPlain // its mode aside
		require.LessOrEqual(t, c>>32, uint64(magSize), "P%d.cur holds more than magSize cells", k)
		chain(c, fmt.Sprintf("P%d.cur", k))
		p := s.mags[k].prev.Load()
		require.True(t, p == 0 || p>>32 == magSize, "P%d.prev holds %d cells: full or empty only", k, p>>32)
		chain(p, fmt.Sprintf("P%d.prev", k))
	}
	for d := uint32(s.depot.Load()); d != nilIndex; {
		b := tab.cell(d, s.per).batch.Load()
		require.NotZero(t, b>>32, "an empty magazine in the depot")
		require.LessOrEqual(t, b>>32, uint64(magSize))
		chain(magWord(uint32(b>>32), d), "depot")
		d = uint32(b)
	}
	for i := uint32(s.head.Load()); i != nilIndex; i = uint32(tab.cell(i, s.per).link.Load()) {
		add(i, "stack")
	}
	return found
}

// withProcs runs f with GOMAXPROCS set to n, restoring it after.
func withProcs(n int, f func()) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	f()
}

// TestCapacityInOtherPsMagazines: free objects cached in other Ps' magazines, even Ps that no
// longer exist (GOMAXPROCS lowered since), are not lost: a Get on this P drains them before a
// List reports ErrEmpty or a Slab grows, and the counters stay exact.
func TestCapacityInOtherPsMagazines(t *testing.T) {
	const procs = 4
	n := 3*magSize + 5
	var l *List[int]
	var sl *Slab[int]
	withProcs(procs, func() {
		var err error
		l, err = NewList[int](n, nil)
		require.NoError(t, err)
		sl, err = NewSlab(SlabConfig[int]{ObjectsPerSlab: 8})
		require.NoError(t, err)
	})
	if l.s.mags == nil {
		t.Skip("purego: no per-P magazines")
	}
	require.Len(t, l.s.mags, procs)
	for name, a := range map[string]struct {
		Allocator[int]
		s     *stack[int]
		stats func() Stats
	}{"list": {l, &l.s, l.Stats}, "slab": {sl, &sl.s, sl.Stats}} {
		t.Run("impl="+name, func(t *testing.T) {
			held := make([]*int, 0, n)
			for range n {
				p, err := a.Get()
				require.NoError(t, err)
				held = append(held, p)
			}
			objects := a.stats().Objects
			// Put every object back as if from another P, procs+1 of them: the last is a P
			// beyond the magazines (GOMAXPROCS raised), whose objects go to the free stack.
			for k, p := range held {
				c, i, err := a.s.free(p)
				require.NoError(t, err)
				a.s.putOn(k%(procs+1), c, i)
			}
			assert.Len(t, freeCells(t, a.s), int(objects))
			assert.Equal(t, Stats{InUse: 0, HighWater: int64(n), Objects: objects, Slabs: a.stats().Slabs}, a.stats())
			seen := map[*int]bool{}
			for range n {
				p, err := a.Get()
				require.NoError(t, err, "a free object is cached on another P")
				require.False(t, seen[p], "object handed out twice")
				seen[p] = true
			}
			assert.Equal(t, objects, a.stats().Objects, "no growth while objects were free")
			if name == "list" {
				_, err := a.Get()
				require.ErrorIs(t, err, ErrEmpty)
			}
			for p := range seen {
				require.NoError(t, a.Put(p))
			}
			assert.Zero(t, a.stats().InUse)
			assert.Len(t, freeCells(t, a.s), int(objects))
		})
	}
}

// FuzzMagazines drives a List or a Slab through gets and puts on chosen Ps (getOn and putOn
// called with the P's index, on this one goroutine: a goroutine moving between Ps; P 1 in plain
// mode where available, until a drain revokes it), double puts, and checks against a model after every step: a Get fails (List) or grows (Slab) only
// when every object is in use, no object is handed out twice, Stats (InUse, HighWater, Slabs)
// are exact, and every free cell is in exactly one magazine, the depot or the free stack.
//
// The first byte picks the allocator, the second its size; each later byte is one operation:
// bits 0-1 the kind (get, put, double put, drain), bits 2-3 the P (the fourth: no magazines, as
// a P added after the allocator was made), bits 4-7 an index into the held objects.
func FuzzMagazines(f *testing.F) {
	f.Add([]byte{0, 40, 0, 4, 8, 0, 0, 0, 1, 5, 9, 13, 3, 0, 4, 8})
	f.Add([]byte{1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4})
	f.Add([]byte{0, 3, 0, 0, 0, 1, 17, 33, 4, 8, 12, 2, 6, 0, 4})
	// A List of 40: 20 gets, then 20 puts on P0, which fill its cur past magSize and move it to prev.
	f.Add(append(append([]byte{0, 39}, make([]byte, 20)...), bytes.Repeat([]byte{1}, 20)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		isList, size, ops := in[0]%2 == 0, int(in[1]), in[2:]
		if len(ops) > 512 {
			ops = ops[:512]
		}
		var (
			s        *stack[int]
			capacity = -1
			per      = 1 + size%7
			get      func(id int) *int
			stats    func() Stats
			put      func(id int, p *int) error
		)
		if isList {
			capacity = 1 + size%64
			l, err := NewList[int](capacity, nil)
			require.NoError(t, err)
			s, stats = &l.s, l.Stats
		} else {
			sl, err := NewSlab(SlabConfig[int]{ObjectsPerSlab: per, MaxSlabs: size / 64})
			require.NoError(t, err)
			if size/64 > 0 {
				capacity = per * (size / 64)
			}
			s, stats = &sl.s, sl.Stats
			get = func(id int) *int {
				if c, _ := s.getOn(id); c != nil {
					return &c.obj
				}
				if c, _ := s.getSlowOn(id); c != nil {
					return &c.obj
				}
				p, _ := sl.growGet()
				return p
			}
		}
		if get == nil {
			get = func(id int) *int {
				c, _ := s.getOn(id)
				if c == nil {
					c, _ = s.getSlowOn(id)
				}
				if c == nil {
					return nil
				}
				return &c.obj
			}
		}
		put = func(id int, p *int) error {
			c, i, err := s.free(p)
			if err == nil {
				s.putOn(id, c, i)
			}
			return err
		}
		s.mags = make([]magazines, 3) // three Ps whatever GOMAXPROCS is; id 3 has none
		if s.biased {
			// P 1 starts in plain mode, empty: getOn's and putOn's CASes keep the mode, and a
			// drain that finds cells there revokes it (magazine.go).
			s.mags[1].cur.Store(magPlain)
		}
		var held, freed []*int
		high := 0
		for k, op := range ops {
			id, arg := int(op>>2&3), int(op>>4)
			switch op & 3 {
			case 0:
				p := get(id)
				if capacity >= 0 && len(held) == capacity {
					require.Nil(t, p, "op %d: get with all %d in use", k, capacity)
					continue
				}
				require.NotNil(t, p, "op %d: get with %d of %d in use", k, len(held), capacity)
				for _, q := range held {
					require.True(t, q != p, "op %d: handed out twice", k)
				}
				held = append(held, p)
				high = max(high, len(held))
				for j, q := range freed {
					if q == p {
						freed = append(freed[:j], freed[j+1:]...)
						break
					}
				}
			case 1:
				if len(held) == 0 {
					continue
				}
				j := arg % len(held)
				require.NoError(t, put(id, held[j]), "op %d", k)
				freed = append(freed, held[j])
				held = append(held[:j], held[j+1:]...)
			case 2:
				if len(freed) == 0 {
					continue
				}
				err := put(id, freed[arg%len(freed)])
				require.True(t, errors.Is(err, ErrDoublePut), "op %d: double put: %v", k, err)
			case 3:
				s.drain()
			}
			st := stats()
			want := Stats{InUse: int64(len(held)), HighWater: int64(high), Objects: st.Objects, Slabs: st.Slabs}
			if isList {
				want.Objects, want.Slabs = int64(capacity), 1
			} else {
				want.Slabs = (high + per - 1) / per // grown only when every object was in use
				want.Objects = int64(want.Slabs * per)
			}
			require.Equal(t, want, st, "op %d", k)
			require.Len(t, freeCells(t, s), int(st.Objects)-len(held), "op %d: free cells", k)
		}
	})
}
