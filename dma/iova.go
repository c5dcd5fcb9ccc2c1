package dma

import (
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/cacheline"
	"github.com/gosdma/gosdma/internal/pcpu"
	"github.com/gosdma/gosdma/internal/relaxed"
)

// # Per-P IOVA magazines: a map of a few granules takes no mutex
//
// Linux's IOMMU DMA layer allocates IOVAs with alloc_iova_fast (called from
// iommu_dma_alloc_iova): each CPU keeps magazines of IOVA ranges by size order (the iova
// rcache, drivers/iommu/iova.c) and takes the allocator's lock only when its magazine is empty;
// free_iova_fast puts a range back into the magazine of the freeing CPU.
//
// Here each P keeps one magazine (iovaMag): a run of magGranules fresh granules that the
// allocator reserved for it under its mutex, next-fit from the cursor as every allocation is. A
// map of at most magMax granules (a header, a payload of a few pages; not coherent memory that
// wants an aligned address, nor registrations) takes its granules from the front of its P's
// magazine while pinned to the P (internal/pcpu.Pin: no other goroutine runs on the P, so the
// magazine has one user at a time) and, in the same pinned section, publishes the mapping in the
// page table with no mutex (in an entry of a block of the index its P owns, with plain stores:
// index.go, "Plain fills of a P's own block"). Only when the magazine runs short does a map take
// the mutex, to reserve the next run at the cursor (skipping a run whose blocks another P owns).
//
// Unlike the kernel's rcache, freed ranges are not cached for reuse: free_iova_fast's
// counterpart is the unmap alone (the entry is freed, nothing goes back to a magazine), so that
// the IOMMU keeps its promise that a freed IOVA is not handed out again until the space has
// wrapped, and a stale bus address faults every time. A magazine's granules that are never used
// (the rest of a run when the cursor wraps, or when GOMAXPROCS changes) are skipped, as freed
// ones are.
//
// # Why the allocator never hands out a granule a magazine holds
//
// A run is reserved at the cursor, which then moves past it; the allocator looks only at and
// after the cursor until it wraps to granule 1. Before the first wrap every granule at or after
// the cursor is free, so a run is reserved with no occupancy check. The wrap (under the mutex)
// moves epoch forward; a magazine reserved in an earlier epoch is dropped by its P at its next
// use, and runs reserved after a wrap are checked granule by granule (findFree). A granule a P
// took from its magazine just before a wrap and publishes just after it could collide with the
// allocator only if the allocator reached that granule again first: after the wrap the cursor
// starts from granule 1 and the run lies where the cursor was at the wrap, the top of the space,
// so the publication would have to be delayed for a whole pass over the space (2^36 granules by
// default, about an hour of maps at 20 M/s), the same kind of bound as the index's 33-bit
// generation. Small spaces (tests of exhaustion, below 2^20 granules) use no magazines: there
// every granule counts and a map allocates under the mutex, exactly as before.
const (
	magGranules = 64      // granules per reserved run
	magMax      = 5       // maps of at most this many granules use the magazine: a kvaddr payload of up to 16 KiB at any offset
	magMinSpace = 1 << 20 // spaces of fewer granules use no magazines
)

// iovaMag is one P's magazine: the granules [next, end) reserved for it in epoch epoch. Its words
// are written and read only by a goroutine pinned to the P (pcpu.Pin), so one at a time; they are
// atomics only so that the race detector, which does not know about pinning, sees the hand-over
// between goroutines that run on the P one after the other. Loads are plain MOVs on amd64 and the
// stores store-releases (relaxed.StoreRelease64), so a take costs no locked instruction.
type iovaMag struct {
	next, end atomic.Uint64
	epoch     atomic.Uint64
	// blocks are the owned blocks of the index (plus one, 0: none) the P claimed for its run
	// (index.go, "Plain fills of a P's own block"); read and written by refill only (mu held).
	blocks [4]uint32
	_      [cacheline.Pad - 40]byte // one P's magazine per line pair: no line shared between Ps
}

