package alloc

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/cacheline"
	"github.com/gosdma/gosdma/internal/membarrier"
	"github.com/gosdma/gosdma/internal/pcpu"
	"github.com/gosdma/gosdma/internal/relaxed"
)

// The free list shared by Slab and List is a Treiber stack of object indices.
//
// Every object lives in a cell, in a slab (per cells, never freed while the allocator lives; laid
// out as cells_unsafe.go says). Cells are numbered from 0 across slabs: cell i is slab i/per,
// element i%per. Slabs are carved, in order, from regions: one allocation holding one slab while
// the allocator is small and, as it grows, an eighth of its slabs so far (see grow); padded cells
// (cells_unsafe.go) come in allocations of at least 32 KiB, which hold as many slabs as fit. A slab is
// created (counted, its objects initialized and freed) only when it is needed; the rest of its
// region waits, zeroed.
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
//
// Each cell has one atomic word, its link, holding its state and its next index together, so a
// Get+Put pair costs at most three locked instructions and no shared counter: the pop's CAS on
// the top (a P's magazine word, magazine.go, or this stack's head), the Put's CAS on the link
// (which checks for a double put and, without a reset hook, writes the magazine word below at
// once) and the push's CAS on the top. In a P's plain mode (magazine.go) the pop and the push
// on the P's magazine are a plain load and store, and the link CAS is the pair's only locked
// instruction: it stays, since two Puts of one object may run on two Ps. The popper's store of
// the in-use state is a store-release (internal/relaxed: a plain MOV on amd64).
//
// The free stack is the layer under the per-P magazines and their depot (magazine.go): grow
// puts new cells here, Gets take untouched cells only from here, and Puts come here only from
// goroutines on a P without magazines (the purego tag, or GOMAXPROCS raised since the allocator
// was made).
//
// Stats counts rather than keeps counters: objects in use are the cells whose link says so, and
// the high-water mark is the number of cells ever handed out (each link keeps a touched bit). The
// second equals the largest number ever in use because untouched cells are always this stack's
// bottom, in index order, and are popped only when no touched cell is free anywhere: Gets take
// touched cells from the magazines, the depot and this stack's top first, and pop an untouched
// cell only after draining every P's magazines (magazine.go). So each pop of an untouched cell
// raises the number in use to a new high (under concurrent use, up to the objects in motion
// between a P and the depot at that moment: see the package documentation). grow keeps the
// order by putting a new slab's cells beneath the free cells (pushBottom).

const nilIndex = math.MaxUint32

// cacheLine is the padding unit (internal/cacheline.Pad, the module's one definition: a cache
// line, and at least two 64-byte lines for the adjacent-line prefetch).
const cacheLine = cacheline.Pad

// Bits of a cell's link word. The flags are its top bits, so that the rest can hold a magazine
// word (magazine.go: a count in bits 36..32 and an index in bits 31..0) as well as a next index.
const (
	linkInUse   uint64 = 1 << 63 // handed out: owned by the caller (else free)
	linkTouched uint64 = 1 << 62 // handed out at least once (counted as the high-water mark)
	linkNext    uint64 = 1<<32 - 1
)

// cell is one object and its free-list bookkeeping. The link and batch words come first, on the
// object's first cache line: a Get reads and writes the link, a Put CASes it, and the caller
// writes the object's first bytes (a txreq's state) between them, so when a Get and its Put run
// on different cores (a producer and a completion goroutine) the link moves with a line that
// moves anyway, instead of with a line of its own (two transfers more per object: measured in
// BenchmarkPacketPath hw=goroutine, where the Get's load of the link and the Put's CAS on it
// were the two hottest instructions). Object addresses map back to cells by arithmetic (obj is
// objOffset bytes into its cell).
type cell[T any] struct {
	// link is linkInUse|linkTouched while the object is handed out; while it is free, the index
	// of the cell below it on the free stack (bits 31..0), or in a magazine the word of the
	// magazine below it (magazine.go), with linkTouched if it was ever handed out. Written
	// by the popper (store-release of the in-use state, once the CAS on head made the cell its own), by
	// Put (CAS from in use to free with the next index: the double-put check), by the pusher
	// (store of a new next index before each retried CAS on head), by grow (new and detached
	// cells, its own), and by runReset's undo; read by poppers for the next index (possibly
	// stale; see above) and by stats.
	link atomic.Uint64
	// batch is used only on the first cell of a magazine in the depot (magazine.go): the
	// magazine's count (bits 63..32) and the first cell of the magazine below it (bits 31..0).
	// Written (store-release) by the goroutine that pushes the magazine, which owns its cells,
	// before its CAS on the depot's head; read by depot poppers, possibly stale (their CAS on the
	// versioned head discards a stale read, as for link). Meaningless on other cells.
	batch atomic.Uint64

	obj T
}

