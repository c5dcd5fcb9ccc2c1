package alloc

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/cacheline"
)

// The free list shared by Slab and List is a Treiber stack of object indices.
//
// Every object lives in a cell, in a slab (per cells, never freed while the allocator lives).
// Cells are numbered from 0 across slabs: cell i is slab i/per, element i%per. Slabs are carved,
// in order, from regions: one []cell[T] allocation holding one slab while the allocator is small
// and, as it grows, an eighth of its slabs so far (see grow). A slab is created (counted, its
// objects initialized and freed) only when it is needed; the rest of its region waits, zeroed.
// The head word packs, in one uint64 so a single CAS moves both,
//
//	bits 63..32  version: incremented by every successful CAS on the head
//	bits 31..0   index of the top free cell, or nilIndex for an empty stack
//
// A pop reads head h, then the top cell's next, then CASes head from h to (version+1, next). The
// classic ABA failure (the top is popped, others pushed and popped, the same top pushed back with a
// different next, and the stale CAS succeeds) cannot happen: any of those operations changed the
// version, so the stale CAS fails. It could succeed only if a pop stalled between its load and its
// CAS for exactly a multiple of 2^32 head operations.
//
// Indices rather than pointers keep the tag and the top in one word on every architecture, and the
// next links are atomics, so a pop reading the next of a cell that a concurrent push is rewriting
// is a benign (and race-detector-clean) stale read that the failed CAS discards.

const nilIndex = math.MaxUint32

// cacheLine is the padding unit (internal/cacheline.Pad, the module's one definition: a cache
// line, and at least two 64-byte lines for the adjacent-line prefetch).
const cacheLine = cacheline.Pad

// cell is one object and its free-list bookkeeping. obj is first, so &cell.obj == &cell and
// object addresses map back to cells by arithmetic.
type cell[T any] struct {
	obj T
	// next is the index of the cell below this one on the free stack. Written by the pusher
	// before the CAS that publishes the cell; read by poppers (possibly stale; see above).
	next atomic.Uint32
	// state is stateFree or stateInUse. Written by the popper (free to in-use, once the cell is
	// its own) and by Put (in-use to free, by CAS: the double-put check).
	state atomic.Uint32
}

// slab is one block of per cells, a window of a region. Immutable once published.
type slab[T any] struct {
	cells []cell[T]
}

// region is one allocation of cells, holding one or more slabs. Immutable once published.
type region[T any] struct {
	cells     []cell[T]
	base, end uintptr // address range of cells, for telling own objects
	first     uint32  // index of cells[0]
}

// table is the published set of slabs. A table is never mutated once published, so readers need
// no lock; a new table may share its predecessor's backing arrays (see grow).
type table[T any] struct {
	byIndex []*slab[T]   // slab k holds cells [k*per, (k+1)*per)
	byAddr  []*region[T] // sorted by base, for binary search in find
}

// stack is the lock-free free list over a growing set of equal-sized slabs.
type stack[T any] struct {
	// head is the tagged top of the free stack (see above). Every Get and Put CASes it: its own
	// cache line.
	_    [cacheLine]byte
	head atomic.Uint64
	_    [cacheLine - 8]byte

	// tab is the published slab table. Store-release by grow (under the owner's lock) before any
	// cell of the new slab is pushed; load-acquire by pop after it saw a cell index in head, so
	// the table it loads holds that cell's slab. Read-mostly.
	tab atomic.Pointer[table[T]]
	per uint32 // cells per slab; immutable

	// cur is the region slabs are being carved from, and used how many of its cells are in
	// created slabs. Written and read only by grow, which its callers serialize.
	cur  *region[T]
	used int

	// counters: written by every Get and Put.
	_     [cacheLine]byte
	count counters
	_     [cacheLine]byte
}

func pack(version, index uint32) uint64 { return uint64(version)<<32 | uint64(index) }

func (s *stack[T]) init(per uint32) {
	s.per = per
	s.head.Store(pack(0, nilIndex))
	s.tab.Store(&table[T]{})
}

func (t *table[T]) cell(i uint32, per uint32) *cell[T] {
	return &t.byIndex[i/per].cells[i%per]
}

// pop takes the top free cell and marks it in use, or returns nil if the stack is empty.
func (s *stack[T]) pop() *cell[T] {
	for {
		h := s.head.Load()
		i := uint32(h)
		if i == nilIndex {
			return nil
		}
		c := s.tab.Load().cell(i, s.per)
		next := c.next.Load()
		if s.head.CompareAndSwap(h, pack(uint32(h>>32)+1, next)) {
			// The CAS passed ownership of c to us: nobody else can pop it until it is pushed.
			c.state.Store(stateInUse)
			s.count.got()
			return c
		}
	}
}

// pushChain pushes cells first..last, already linked through next from first down to last, with
// one CAS. The CAS publishes the cells (and everything written to them before it) to the next pop.
func (s *stack[T]) pushChain(first uint32, last *cell[T]) {
	for {
		h := s.head.Load()
		last.next.Store(uint32(h))
		if s.head.CompareAndSwap(h, pack(uint32(h>>32)+1, first)) {
			return
		}
	}
}

