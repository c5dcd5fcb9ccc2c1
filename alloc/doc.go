// Package alloc holds txreq allocators: the "allocation method for your version of the txreq" that
// the hfi1 SDMA API leaves to its user ("slabs? pre-allocated lists? dma pools?").
//
// The package is generic over the caller's type and imports nothing else of gosdma but internal
// leaves. A gosdma caller's txreq is a struct that embeds sdma.TxReq as its first field (the Go shape of "the txreq
// must be declared with the sdma_txreq first"); the allocators hand out pointers to that struct, and
// [Outer] gets from the *sdma.TxReq a completion callback receives back to it without allocating.
//
// # Allocators
//
// All three implement [Allocator] and are safe for concurrent use by multiple goroutines.
//
//   - [Slab] grows by slabs of N objects, like a kmem_cache: it keeps freed objects for re-use,
//     never frees a slab, never hands out memory it does not own, and reports objects in use and the
//     high-water mark. With SlabConfig.MaxSlabs set, an empty slab at its limit returns [ErrEmpty].
//   - [List] is a fixed number of objects created up front. Get and Put are lock-free (a Treiber
//     stack of indices with a version-tagged head, safe against ABA). Get on an empty list never
//     allocates: it returns [ErrEmpty], or [List.GetCtx] waits for a Put or the context.
//   - [Pool] is elastic and backed by a [sync.Pool]: idle objects may be taken back by the garbage
//     collector, for callers who prefer memory back over determinism.
//
// # Per-P magazines
//
// Slab and List keep free objects close to the goroutines that use them, as the kernel's slab
// allocator does with its per-CPU caches (kmem_cache's array_cache, after Bonwick's magazine
// layer, "Magazines and Vmem", 2001). Each P (the Go scheduler's processor, see runtime.GOMAXPROCS)
// has two magazines of up to 16 free objects, a loaded and a previous one. A Get takes from the
// calling goroutine's P and a Put gives back to it, with one CAS on a cache line no other P
// writes (or, on linux/amd64, once the P has gone a while without its magazines being drained,
// with a plain load and store: see "Plain mode" in magazine.go); only when the P's magazines run
// empty or full does a whole magazine move from or to a shared depot, in one CAS. So a goroutine
// that puts back what it got (an inline completion) keeps its objects, and their cache lines, on
// its core; and when a producer gets on one core and a completion goroutine puts back on
// another, they meet once per magazine, not once per object.
//
// Objects of Slab and List are kept in cells, each the object after a 16-byte header. Cells
// larger than half a padding unit (64 bytes on amd64, so objects of more than 48 bytes) are laid
// out as the kernel's SLAB_HWCACHE_ALIGN caches lay theirs (hfi1 creates its txreq cache so):
// each starts on a cache line and is padded to a whole number of padding units (two 64-byte lines
// on amd64, for the adjacent-line prefetcher), so two objects used on different cores never share
// a line, at a cost under one padding unit (128 bytes on amd64) per object once there are a few
// hundred: padded cells are allocated at least 32 KiB at a time (a large object, which starts on
// a page), so a List of few padded objects takes 32 KiB, and a Slab carves its first slabs from
// one such allocation. Smaller cells stay packed.
//
// Objects in a magazine are free, never lost to the rest: before a Get reports ErrEmpty (List),
// grows (Slab) or hands out an object never used before, it drains every P's magazines into the
// depot (taking them with a CAS each; where a P was in plain mode, after a process-wide barrier,
// membarrier(2), and a wait for the P's pinned owner to end its pop or push, a few
// instructions), so a goroutine alone, even one moving between Ps, sees the same counts and
// errors as with one shared free list. A P that did not exist when the allocator
// was made (GOMAXPROCS raised later) takes the shared path: the depot and a lock-free free stack.
// Under the purego tag, which forgoes the runtime's P pinning (internal/pcpu), every Get and Put
// takes the shared path.
//
// # Ownership and misuse
//
// An object belongs to the caller from the Get that returned it until the Put that gives it back;
// the Put synchronizes before the Get that next returns the same object, so the next owner sees
// every write the previous owner made (including the reset hook's). Each allocator runs its reset
// hook on Put, after checking the object and before it can be handed out again, so a re-used
// object comes back clean. If the hook panics, the Put is undone before the panic goes on: the
// object is still the caller's (in use), neither lost to the allocator nor half reset and handed
// out.
//
// Every object carries an atomic state word. Putting back an object that is already free returns
// a [*PutError] matching [ErrDoublePut]; putting back nil or an object the allocator did not hand
// out returns one matching [ErrForeign]. Neither changes the allocator. Slab and List tell their
// own objects by address range (their memory is theirs for good); Pool keeps a weak registry of the
// chunks it allocated, so it tells its own objects too, without keeping idle memory alive. What no
// allocator can catch is a stale Put of an object that has since been handed out again: to the
// allocator that is the new owner's Put. That is a use-after-free in the caller.
//
// # Stats under concurrent use
//
// Slab and List count objects in use from each object's own state word, so [Stats] read after
// the Gets and Puts stop is exact, whatever the magazines hold (free objects count as free
// wherever they are). A read during concurrent use is a snapshot taken piece by piece. The
// high-water mark counts the objects ever handed out, which the magazines keep equal to the
// largest number in use at once when Gets and Puts do not run concurrently; under concurrent use
// it may come out above that peak (never above Objects) if a Get, finding every cached object
// taken, hands out a never-used object while another goroutine is moving free objects between a
// P and the depot.
//
// A nil *Slab, *List or *Pool is not an allocator: its methods panic, as on any nil pointer
// (the zero values are: see each type).
//
// # Zero allocation
//
// In steady state Get and Put allocate nothing on any of the three (tests assert it with
// testing.AllocsPerRun). Errors are allocated only on the misuse path; [ErrEmpty] is returned as
// the bare sentinel.
package alloc