// slab is one block of per cells, a window of a region. Immutable once published.
type slab[T any] struct {
	cells cellRun[T]
}

// region is one allocation of cells, holding one or more slabs. Immutable once published.
type region[T any] struct {
	cells     cellRun[T]
	base, end uintptr // address range of its objects (first object to one stride past the last), for telling own objects
	first     uint32  // index of cells[0]
}

// table is the published set of slabs. A table is never mutated once published, so readers need
// no lock; a new table may share its predecessor's backing arrays (see grow).
type table[T any] struct {
	byIndex []*slab[T]   // slab k holds cells [k*per, (k+1)*per)
	byAddr  []*region[T] // sorted by base, for binary search in find
	// last is the region grow carves slabs from (the newest, and from the second on the
	// largest: it holds an eighth of the slabs before it), or nil before the first grow. find
	// tries it first, so that a Put of an object of a one-region allocator (every List, and a
	// Slab until it outgrows its first region) or of the newest region needs no search.
	last *region[T]
	// lastRun is last's created cells (none before the first grow), lastFirst the index of its
	// first and lastObj that one's object's address: Get's and Put's common case, with no load
	// past the table.
	lastRun   cellRun[T]
	lastObj   uintptr
	lastFirst uint32
}

// stack is the lock-free free list over a growing set of equal-sized slabs.
type stack[T any] struct {
	// head is the tagged top of the free stack (see above). CASed by Gets that take an untouched
	// cell or run on a P without magazines, by Puts on such a P, and by grow: its own cache
	// line.
	_    [cacheLine]byte
	head atomic.Uint64
	_    [cacheLine - 8]byte

	// depot is the tagged top of the stack of full (or drained) magazines (magazine.go): the
	// version in bits 63..32, the first cell of the top magazine in bits 31..0. CASed by Ps that
	// send a full magazine or take one, once per magSize of their Gets or Puts, and by drainers:
	// its own cache line.
	depot atomic.Uint64
	// revokes counts the revocations of a P's plain mode (magazine.go), for the tests: added to
	// by revoking drainers, which write this line anyway, after their barrier.
	revokes atomic.Uint64
	_       [cacheLine - 16]byte

	// mags holds one pair of magazines per P (magazine.go), written as documented there. The
	// slice is set by init and read-only after; nil under the purego tag.
	mags []magazines
	// biased says that Ps may use plain mode (magazine.go: plainCapable, membarrier.Available,
	// and magazines); plainAfter is how many CAS pops and pushes a P makes before it sets plain
	// mode again. Both set by init (tests lower plainAfter before use) and read-only after.
	biased     bool
	plainAfter uint32

	// tab is the published slab table. Store-release by grow (under the owner's lock) before any
	// cell of the new slab is pushed; load-acquire by pop after it saw a cell index in head, so
	// the table it loads holds that cell's slab. Read-mostly.
	tab atomic.Pointer[table[T]]
	per uint32 // cells per slab; immutable
	lay layout // the cells' layout (cells_unsafe.go); immutable

	reset func(*T) // the owner's reset hook, run by put on every object given back, or nil; immutable
	kind  string   // the owner's kind ("slab", "list"), for errors; immutable

	// cur is the region slabs are being carved from, and used how many of its cells are in
	// created slabs. Written and read only by grow, which its callers serialize.
	cur  *region[T]
	used int
}

func pack(version, index uint32) uint64 { return uint64(version)<<32 | uint64(index) }

func (s *stack[T]) init(per uint32, reset func(*T), kind string) {
	s.per, s.reset, s.kind = per, reset, kind
	s.lay = newLayout[T]()
	s.head.Store(pack(0, nilIndex))
	s.depot.Store(pack(0, nilIndex))
	s.mags = newMagazines()
	s.biased = plainCapable && s.mags != nil && membarrier.Available()
	s.plainAfter = plainAfter
	s.tab.Store(&table[T]{})
}