// put checks p, marks its cell free, resets it and pushes it. kind names the allocator in errors.
func (s *stack[T]) put(p *T, reset func(*T), kind string) error {
	c, i := s.find(p)
	if c == nil {
		return &PutError{Allocator: kind, Addr: addrOf(p), Err: ErrForeign}
	}
	if !c.state.CompareAndSwap(stateInUse, stateFree) {
		return &PutError{Allocator: kind, Addr: addrOf(p), Err: ErrDoublePut}
	}
	s.count.put()
	if reset != nil {
		runReset(reset, &c.obj, &c.state, &s.count)
	}
	s.pushChain(i, c)
	return nil
}

// runReset runs the caller's reset hook on obj, whose state word the Put has just turned free. If
// the hook panics, the Put did not happen: runReset marks the object in use again (and counts it
// back in, if count is not nil) before the panic goes on, so the object is neither lost to the
// allocator nor refused as a double put; the caller still owns it and may put it back once more.
func runReset[T any](reset func(*T), obj *T, state *atomic.Uint32, count *counters) {
	done := false
	defer func() {
		if !done {
			state.Store(stateInUse)
			if count != nil {
				count.got()
			}
		}
	}()
	reset(obj)
	done = true
}

// find returns the cell whose object p points to, and its index, or nil if p is not one.
func (s *stack[T]) find(p *T) (*cell[T], uint32) {
	if p == nil {
		return nil, 0
	}
	a := addrOf(p)
	t := s.tab.Load()
	// Binary search for the last slab whose base <= a.
	lo, hi := 0, len(t.byAddr)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.byAddr[m].base <= a {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return nil, 0
	}
	r := t.byAddr[lo-1]
	if a >= r.end {
		return nil, 0
	}
	off := a - r.base
	size := cellSize[T]()
	if off%size != 0 {
		return nil, 0 // inside a cell but not at an object: not something we handed out
	}
	k := uint32(off / size)
	c := &r.cells[k]
	if &c.obj != p {
		return nil, 0
	}
	if i := r.first + k; i < uint32(len(t.byIndex))*s.per {
		return c, i
	}
	return nil, 0 // in the region's uncreated tail: never handed out
}

// grow creates a slab of per cells, publishes it, pushes all but its first cell and returns the
// first, in use. The caller serializes grow calls, and passes room, the most slabs the allocator
// may still create (at least 1). init, if not nil, runs on every new object.
//
// Growing must not cost a copy of the table per slab (that made growing to n slabs O(n²)):
//   - the slab comes from the current region, and a new region, when one is needed, holds an
//     eighth of the slabs so far (at least one, at most room), so byAddr, which lists regions,
//     changes O(log n) times;
//   - the new table appends to the old one's slices in place when they have room. Readers of the
//     old table never look past its lengths, and grow (serialized, always on the latest table)
//     writes only past them.
func (s *stack[T]) grow(init func(*T), room int) *cell[T] {
	old := s.tab.Load()
	per := int(s.per)
	first := uint32(len(old.byIndex)) * s.per
	byAddr := old.byAddr
	if s.cur == nil || s.used+per > len(s.cur.cells) {
		slabs := min(max(1, len(old.byIndex)/8), room)
		r := &region[T]{cells: make([]cell[T], slabs*per), first: first}
		r.base, r.end = rangeOf(r.cells)
		if n := len(byAddr); n == 0 || byAddr[n-1].base < r.base {
			byAddr = append(byAddr, r)
		} else {
			k, _ := slices.BinarySearchFunc(byAddr, r.base, func(o *region[T], b uintptr) int { return cmp.Compare(o.base, b) })
			byAddr = slices.Insert(slices.Clip(byAddr), k, r) // a copy: old's array is unchanged
		}
		s.cur, s.used = r, 0
	}
	sl := &slab[T]{cells: s.cur.cells[s.used : s.used+per : s.used+per]}
	s.used += per
	for k := range sl.cells {
		if init != nil {
			init(&sl.cells[k].obj)
		}
		if k+1 < len(sl.cells) {
			sl.cells[k].next.Store(first + uint32(k) + 1)
		}
	}
	// Publish the slab before any of its cells can be seen in head.
	s.tab.Store(&table[T]{byIndex: append(old.byIndex, sl), byAddr: byAddr})
	c := &sl.cells[0]
	c.state.Store(stateInUse)
	s.count.got()
	if s.per > 1 {
		s.pushChain(first+1, &sl.cells[s.per-1])
	}
	return c
}

func (s *stack[T]) stats() Stats {
	t := s.tab.Load()
	return Stats{
		InUse:     s.count.inUse.Load(),
		HighWater: s.count.high.Load(),
		Objects:   int64(len(t.byIndex)) * int64(s.per),
		Slabs:     len(t.byIndex),
	}
}
