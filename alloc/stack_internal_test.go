package alloc

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeadOwnCacheLine: the head word, CASed by every Get and Put, shares its cache line with
// nothing.
func TestHeadOwnCacheLine(t *testing.T) {
	var s stack[int]
	head := unsafe.Offsetof(s.head)
	assert.GreaterOrEqual(t, head, uintptr(cacheLine))
	assert.GreaterOrEqual(t, unsafe.Offsetof(s.tab)-head, uintptr(cacheLine))
}

// TestVersionWrap starts a tagged head's version just below the 32-bit wrap, so concurrent gets
// and puts carry it across; the allocator must neither lose nor duplicate an object. It runs on
// the free stack's head alone (no per-P magazines) and on the depot's head (every goroutine gets
// and puts back bursts longer than two magazines, so full magazines go through the depot).
func TestVersionWrap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n, burst int
		head     func(*stack[int]) *atomic.Uint64
	}{
		{"head=stack", 6, 1, func(s *stack[int]) *atomic.Uint64 { return &s.head }},
		{"head=depot", 8 * magSize, 3*magSize - 1, func(s *stack[int]) *atomic.Uint64 { return &s.depot }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewList[int](tc.n, nil)
			require.NoError(t, err)
			if tc.burst == 1 {
				l.s.mags = nil
			} else if l.s.mags == nil {
				t.Skip("purego: no per-P magazines, no depot")
			}
			head := tc.head(&l.s)
			head.Store(pack(math.MaxUint32-100, uint32(head.Load())))
			versionWrapRun(t, l, tc.n, tc.burst)
			assert.Less(t, uint32(head.Load()>>32), uint32(math.MaxUint32-100), "the version wrapped")
		})
	}
}

// versionWrapRun has 4 goroutines get up to burst objects each and put them back, many times,
// checking that no object is held twice; then that all n are free, each once.
func versionWrapRun(t *testing.T, l *List[int], n, burst int) {
	workers, rounds := 4, 2000/burst+100
	if testing.Short() {
		rounds = 500/burst + 100
	}
	var wg sync.WaitGroup
	owners := make([]atomic.Bool, n)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held := make([]*int, 0, burst)
			for range rounds {
				for len(held) < burst {
					p, err := l.Get()
					if err != nil {
						break
					}
					c, i := l.s.find(p)
					if !assert.NotNil(t, c) || !assert.True(t, owners[i].CompareAndSwap(false, true), "object %d handed out twice", i) {
						return
					}
					held = append(held, p)
				}
				if len(held) == 0 {
					runtime.Gosched()
				}
				for _, p := range held {
					_, i := l.s.find(p)
					owners[i].Store(false)
					if !assert.NoError(t, l.Put(p)) {
						return
					}
				}
				held = held[:0]
			}
		}()
	}
	wg.Wait()
	seen := map[*int]bool{}
	for range n {
		p, err := l.Get()
		require.NoError(t, err)
		require.False(t, seen[p])
		seen[p] = true
	}
	_, err := l.Get()
	require.ErrorIs(t, err, ErrEmpty)
}

// TestABA replays the classic ABA interleaving by hand: a pop reads the head and the top's next,
// stalls while others pop the top and its next and push the top back, then CASes. The version in
// the head must make that CAS fail.
func TestABA(t *testing.T) {
	l, err := NewList[int](3, nil)
	require.NoError(t, err)
	l.s.mags = nil // the free stack alone: no per-P magazines
	s := &l.s
	h := s.head.Load()
	top := s.tab.Load().cell(uint32(h), s.per)
	staleNext := uint32(top.link.Load())

	a := s.pop(false) // the top
	b := s.pop(false) // its next
	require.Same(t, top, a)
	require.NoError(t, l.Put(&a.obj)) // the same top back, now with a different next
	assert.Equal(t, uint32(h), uint32(s.head.Load()), "same top index as the stale pop saw")

	assert.False(t, s.head.CompareAndSwap(h, pack(uint32(h>>32)+1, staleNext)), "stale CAS must fail")
	require.NoError(t, l.Put(&b.obj))
}

// TestPoolRegistryPrunes: chunks the garbage collector took leave the registry when the next chunk
// is added.
func TestPoolRegistryPrunes(t *testing.T) {
	p := NewPool[[64]byte](nil)
	for range 20 {
		var held []*[64]byte
		for range 4 * poolChunk {
			o, _ := p.Get()
			held = append(held, o)
		}
		for _, o := range held {
			require.NoError(t, p.Put(o))
		}
	}
	before := len(*p.reg.Load())
	for range 3 {
		runtime.GC()
	}
	o, err := p.Get()
	require.NoError(t, err)
	after := len(*p.reg.Load())
	t.Logf("registry: %d chunks before GC, %d after", before, after)
	assert.Less(t, after, before)
	require.NoError(t, p.Put(o))
}