// cell returns cell i. Every Get calls it: it divides only when it must (a List's cells and a
// Slab's first slab are slab 0; a power-of-two per shifts).
func (t *table[T]) cell(i uint32, per uint32) *cell[T] {
	k, j := uint32(0), i
	if i >= per {
		if per&(per-1) == 0 {
			k, j = i>>bits.TrailingZeros32(per), i&(per-1)
		} else {
			k, j = i/per, i%per
		}
	}
	return t.byIndex[k].cells.at(j)
}

// pop takes the top free cell and marks it in use, or returns nil if the stack is empty, or if
// touchedOnly and the top cell was never handed out (magazine.go: such a cell is taken only
// after the per-P magazines were drained).
func (s *stack[T]) pop(touchedOnly bool) *cell[T] {
	for {
		h := s.head.Load()
		i := uint32(h)
		if i == nilIndex {
			return nil
		}
		c := s.tab.Load().cell(i, s.per)
		l := c.link.Load()
		if touchedOnly && l&linkTouched == 0 {
			return nil
		}
		if s.head.CompareAndSwap(h, pack(uint32(h>>32)+1, uint32(l))) {
			// The CAS passed ownership of c to us: nobody else can pop it until it is pushed.
			// A store-release suffices (a plain MOV on amd64): the next reader that matters is
			// the Put that gives c back, on this goroutine or on one the caller handed c to
			// (which orders it after this store), and its CAS sees the store; a stale popper
			// reading c's link fails its CAS on head whatever it reads; stats is a snapshot.
			relaxed.StoreRelease64(&c.link, linkInUse|linkTouched)
			return c
		}
	}
}

// put checks p, marks its cell free, runs the reset hook, and pushes the cell on the calling P's
// magazine (magazine.go), or on the free stack if the P has none.
//
// One CAS on the cell's link checks that the object is in use (the double-put check) and marks
// it free; the push that follows publishes the cell (and everything written to it before) with
// its store or CAS on the magazine word, or its CAS on the free stack's head. Without a reset
// hook, the common case (an object of the newest region, pinned, room in the magazine) folds the
// rest of the link into the link CAS, guessed from the magazine word loaded before, inside the
// owner's section (magazine.go): in plain mode the guess is right and the push is a plain store;
// otherwise the push is a CAS, and if a drainer emptied the magazine in between, putLocal writes
// the link again. With a reset hook, the hook (the caller's code) runs unpinned, after the link
// CAS (free) and before the push (putSlow).
func (s *stack[T]) put(p *T) error {
	if s.reset == nil {
		t := s.tab.Load()
		if t == nil { // the zero value of List or Slab: nothing of it was handed out
			return s.putError(p, ErrForeign)
		}
		if q := s.lay.quot(addrOf(p) - t.lastObj); q < uint64(t.lastRun.n) { // find's common case
			c, i := cellOf(p), t.lastFirst+uint32(q)
			id := pcpu.Pin()
			if uint(id) < uint(len(s.mags)) {
				m := &s.mags[id]
				stop := m.enter()
				w := m.cur.Load()
				// Plain mode with room (w^magPlain < magSize<<32: magPlain set, fewer than
				// magSize cells; magSize is a power of two) and no revocation under way
				// (stop == 0), tested at once: cur is ours (magazine.go).
				if (w^magPlain)/(magSize<<32)|uint64(stop) == 0 {
					// The link is the word pushed on (magPlain is linkTouched).
					if !c.link.CompareAndSwap(linkInUse|linkTouched, w) {
						m.leave()
						pcpu.Unpin()
						return s.refused(p, c)
					}
					relaxed.StoreRelease64(&m.cur, magPush(w, i))
					m.leave()
					pcpu.Unpin()
					return nil
				}
				m.leave()
				if w&^magPlain < magSize<<32 { // room: fewer than magSize cells
					if !c.link.CompareAndSwap(linkInUse|linkTouched, linkTouched|w) {
						pcpu.Unpin()
						return s.refused(p, c)
					}
					if nw := magPush(w, i); !m.cur.CompareAndSwap(w, nw) {
						s.putLocal(m, c, i) // a drainer emptied cur: link again
					} else if w < magPlain {
						s.calmed(m, nw)
					}
					pcpu.Unpin()
					return nil
				}
			}
			pcpu.Unpin()
		}
	}
	return s.putSlow(p)
}

// putSlow is put's general case: free, then a push on the P's magazines or the free stack.
func (s *stack[T]) putSlow(p *T) error {
	c, i, err := s.free(p)
	if err != nil {
		return err
	}
	id := pcpu.Pin()
	s.putOn(id, c, i)
	pcpu.Unpin()
	return nil
}

