// Package dma is the DMA mapping layer of gosdma: the seam between the driver (package sdma),
// which maps memory and hands bus addresses to the engine, and the hardware model, which reaches
// memory only through those bus addresses.
//
// # The seam
//
// Mapper is the Go shape of struct ib_dma_mapping_ops, added to Linux in 2006 by Ralph Campbell
// ("IB: Add DMA mapping functions to allow device drivers to interpose") so that a verbs driver
// could replace dma_map_single and friends. Every op takes a Direction; bus addresses are Addr,
// a uint64 like the patch's u64 handles (dma_addr_t is 32 bits on some machines). Mapping failure
// is ErrMapping (-ENOSPC) rather than a magic address checked with mapping_error. A driver can
// wrap or replace a Mapper: Counting and FaultInjector are such wrappers.
//
// The device side of the seam is Translate: it turns a bus address range and an access direction
// into the bytes behind it, or a *Fault saying which address and why (not mapped, partly
// mapped, wrong direction, ...), and counts the fault. The slice it returns is a subslice of the
// mapped buffer, so the hardware model can never read or write outside what was mapped.
//
// # Two mappers
//
// Direct follows InfiniPath's precedent (ipath_dma_mapping_ops returned the kernel virtual address
// as the "DMA address"): the bus address of a buffer is its own address and mapping costs next to
// nothing, but every live mapping is still recorded so that translation is checked. What it cannot
// catch is a stale address that has become valid again: once the buffer's memory is reused for a
// buffer that is mapped later (the Go heap reuses freed objects), the old bus address reaches the
// new buffer. Use IOMMU where use after unmap must fault every time.
//
// IOMMU hands out addresses from its own IOVA space (48 bits in 4 KiB granules by default) through
// a page table with per-mapping directions; unmapping invalidates at once, freed addresses are not
// reused until the space wraps, Live reports every live mapping (the leak check), a full space is
// ErrMapping, and fault injection (IOMMUConfig.FailNth, FailFraction) exercises failure paths.
//
// Both are safe for concurrent use. Their mapping tables are split into 64 stripes by a hash of
// the page number. A mapping of up to 16 pages (IOMMU granules), the common case (a header, a
// kvaddr payload of a few pages), lives in the index: a fixed array of entries whose words are
// read and written with sync/atomic only (the owner of a busy entry stores with plain MOVs on
// amd64), each entry's meta word being its lock and its sequence count at once (index.go
// explains the protocol). Direct's set is one cache line of the index, that of the address's line
// in the region its half page hashes to, so that buffers in different lines of a half page (two
// Ps' txreqs of one slab page) never share one; the IOMMU's is in granule order, so that the fresh granules a P maps
// one after the other fill neighbouring entries, two to a cache line. Translate of such a mapping takes no lock and does no atomic read-modify-write:
// it loads the entry's words between two loads of its meta word and retries if they differ, so it
// never returns the bytes of an entry that was recycled for another mapping while it read. A map
// takes an entry with one compare-and-swap (storing the words that changed, if the entry last
// held another buffer), an unmap ends it with one; a sender that maps the same buffers over and
// over pays one atomic operation per map and one per unmap. The IOMMU's map from a P's magazine
// fills an entry of a block of the index its P owns with plain stores, no compare-and-swap
// (index.go, "Plain fills of a P's own block"), and a sole mapping's unmap (MapSingleSole) is a
// store: the kvaddr path's map, translate and unmap on the IOMMU take no locked instruction. A mapping of several pages is one
// entry, found at its first page by a range check: a translation of an address in one of its
// later pages looks back over the index sets of the 15 pages before. Longer mappings, and those
// whose index set is full, go to page lists behind the index, guarded by each stripe's
// sync.Mutex on its own cache line; a Translate takes that lock only when the index has no
// answer and the stripe's page lists hold something, never a global lock nor the IOMMU's IOVA
// allocator mutex. The IOMMU's map of a few granules takes none either: each P keeps a magazine
// of fresh granules (iova.go, after the kernel's alloc_iova_fast), refilled under the mutex once
// per 64 granules. Map and unmap do not allocate in steady state. TestTranslateRemapRace and
// TestTranslateTornRead check the read path against recycling, TestTranslateNoGlobalLock the
// locking; BenchmarkMapTranslateUnmap measures one packet's mappings, BenchmarkTranslate and
// BenchmarkTranslateParallel translations.
//
// # Registered memory
//
// Register (the Registrar interface: Direct, IOMMU and the wrappers) maps a buffer once, as
// ibv_reg_mr does and as hfi1's user SDMA keeps pinned pages mapped: the IOMMU allocates and maps
// the region's IOVA range once, Direct records it. A buffer inside registered memory then has a
// bus address by arithmetic (Registration.AddrOf), with no map call, no lock, no allocation, and
// nothing to unmap. Translate finds registrations in an immutable snapshot that Register and
// Deregister swap atomically (copy on write): a translation of registered memory takes no lock
// (and, with one registration, no search).
// Users count their uses in flight (Acquire, Release, on one counter per P, so that a producer's
// Acquire and the engine goroutine's Release on another core write different cache lines);
// Deregister stops new uses, waits until the counters sum to 0 (or gives up on its context,
// changing nothing), then unmaps, so that no use in flight ever finds the memory gone.
// Concurrent Deregisters of one registration wait for the outcome of the one that drains and
// take over if it gives up: exactly one succeeds, the others are told it is deregistered
// already (ErrNotMapped) or give up on their own contexts (TestDeregisterConcurrentRace).
// TestDeregisterWaitsRace, TestDeregisterShardedCountRace, TestRegisterTranslateConcurrent and
// FuzzRegister check it.
//
// UnmapBatch (BatchUnmapper) undoes many mappings with one hold of each stripe's lock: package
// sdma's completion pass unmaps every fragment of a chunk of completed txreqs that way.
//
// MapSingleSole (SoleMapper) is MapSingle for a caller that will be the mapping's only unmapper:
// it returns a handle (Sole) naming the mapping's index entry and generation, and
// UnmapSingleSole (or a batch entry carrying the handle) frees the entry with one plain
// store-release instead of a compare-and-swap. A second unmap with the handle is ErrNotMapped. A
// public unmap of such a mapping (a user's, behind its owner's back) revokes it: unmapped to
// every reader at once, its entry and IOVA still held until the owner's unmap frees them, which
// then reports ErrNotMapped (sole.go; TestSoleMapUnmap, TestSoleRevoke, TestSoleRevokeRace,
// TestTranslateRemapRaceSole, FuzzMapper).
//
// TranslateSole (SoleTranslator: Direct and IOMMU) is Translate with such a handle as a hint, an
// IOTLB entry that the descriptor's owner carries: package sdma's hardware model passes the handle
// its txreq recorded, and the mapper finds the entry by arithmetic instead of its index's hash and
// set walk, validates it with Translate's loads, and otherwise asks Translate; a hint never
// changes the answer (TestTranslateSoleAgrees, TestTranslateSoleTornRead, FuzzMapper).
// Registry.Find is the adds' lookup of registered memory: the registration and the bus address
// in one search of the snapshot (none with one registration), with no interface call.
//
// # Memory
//
// Region is page-aligned memory outside the Go heap (anonymous mmap, no cgo); Page is one page of
// it (struct page). Coherent is memory from AllocCoherent; Pool carves fixed-size aligned blocks
// out of coherent memory (dma_pool). Mapping a Go heap buffer is fine too: the mapping record
// keeps it reachable, and the Go heap does not move objects. Memory of a Region is pinned by every
// mapping of it, so closing a Region never pulls memory from under the device.
//
// # Kernel names
//
//	struct ib_dma_mapping_ops          Mapper
//	ib_dma_map_single / dma_map_single Mapper.MapSingle    (unmap: UnmapSingle)
//	ib_dma_map_page / dma_map_page     Mapper.MapPage      (unmap: UnmapPage)
//	ib_dma_map_sg / dma_map_sg         Mapper.MapSG        (unmap: UnmapSG)
//	ib_sg_dma_address, ib_sg_dma_len   SG.Addr, SG.Len
//	ib_dma_mapping_error               an error matching ErrMapping
//	ib_dma_sync_single_for_cpu/device  Mapper.SyncForCPU, Mapper.SyncForDevice
//	ib_dma_alloc_coherent / free       Mapper.AllocCoherent, Mapper.FreeCoherent, Coherent
//	enum dma_data_direction            Direction (Bidirectional, ToDevice, FromDevice)
//	dma_addr_t, u64 dma handle         Addr
//	ipath_dma_mapping_ops (identity)   Direct
//	iommu_dma_ops, alloc_iova          IOMMU
//	IOMMU fault record                 Fault
//	debug_dma_dump_mappings (dma-debug) (*IOMMU).Live, (*Direct).Live
//	ibv_reg_mr / ibv_dereg_mr           Registrar.Register, Registrar.Deregister, Registration
//	struct page, alloc_pages           Page, AllocPages, Region
//	page_address                       Page.Bytes
//	dma_pool_create/alloc/free/destroy NewPool, Pool.Alloc, Pool.Free, Pool.Destroy
//	-ENOSPC / -EINVAL / -EBUSY         ErrMapping / ErrInvalid / ErrBusy
//
// Unsafe code lives in files named *_unsafe.go, in the fast paths that take a buffer's address or
// an index entry by arithmetic (direct_fast.go, iommu_fast.go, sole_translate.go), and in the
// owner's plain stores through atomics on amd64 (store_amd64.go), and in the aligned mmap behind
// AllocPages and AllocCoherent (region_unsafe.go).
package dma