// TestPoolForeignInCollectedChunk: once the garbage collector has taken a chunk, its memory may
// hold an unrelated object at the very address a cell had, while the registry still lists the
// chunk's range (entries are pruned only when the next chunk is added). Put must refuse such an
// object as foreign: the weak pointer, not the address range, decides.
func TestPoolForeignInCollectedChunk(t *testing.T) {
	p := NewPool[int64](nil)
	func() {
		held := make([]*int64, 0, 64*poolChunk)
		for range cap(held) {
			o, _ := p.Get()
			held = append(held, o)
		}
		for _, o := range held {
			require.NoError(t, p.Put(o))
		}
	}()
	for range 3 {
		runtime.GC() // the sync.Pool's primary and victim caches go, then the chunks
	}
	stale := map[uintptr]bool{}
	for _, r := range *p.reg.Load() {
		if r.w.Value() == nil {
			stale[r.base] = true
		}
	}
	if len(stale) == 0 {
		t.Skip("the garbage collector took no chunk")
	}
	// Unrelated objects of the chunk's size and layout, from the same size class: some land
	// where collected chunks were. Each looks like a free cell of ours (state 0).
	hits := 0
	var keep []*chunk[int64]
	for range 1 << 14 {
		f := new(chunk[int64])
		keep = append(keep, f)
		if base, _ := rangeOf(f.cells[:]); stale[base] {
			hits++
			for k := range f.cells {
				require.ErrorIs(t, p.Put(&f.cells[k].obj), ErrForeign)
			}
		}
	}
	runtime.KeepAlive(keep)
	t.Logf("%d stale chunks, %d reused by foreign objects", len(stale), hits)
	if hits == 0 {
		t.Skip("no foreign object landed in a collected chunk's memory")
	}
}

// TestPoolGrowthAmortized: a Pool grown to n objects held at once replaces its registry (a copy
// of every entry) O(log n) times, not once per chunk (which made growing O(n²)), and allocates at
// most about an eighth more objects than it needed.
func TestPoolGrowthAmortized(t *testing.T) {
	n := 1 << 16
	if testing.Short() {
		n = 1 << 13
	}
	p := NewPool[int64](nil)
	held := make([]*int64, 0, n)
	grows := 0
	last := p.reg.Load()
	for range n {
		o, err := p.Get()
		require.NoError(t, err)
		held = append(held, o)
		if r := p.reg.Load(); r != last {
			grows++
			last = r
		}
	}
	reg := *p.reg.Load()
	st := p.Stats()
	t.Logf("%d objects held: %d registry replacements, %d chunks registered, %d objects made", n, grows, len(reg), st.Objects)
	// One chunk at a time up to 2*poolBatchDiv chunks, then a ninth more each time: about 15 +
	// ln(n/8/16)/ln(9/8) growths. Twice that leaves room for the race detector's dropped Puts.
	bound := 2 * (2*poolBatchDiv + int(math.Log(float64(n)/poolChunk/16)/math.Log(1+1.0/poolBatchDiv)) + 1)
	assert.LessOrEqual(t, grows, bound)
	if !raceOn { // under -race, dropped Puts make chunks that nobody holds
		assert.Equal(t, int64(len(reg)), st.Objects/poolChunk, "every chunk made is registered")
		assert.LessOrEqual(t, st.Objects, int64(n+n/poolBatchDiv+poolChunk))
	}
	// Sorted and disjoint, for the binary search in find.
	for i := 1; i < len(reg); i++ {
		require.GreaterOrEqual(t, reg[i].base, reg[i-1].end)
	}
	for _, o := range held {
		require.NoError(t, p.Put(o))
	}
}

