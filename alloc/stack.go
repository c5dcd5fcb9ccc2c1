package alloc

import (
	"math"
	"sync/atomic"
)

// The free list shared by Slab and List is a Treiber stack of object indices.
//
// Every object lives in a cell, in a slab (a []cell[T] allocated once and never freed while the
// allocator lives). Cells are numbered from 0 across slabs: cell i is slab i/per, element i%per.
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

// cacheLine is the padding unit: 128 bytes covers 64-byte x86 lines with their adjacent-line
// prefetch and 128-byte arm64 and ppc64 lines.
const cacheLine = 128

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

// slab is one block of cells. Immutable once published.
type slab[T any] struct {
	cells     []cell[T]
	base, end uintptr // address range of cells, for telling own objects
	first     uint32  // index of cells[0]
}

// table is the published set of slabs: replaced, never mutated, so readers need no lock.
type table[T any] struct {
	byIndex []*slab[T] // slab k holds cells [k*per, (k+1)*per)
	byAddr  []*slab[T] // sorted by base, for binary search in find
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
	sl := t.byAddr[lo-1]
	if a >= sl.end {
		return nil, 0
	}
	off := a - sl.base
	size := cellSize[T]()
	if off%size != 0 {
		return nil, 0 // inside a cell but not at an object: not something we handed out
	}
	k := uint32(off / size)
	c := &sl.cells[k]
	if &c.obj != p {
		return nil, 0
	}
	return c, sl.first + k
}

// grow allocates a slab of per cells, publishes it, pushes all but its first cell and returns the
// first, in use. The caller serializes grow calls. init, if not nil, runs on every new object.
func (s *stack[T]) grow(init func(*T)) *cell[T] {
	old := s.tab.Load()
	first := uint32(len(old.byIndex)) * s.per
	sl := &slab[T]{cells: make([]cell[T], s.per), first: first}
	sl.base, sl.end = rangeOf(sl.cells)
	for k := range sl.cells {
		if init != nil {
			init(&sl.cells[k].obj)
		}
		if k+1 < len(sl.cells) {
			sl.cells[k].next.Store(first + uint32(k) + 1)
		}
	}
	nt := &table[T]{
		byIndex: append(old.byIndex[:len(old.byIndex):len(old.byIndex)], sl),
		byAddr:  make([]*slab[T], 0, len(old.byAddr)+1),
	}
	inserted := false
	for _, o := range old.byAddr {
		if !inserted && sl.base < o.base {
			nt.byAddr = append(nt.byAddr, sl)
			inserted = true
		}
		nt.byAddr = append(nt.byAddr, o)
	}
	if !inserted {
		nt.byAddr = append(nt.byAddr, sl)
	}
	// Publish the slab before any of its cells can be seen in head.
	s.tab.Store(nt)
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