// putError returns the error of a refused Put of p.
func (s *stack[T]) putError(p *T, err error) error {
	return &PutError{Allocator: s.kind, Addr: addrOf(p), Err: err}
}

// refused returns the error of a Put of p, whose cell c is free (its link CAS failed): ErrForeign
// if c was never handed out (a Slab's Init hook sees every object before any Get: the object is
// the allocator's, but no Get gave it to the caller), else ErrDoublePut. A Get racing with the
// refused Put may touch c meanwhile: the Put was then of an object it did not own either way.
func (s *stack[T]) refused(p *T, c *cell[T]) error {
	if c.link.Load()&linkTouched == 0 {
		return s.putError(p, ErrForeign)
	}
	return s.putError(p, ErrDoublePut)
}

// free is put's first half: it finds p's cell, marks it free (the double-put check) and runs the
// reset hook. The caller then owns the free cell until it pushes it.
func (s *stack[T]) free(p *T) (*cell[T], uint32, error) {
	c, i := s.find(p)
	if c == nil {
		return nil, 0, s.putError(p, ErrForeign)
	}
	if !c.link.CompareAndSwap(linkInUse|linkTouched, linkTouched|uint64(nilIndex)) {
		return nil, 0, s.refused(p, c)
	}
	if s.reset != nil {
		runReset(s.reset, &c.obj, func() { c.link.Store(linkInUse | linkTouched) })
	}
	return c, i, nil
}

// push puts the free cell c (index i), which the caller owns, on the free stack.
func (s *stack[T]) push(c *cell[T], i uint32) {
	for {
		h := s.head.Load()
		// c is ours until the CAS publishes it (and the link with it).
		relaxed.StoreRelease64(&c.link, linkTouched|uint64(uint32(h)))
		if s.head.CompareAndSwap(h, pack(uint32(h>>32)+1, i)) {
			return
		}
	}
}

// pushBottom puts a chain of new, free cells (linked from top through their links, the last one's
// next nilIndex) beneath every free cell, so that untouched cells stay the stack's bottom (see
// the notes above). It detaches the whole free stack with one CAS (its cells are then its own:
// poppers that saw them fail their CAS on the changed version), links it above the chain, and
// installs the result with a CAS that expects an empty stack; cells pushed meanwhile are detached
// in turn. Pops that find the stack empty in between wait on their allocator's grow lock, which
// the caller holds, and find it full after. The caller serializes pushBottom with grow.
func (s *stack[T]) pushBottom(top uint32) {
	for {
		h := s.head.Load()
		i := uint32(h)
		if i == nilIndex {
			if s.head.CompareAndSwap(h, pack(uint32(h>>32)+1, top)) {
				return
			}
			continue
		}
		if !s.head.CompareAndSwap(h, pack(uint32(h>>32)+1, nilIndex)) {
			continue
		}
		t := s.tab.Load()
		end := t.cell(i, s.per)
		for {
			l := end.link.Load()
			if uint32(l) == nilIndex {
				end.link.Store(l&^linkNext | uint64(top))
				break
			}
			end = t.cell(uint32(l), s.per)
		}
		top = i
	}
}

// runReset runs the caller's reset hook on obj, whose state the Put has just turned free. If the
// hook panics, the Put did not happen: undo marks the object in use again before the panic goes
// on, so the object is neither lost to the allocator nor refused as a double put; the caller still
// owns it and may put it back once more.
func runReset[T any](reset func(*T), obj *T, undo func()) {
	done := false
	defer func() {
		if !done {
			undo()
		}
	}()
	reset(obj)
	done = true
}

// find returns the cell whose object p points to, and its index, or nil if p is not one.
func (s *stack[T]) find(p *T) (*cell[T], uint32) {
	t := s.tab.Load()
	if p == nil || t == nil { // t: the zero value of List or Slab, which owns nothing
		return nil, 0
	}
	a := addrOf(p)
	if q := s.lay.quot(a - t.lastObj); q < uint64(t.lastRun.n) { // an object of the newest region
		return cellOf(p), t.lastFirst + uint32(q)
	}
	r := t.region(a)
	if r == nil {
		return nil, 0
	}
	// An object of r, in a created slab: the regions before the newest are wholly created.
	if q := s.lay.quot(a - r.base); q < uint64(r.cells.n) && r != t.last {
		return cellOf(p), r.first + uint32(q)
	}
	return nil, 0
}