// TestSlabGrowthAmortized: growing a Slab to n slabs carves them from O(log n) regions and copies
// the slab index O(log n) times (it used to copy both tables per slab: O(n²), minutes for 10^5
// one-object slabs). Regions stay sorted and disjoint for find; the uncreated tail of the last
// region is never handed out and never told as the Slab's.
func TestSlabGrowthAmortized(t *testing.T) {
	n := 1 << 15
	if testing.Short() {
		n = 1 << 12
	}
	s, err := NewSlab(SlabConfig[int64]{ObjectsPerSlab: 1})
	require.NoError(t, err)
	held := make([]*int64, 0, n)
	seen := make(map[*int64]bool, n)
	copies := 0
	last := s.s.tab.Load()
	for range n {
		o, err := s.Get()
		require.NoError(t, err)
		require.False(t, seen[o], "object handed out twice")
		seen[o] = true
		held = append(held, o)
		if tb := s.s.tab.Load(); len(last.byIndex) > 0 && &tb.byIndex[0] != &last.byIndex[0] {
			copies++
		}
		last = s.s.tab.Load()
	}
	tab := s.s.tab.Load()
	logn := math.Log(float64(n))
	t.Logf("%d slabs: %d regions, %d index copies", n, len(tab.byAddr), copies)
	// One slab per region up to 16 slabs, then a ninth more per region.
	assert.LessOrEqual(t, len(tab.byAddr), 16+int(logn/math.Log(1+1.0/8))+1)
	assert.LessOrEqual(t, copies, 2*int(logn/math.Log(1.25))+2, "the index grows by appending")
	assert.Equal(t, Stats{InUse: int64(n), HighWater: int64(n), Objects: int64(n), Slabs: n}, s.Stats())
	for i := 1; i < len(tab.byAddr); i++ {
		require.GreaterOrEqual(t, tab.byAddr[i].base, tab.byAddr[i-1].end)
	}
	for _, o := range held {
		require.True(t, s.Owns(o))
	}
	if s.s.used == s.s.cur.cells.n { // the last region is full: one more Get starts the next
		o, err := s.Get()
		require.NoError(t, err)
		held = append(held, o)
	}
	require.Less(t, s.s.used, s.s.cur.cells.n)
	tail := &s.s.cur.cells.at(uint32(s.s.used)).obj
	assert.False(t, s.Owns(tail), "an uncreated cell is not an object")
	require.ErrorIs(t, s.Put(tail), ErrForeign)
	for _, o := range held {
		require.NoError(t, s.Put(o))
	}
	assert.Equal(t, int64(0), s.Stats().InUse)
}

// TestGrowBeneathFree: grow puts a new slab's cells beneath the free ones, so a Get takes an
// object put back while the slab was growing before it touches a new one, and the high-water mark
// (the number of objects ever handed out) stays the largest number ever in use. It replays by hand
// the race in which a Put lands between a Get's failed pop and its grow.
func TestGrowBeneathFree(t *testing.T) {
	s, err := NewSlab(SlabConfig[int]{ObjectsPerSlab: 2})
	require.NoError(t, err)
	a, err := s.Get()
	require.NoError(t, err)
	b, err := s.Get()
	require.NoError(t, err)
	require.Nil(t, s.s.pop(false), "all in use: the Get that finds this would grow")
	require.NoError(t, s.Put(a)) // a Put in the window
	s.mu.Lock()
	s.s.grow(nil, 1)
	s.mu.Unlock()
	assert.Equal(t, Stats{InUse: 1, HighWater: 2, Objects: 4, Slabs: 2}, s.Stats())

	got, err := s.Get()
	require.NoError(t, err)
	assert.Same(t, a, got, "the object put back first, above the new slab")
	assert.Equal(t, Stats{InUse: 2, HighWater: 2, Objects: 4, Slabs: 2}, s.Stats())
	c, err := s.Get()
	require.NoError(t, err)
	d, err := s.Get()
	require.NoError(t, err)
	_, i := s.s.find(c)
	_, j := s.s.find(d)
	assert.Equal(t, []uint32{2, 3}, []uint32{i, j}, "new cells in index order")
	assert.Equal(t, Stats{InUse: 4, HighWater: 4, Objects: 4, Slabs: 2}, s.Stats())
	for _, o := range []*int{a, b, c, d} {
		require.NoError(t, s.Put(o))
	}
	assert.Equal(t, Stats{InUse: 0, HighWater: 4, Objects: 4, Slabs: 2}, s.Stats())
}

// TestPutRetriesNext: a Put whose head moved between its guess of the next index and its push
// (here: a Get and a Put by others while its reset hook runs) links the cell to the new top, so
// no object is lost or handed out twice.
func TestPutRetriesNext(t *testing.T) {
	var inner func()
	l, err := NewList(3, func(*int) {
		if inner != nil {
			f := inner
			inner = nil
			f()
		}
	})
	require.NoError(t, err)
	x, err := l.Get()
	require.NoError(t, err)
	y, err := l.Get()
	require.NoError(t, err)
	inner = func() { // runs inside Put(x), after x's link was guessed
		require.NoError(t, l.Put(y))
		z, err := l.Get()
		require.NoError(t, err)
		require.Same(t, y, z)
		w, err := l.Get()
		require.NoError(t, err)
		require.NoError(t, l.Put(z))
		require.NoError(t, l.Put(w))
	}
	require.NoError(t, l.Put(x))
	seen := map[*int]bool{}
	for range 3 {
		p, err := l.Get()
		require.NoError(t, err)
		require.False(t, seen[p], "object free twice")
		seen[p] = true
	}
	_, err = l.Get()
	require.ErrorIs(t, err, ErrEmpty)
	assert.Equal(t, Stats{InUse: 3, HighWater: 3, Objects: 3, Slabs: 1}, l.Stats())
}
