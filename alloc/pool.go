package alloc

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/gosdma/gosdma/internal/relaxed"
)

// poolChunk is how many objects a chunk holds. A chunk goes back to the garbage collector only
// when all its objects are idle and dropped by the sync.Pool, so small chunks give memory back
// sooner; larger ones amortize the allocation and the registry.
const poolChunk = 8

// poolBatchDiv sets how many chunks Pool allocates when it runs dry: one per poolBatchDiv live
// chunks (at least one). Each growth copies the registry, so growing one chunk at a time would
// cost O(n²) for n chunks; growing by a fixed fraction makes it O(n) in all (a few dozen growths
// per tenfold), for at most 1/poolBatchDiv more objects than the peak needed.
const poolBatchDiv = 8

// poolCell is one Pool object and its state word (stateFree or stateInUse; written by Get with a
// store-release once the cell is its own, and by Put with a CAS: the double-put check).
type poolCell[T any] struct {
	obj   T
	state atomic.Uint32
}

type chunk[T any] struct {
	cells [poolChunk]poolCell[T]
}

// chunkRef records a chunk without keeping it alive: once the garbage collector takes the chunk,
// w yields nil, and its address range no longer counts as ours even if the memory is reused.
type chunkRef[T any] struct {
	base, end uintptr
	w         weak.Pointer[chunk[T]]
}

// Pool is an elastic allocator backed by a [sync.Pool]: Get re-uses an idle object if the
// sync.Pool has one and allocates otherwise, and idle objects may be taken back by the garbage
// collector. It suits callers who prefer memory back over determinism; it never returns ErrEmpty.
//
// Pool still detects misuse: every object carries a state word (double put), and Pool keeps a
// weak registry of the memory it allocated (objects come in chunks of 8, and chunks in batches of
// an eighth of the live ones, so growing costs O(1) per object), so Put tells its own objects from
// foreign ones without keeping idle memory alive.
//
// [Pool.Stats] reports the objects and chunks Pool has allocated, but not the objects in use or
// the high-water mark: those read 0, because counting them would make every Get and Put write one
// shared word. Use a Slab or a List where those counts matter.
//
// Pool is safe for concurrent use. Get and Put are lock-free (as sync.Pool is) except when Get
// allocates a chunk. Its zero value is an empty Pool without a reset hook, ready to use (as a
// sync.Pool's is); the zero values of List and Slab are not (they have no size): their Get
// returns ErrNotMade and their Put ErrForeign.
type Pool[T any] struct {
	free  sync.Pool // idle *poolCell[T], state free: Put by Put and newChunk, Get by Get
	reset func(*T)  // written by NewPool, read-only after

	// reg is the registry of live chunks, sorted by base. Replaced (copy on write) under mu when a
	// chunk is added, dropping chunks the garbage collector took; loaded by Put.
	reg    atomic.Pointer[[]chunkRef[T]]
	mu     sync.Mutex   // serializes newChunk (allocation and the registry's replacement)
	chunks atomic.Int64 // chunks ever allocated: added to by newChunk, loaded by Stats

	// Pool keeps no in-use counter: a word every Get and Put of every P writes would undo the
	// per-P caching that makes sync.Pool scale.
}

// NewPool returns an empty Pool. reset, if not nil, runs on every object Put gives back, before it
// can be handed out again (if it panics, the Put is undone: the object stays in use).
func NewPool[T any](reset func(*T)) *Pool[T] {
	p := &Pool[T]{reset: reset}
	p.reg.Store(new([]chunkRef[T]))
	return p
}

// Get returns an idle object, or a new zero-valued one. Its error is always nil.
func (p *Pool[T]) Get() (*T, error) {
	var c *poolCell[T]
	if v := p.free.Get(); v != nil {
		c = v.(*poolCell[T])
	} else {
		c = p.newChunk()
	}
	// c is ours (the sync.Pool or newChunk gave it to this goroutine alone); its next reader is
	// the Put that gives it back, ordered after this store: a store-release suffices.
	relaxed.StoreRelease32(&c.state, stateInUse)
	return &c.obj, nil
}