// newMags returns the magazines of an IOMMU with spacePages granules, or nil if it uses none.
func newMags(spacePages uint64) []iovaMag {
	if !pcpu.Enabled || spacePages < magMinSpace {
		return nil
	}
	return make([]iovaMag, pcpu.Max()+1)[1:] // a leading pad: the first magazine shares no line
}

// takeFast returns the first of n fresh granules taken from the calling P's magazine, or false if
// it has fewer than n of the current epoch (alloc_iova_fast's per-CPU magazine hit). No lock.
func (m *IOMMU) takeFast(n uint64) (uint64, bool) {
	g, ok := m.takePinned(pcpu.Pin(), n)
	pcpu.Unpin()
	return g, ok
}

// takePinned is takeFast for a caller pinned to P id.
func (m *IOMMU) takePinned(id int, n uint64) (uint64, bool) {
	if uint(id) >= uint(len(m.mags)) {
		return 0, false
	}
	g := &m.mags[id]
	next := g.next.Load()
	if next+n > g.end.Load() || g.epoch.Load() != m.epoch.Load() {
		return 0, false
	}
	relaxed.StoreRelease64(&g.next, next+n)
	return next, true
}

// refillTries bounds the runs a refill looks at before it gives up (the caller then allocates
// granule by granule): each run it skips has a block another P owns.
const refillTries = nOwnBlocks + 2

// refill reserves a run of magGranules granules for the calling P's magazine, takes the first n
// of it for the map of r (the record template of assign) and, pinned to the P, publishes that
// map in the index if it can (published true: r.addr is set and nothing is left to do); it
// returns the first granule, or false if the space has no such run (the caller then allocates
// granule by granule). mu held (the depot: alloc_iova under iova_rbtree_lock).
func (m *IOMMU) refill(n, off uint64, r *record) (start uint64, published, ok bool) {
	for range refillTries {
		if start, ok = m.nextRun(); !ok {
			return 0, false, false
		}
		m.cursor = start + magGranules
		id := pcpu.Pin()
		if uint(id) >= uint(len(m.mags)) {
			pcpu.Unpin()
			return start, false, true // a P beyond the magazines: the run serves this map only
		}
		if !m.claimBlocks(id, start) {
			pcpu.Unpin()
			continue // another P's block: skip the run
		}
		g := &m.mags[id]
		// The rest of the P's old run, if any, is dropped (never handed out, so nothing to free).
		relaxed.StoreRelease64(&g.next, start+n)
		relaxed.StoreRelease64(&g.end, start+magGranules)
		relaxed.StoreRelease64(&g.epoch, m.epoch.Load())
		r.addr = Addr(start<<m.shift | off)
		h := m.tab.tryIndexPinned(id, r.addr, r.buf, r.dir, kindCode(r.kind), r.region)
		pcpu.Unpin()
		return start, h != 0, true
	}
	return 0, false, false
}

// nextRun returns the first granule of the next run of magGranules free granules at or after the
// cursor, or false if the space has none. mu held.
func (m *IOMMU) nextRun() (uint64, bool) {
	if m.epoch.Load() == 0 && m.cursor+magGranules <= m.spacePages {
		return m.cursor, true // never wrapped: everything at or after the cursor is free
	}
	return m.findFree(magGranules, 1)
}

// claimBlocks makes P id, to which the caller is pinned, the owner of the blocks of the index that
// hold the own and far entries of the run at start, releasing those of its previous run, unless
// another P owns one of them (false: nothing changed). Always true if the blocks are not owned.
// mu held.
func (m *IOMMU) claimBlocks(id int, start uint64) bool {
	t := &m.tab
	if !t.owned {
		return true
	}
	me := int32(id) + 1
	b0, b1 := t.ownBlock(start), t.ownBlock(start+magGranules-1)
	b := [4]uint64{b0, b1, t.farBlock(b0), t.farBlock(b1)}
	for _, x := range b {
		if o := t.owners[x].Load(); o != 0 && o != me {
			return false
		}
	}
	g := &m.mags[id]
	for _, x := range g.blocks {
		if x != 0 {
			t.owners[x-1].Store(0) // every fill of this P, pinned, has ended
		}
	}
	for i, x := range b {
		t.owners[x].Store(me)
		g.blocks[i] = uint32(x) + 1
	}
	return true
}
