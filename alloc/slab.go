package alloc

import (
	"fmt"
	"math"
	"sync"

	"github.com/gosdma/gosdma/internal/pcpu"
)

// SlabConfig configures a [Slab].
type SlabConfig[T any] struct {
	// ObjectsPerSlab is how many objects each slab holds (N). Must be at least 1, below 2^32-1,
	// and no more than one allocation may hold (NewSlab says so with an error).
	ObjectsPerSlab int
	// MaxSlabs caps the number of slabs; 0 means no cap (up to 2^32-1 objects in all, the
	// largest whole number of slabs that fits; a larger MaxSlabs caps at that too). A Get
	// that would need a slab past the cap returns ErrEmpty.
	MaxSlabs int
	// Init, if not nil, runs once on every object when its slab is created (the ctor argument of
	// kmem_cache_create). If it panics, the slab is not created: the Get that grew panics on,
	// and the Slab is as it was. It runs inside that Get, with the Slab's grow lock held: it must
	// not call the Slab itself (a Get that has to grow would wait for that lock for ever), as a
	// ctor must not allocate from its own cache.
	Init func(*T)
	// Reset, if not nil, runs on every object Put gives back, before it can be handed out again.
	// If it panics, the Put is undone (the object stays in use) and the panic goes on.
	Reset func(*T)
}

// Slab is a growable allocator in the manner of the kernel's kmem_cache: objects come in slabs of
// ObjectsPerSlab, a slab is created when no object is free, and freed objects are kept for
// re-use; slabs are never given back. (Slabs are carved from larger allocations once the Slab has
// many, each room for an eighth more, never past MaxSlabs: so growing costs O(1) per slab, and
// Init runs on a slab's objects only when the slab is created.) Slab never hands out memory it does not own, and reports
// objects in use and the high-water mark through [Slab.Stats].
//
// It is the Go form of the kmem_cache the hfi1 driver keeps its txreqs in (hfi1: verbs_txreq_cache
// with get_txreq and hfi1_put_txreq; user_sdma's txreq_cache).
//
// Free objects are kept in per-P magazines (the kmem_cache's per-CPU array_cache; see the
// package documentation): a goroutine that puts back what it got keeps its objects on its P, and
// Slabs shared by goroutines on several cores do not bounce a shared free-list head between
// them. A Slab grows only once every P's cached objects are handed out.
//
// Slab is safe for concurrent use. Get and Put are lock-free while a free object exists; growing
// takes a lock. Get on an empty Slab grows it, or returns ErrEmpty at MaxSlabs. Make one with
// NewSlab: the zero value has no configuration, and its Get returns ErrNotMade (its Put
// ErrForeign).
type Slab[T any] struct {
	s     stack[T]      // the free list; its fields document their own writers
	cfg   SlabConfig[T] // written by NewSlab, read-only after
	limit int64         // most objects, from MaxSlabs and the index space; read-only after NewSlab

	mu sync.Mutex // serializes grow: held by a Get that found no free object
}

// NewSlab returns an empty Slab (its first Get allocates the first slab). It returns an error if
// the configuration is invalid (kernel: kmem_cache_create).
func NewSlab[T any](cfg SlabConfig[T]) (*Slab[T], error) {
	if cfg.ObjectsPerSlab < 1 || int64(cfg.ObjectsPerSlab) >= nilIndex {
		return nil, fmt.Errorf("alloc: NewSlab: ObjectsPerSlab %d out of range [1, %d)", cfg.ObjectsPerSlab, uint32(nilIndex))
	}
	if uint64(cfg.ObjectsPerSlab) > maxCells[T]() {
		return nil, fmt.Errorf("alloc: NewSlab: ObjectsPerSlab %d: objects of %d bytes each are more than one allocation may hold (%d bytes)", cfg.ObjectsPerSlab, cellStride[T](), uint64(maxRegionBytes))
	}
	if cfg.MaxSlabs < 0 {
		return nil, fmt.Errorf("alloc: NewSlab: negative MaxSlabs %d", cfg.MaxSlabs)
	}
	// The largest whole number of slabs that fits the index space (nilIndex is reserved).
	limit := (int64(nilIndex) / int64(cfg.ObjectsPerSlab)) * int64(cfg.ObjectsPerSlab)
	if per := int64(cfg.ObjectsPerSlab); cfg.MaxSlabs > 0 && int64(cfg.MaxSlabs) <= limit/per {
		limit = int64(cfg.MaxSlabs) * per // (a larger MaxSlabs caps nothing: its product may overflow)
	}
	sl := &Slab[T]{cfg: cfg, limit: limit}
	sl.s.init(uint32(cfg.ObjectsPerSlab), cfg.Reset, "slab")
	return sl, nil
}