// region returns the region whose cells hold address a, or nil: a binary search of byAddr.
func (t *table[T]) region(a uintptr) *region[T] {
	// The last region whose base <= a.
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
		return nil
	}
	if r := t.byAddr[lo-1]; a < r.end {
		return r
	}
	return nil
}

// grow creates a slab of per cells, publishes it and pushes its cells, free, beneath the free
// cells (pushBottom). The caller serializes grow calls, and passes room, the most slabs the
// allocator may still create (at least 1). init, if not nil, runs on every new object.
//
// Growing must not cost a copy of the table per slab (that made growing to n slabs O(n²)):
//   - the slab comes from the current region, and a new region, when one is needed, holds an
//     eighth of the slabs so far (at least one, or for padded cells as many as its least
//     allocation holds; at most room), so byAddr, which lists regions, changes O(log n) times;
//   - the new table appends to the old one's slices in place when they have room. Readers of the
//     old table never look past its lengths, and grow (serialized, always on the latest table)
//     writes only past them.
func (s *stack[T]) grow(init func(*T), room int) {
	old := s.tab.Load()
	per := int(s.per)
	first := uint32(len(old.byIndex)) * s.per
	byAddr := old.byAddr
	// cur and used become s.cur and s.used once init has run on every new object: if it
	// panics, the Slab is as it was (the window is carved again, zeroed, by the next grow).
	cur, used := s.cur, s.used
	if cur == nil || used+per > cur.cells.n {
		slabs := max(1, len(old.byIndex)/8)
		if s.lay.padded {
			// newCells allocates padded cells as a large object (at least largeObject bytes,
			// to start on a page) however few are asked for: carve as many slabs from it as it
			// holds, instead of a 32 KiB allocation per slab while the Slab is small.
			slabs = max(slabs, s.lay.minCells()/per)
		}
		slabs = min(slabs, room)
		r := &region[T]{cells: newCells[T](slabs*per, s.lay), first: first}
		r.base, r.end = r.cells.objects()
		if n := len(byAddr); n == 0 || byAddr[n-1].base < r.base {
			byAddr = append(byAddr, r)
		} else {
			k, _ := slices.BinarySearchFunc(byAddr, r.base, func(o *region[T], b uintptr) int { return cmp.Compare(o.base, b) })
			byAddr = slices.Insert(slices.Clip(byAddr), k, r) // a copy: old's array is unchanged
		}
		cur, used = r, 0
	}
	sl := &slab[T]{cells: cur.cells.window(used, used+per)}
	used += per
	created := false
	defer func() {
		if !created { // init panicked: undo its writes and ours
			for k := range sl.cells.n {
				c := sl.cells.at(uint32(k))
				var zero T
				c.obj = zero
				c.link.Store(0)
			}
		}
	}()
	for k := range sl.cells.n {
		c := sl.cells.at(uint32(k))
		if init != nil {
			init(&c.obj)
		}
		next := uint32(nilIndex)
		if k+1 < sl.cells.n {
			next = first + uint32(k) + 1
		}
		c.link.Store(uint64(next))
	}
	created = true
	s.cur, s.used = cur, used
	// Publish the slab before any of its cells can be seen in head.
	r := cur
	s.tab.Store(&table[T]{
		byIndex: append(old.byIndex, sl), byAddr: byAddr, last: r,
		lastRun: r.cells.window(0, s.used), lastObj: r.base, lastFirst: r.first,
	})
	s.pushBottom(first)
}

// objects returns the number of objects in created slabs.
func (s *stack[T]) objects() int64 {
	return int64(len(s.tab.Load().byIndex)) * int64(s.per)
}

// stats counts the objects in use and those ever handed out (the high-water mark; see the notes
// above) by reading every cell's link: O(Objects), with no counter on the Get and Put paths.
func (s *stack[T]) stats() Stats {
	t := s.tab.Load()
	if t == nil { // the zero value of List or Slab: nothing
		return Stats{}
	}
	var inUse, touched int64
	for _, sl := range t.byIndex {
		for k := range sl.cells.n {
			l := sl.cells.at(uint32(k)).link.Load()
			if l&linkInUse != 0 {
				inUse++
			}
			if l&linkTouched != 0 {
				touched++
			}
		}
	}
	return Stats{
		InUse:     inUse,
		HighWater: touched,
		Objects:   int64(len(t.byIndex)) * int64(s.per),
		Slabs:     len(t.byIndex),
	}
}