// newChunk allocates a batch of chunks and registers them (pruning chunks the garbage collector
// took), parks all but one cell in the sync.Pool, and returns that one. If another Get grew the Pool
// while this one waited for the lock, it takes an idle cell instead.
func (p *Pool[T]) newChunk() *poolCell[T] {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v := p.free.Get(); v != nil {
		return v.(*poolCell[T])
	}
	var old []chunkRef[T]
	if r := p.reg.Load(); r != nil { // nil: the zero value's first chunk
		old = *r
	}
	live := make([]chunkRef[T], 0, len(old))
	for _, r := range old {
		if r.w.Value() != nil {
			live = append(live, r) // collected ones are dropped: their memory may be reused
		}
	}
	k := max(1, len(live)/poolBatchDiv)
	batch := make([]*chunk[T], k)
	refs := make([]chunkRef[T], k)
	for i := range batch {
		ch := new(chunk[T])
		batch[i] = ch
		base, end := rangeOf(ch.cells[:])
		refs[i] = chunkRef[T]{base: base, end: end, w: weak.Make(ch)}
	}
	slices.SortFunc(refs, func(a, b chunkRef[T]) int { return cmp.Compare(a.base, b.base) })
	// Look again now that the batch is allocated: a chunk that died since the first look may
	// have lent the batch its memory, and its entry (same range, dead) must not shadow the new
	// one. A chunk found alive now is alive for as long as the new one exists, so they are
	// disjoint. (Values only ever go from alive to nil.)
	live = slices.DeleteFunc(live, func(r chunkRef[T]) bool { return r.w.Value() == nil })
	// Merge the two sorted lists.
	reg := make([]chunkRef[T], 0, len(live)+k)
	i, j := 0, 0
	for i < len(live) || j < len(refs) {
		if j == len(refs) || (i < len(live) && live[i].base < refs[j].base) {
			reg = append(reg, live[i])
			i++
		} else {
			reg = append(reg, refs[j])
			j++
		}
	}
	p.reg.Store(&reg)
	p.chunks.Add(int64(k))
	for n, ch := range batch {
		for c := range ch.cells {
			if n > 0 || c > 0 {
				p.free.Put(&ch.cells[c])
			}
		}
	}
	return &batch[0].cells[0]
}

// Put gives x back for re-use, running the reset hook on it first. It returns a [*PutError]
// matching ErrForeign if x is nil or not from this Pool, or ErrDoublePut if x is already free; the
// Pool is unchanged then.
func (p *Pool[T]) Put(x *T) error {
	c := p.find(x)
	if c == nil {
		return &PutError{Allocator: "pool", Addr: addrOf(x), Err: ErrForeign}
	}
	if !c.state.CompareAndSwap(stateInUse, stateFree) {
		return &PutError{Allocator: "pool", Addr: addrOf(x), Err: ErrDoublePut}
	}
	if p.reset != nil {
		runReset(p.reset, &c.obj, func() { c.state.Store(stateInUse) })
	}
	p.free.Put(c)
	return nil
}

// find returns the cell whose object x points to, or nil.
func (p *Pool[T]) find(x *T) *poolCell[T] {
	if x == nil {
		return nil
	}
	a := addrOf(x)
	rp := p.reg.Load()
	if rp == nil { // the zero value, before its first chunk: nothing is its own
		return nil
	}
	reg := *rp
	lo, hi := 0, len(reg)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if reg[m].base <= a {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 || a >= reg[lo-1].end {
		return nil
	}
	r := &reg[lo-1]
	// If x points into r's range and r's chunk is gone, x is some other object reusing the
	// memory. If the chunk is alive, x (an interior pointer) is what keeps it so.
	ch := r.w.Value()
	if ch == nil {
		return nil
	}
	size := poolCellSize[T]()
	off := a - r.base
	if off%size != 0 {
		return nil
	}
	c := &ch.cells[off/size]
	if &c.obj != x {
		return nil
	}
	return c
}

// Stats returns the Pool's counters: Objects counts every object ever allocated (the garbage
// collector may have taken some back) and Slabs the chunks they came in. Pool does not track
// InUse and HighWater (they read 0), so that its Get and Put share no written word across Ps.
func (p *Pool[T]) Stats() Stats {
	n := p.chunks.Load()
	return Stats{Objects: n * poolChunk, Slabs: int(n)}
}

// Traits describes Pool: concurrent, lock-free unless allocating, grows when empty, shrinks
// under GC.
func (p *Pool[T]) Traits() Traits {
	return Traits{Concurrent: true, LockFree: true, OnEmpty: EmptyGrow, Shrinks: true}
}

var _ Allocator[int] = (*Pool[int])(nil)