// Get returns a free object, allocating a new slab if none is free. At MaxSlabs with no object
// free it returns ErrEmpty (kernel: kmem_cache_alloc).
func (sl *Slab[T]) Get() (*T, error) {
	s := &sl.s
	id := pcpu.Pin()
	if uint(id) < uint(len(s.mags)) {
		if c := s.popCur(&s.mags[id]); c != nil {
			pcpu.Unpin()
			return &c.obj, nil
		}
	}
	pcpu.Unpin()
	return sl.get()
}

// get is Get's general case: the P's magazines, the depot and the free stack, then every P's
// magazines, then a new slab.
func (sl *Slab[T]) get() (*T, error) {
	if sl.s.tab.Load() == nil { // the zero value: never made (a made stack has a table)
		return nil, ErrNotMade
	}
	if c, _ := sl.s.get(); c != nil {
		return &c.obj, nil
	}
	if c, _ := sl.s.getSlow(); c != nil {
		return &c.obj, nil
	}
	return sl.growGet()
}

func (sl *Slab[T]) growGet() (*T, error) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	for {
		// Another Get may have grown the slab, or a Put freed an object, while we waited; and
		// Gets that take no lock may empty a slab we grew before we pop it. Objects cached on
		// other Ps are free too: getSlow drains them before we grow.
		if c, _ := sl.s.getSlow(); c != nil {
			return &c.obj, nil
		}
		room := (sl.limit - sl.s.objects()) / int64(sl.cfg.ObjectsPerSlab)
		if room < 1 {
			return nil, ErrEmpty
		}
		sl.s.grow(sl.cfg.Init, int(min(room, math.MaxInt32)))
	}
}

// Put gives p back for re-use, running the Reset hook on it first. It returns a [*PutError]
// matching ErrForeign if p is nil, not from this Slab, or one of its objects that no Get handed
// out yet (as Init may have seen it), or ErrDoublePut if p was handed out and is already free;
// the Slab is unchanged then (kernel: kmem_cache_free).
func (sl *Slab[T]) Put(p *T) error { return sl.s.put(p) }

// Owns reports whether p points to an object of this Slab, free or in use.
func (sl *Slab[T]) Owns(p *T) bool {
	c, _ := sl.s.find(p)
	return c != nil
}

// Stats returns the Slab's counters. Get and Put update no counter: Stats counts by reading
// every object's state, so it costs O(Objects) and is for monitoring, not for a hot path. It is
// exact when no Get or Put runs concurrently (objects cached in per-P magazines count as free),
// and a snapshot otherwise (see the package documentation).
func (sl *Slab[T]) Stats() Stats { return sl.s.stats() }

// Traits describes Slab: concurrent, lock-free unless growing, grows when empty up to MaxSlabs.
func (sl *Slab[T]) Traits() Traits {
	capacity := 0
	if sl.cfg.MaxSlabs > 0 {
		capacity = int(min(sl.limit, math.MaxInt)) // on 32-bit platforms the limit may pass MaxInt
	}
	return Traits{Concurrent: true, LockFree: true, OnEmpty: EmptyGrow, Capacity: capacity}
}

var _ Allocator[int] = (*Slab[int])(nil)
