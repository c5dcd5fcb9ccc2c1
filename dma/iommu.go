package dma

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/pcpu"
)

// IOMMUConfig configures an IOMMU. The zero value is a 48-bit IOVA space in 4 KiB granules with no
// fault injection.
type IOMMUConfig struct {
	// PageSize is the IOVA granule (the IOMMU page size): a power of two, at least 256. 0 means
	// 4096. Bus addresses keep the CPU address's offset within a granule, as the kernel's
	// iommu_dma_map_page does, so alignment below the granule is preserved. Coherent memory
	// (AllocCoherent, hence Pool chunks) gets a bus address aligned as its CPU address is, to the
	// power-of-two number of pages that covers its size, whatever the granule.
	PageSize int
	// IOVABits is the width of the IOVA space: bus addresses are below 1<<IOVABits. 0 means 48.
	// Small values let tests exhaust the space.
	IOVABits int
	// FailNth makes the FailNth-th map call (counting from 1; MapSingle, MapPage, MapSG and
	// AllocCoherent each count once) fail with ErrMapping. 0 disables it. A call refused for its
	// arguments (ErrInvalid) or a closed Region's memory (ErrClosed) is not counted, here nor by
	// FailFraction.
	FailNth int
	// FailFraction makes that fraction of map calls fail with ErrMapping, chosen by a
	// generator seeded with Seed (the same calls fail for the same seed and call sequence).
	FailFraction float64
	// Seed seeds FailFraction.
	Seed int64
}

// IOMMU is a software IOMMU: every mapping gets bus addresses from the IOMMU's own IOVA space,
// in whole granules, through a page table, with its direction. Unmapping invalidates at once:
// a later Translate of the old address faults. IOVAs are handed out next-fit from a cursor that
// only moves forward (wrapping at the top), so a freed address is not reused until the whole space
// has been gone through, which makes use-after-unmap fault deterministically. Page 0 is never
// used, so Addr 0 is never valid. A full space is ErrMapping (alloc_iova failing).
//
// Translate of a mapping of up to 16 granules takes no lock (the table's index, see the package
// documentation), of a longer one one stripe's lock of the page table; it does not allocate and
// never takes the IOVA allocator's mutex. A map of up to 5 granules (a payload of up to 16 KiB
// at any offset) takes its granules from its P's magazine of fresh ones (iova.go:
// alloc_iova_fast's per-CPU magazines, without the reuse of freed ranges) with no mutex, and
// takes the mutex once per 64 granules to reserve the next run at the cursor; longer maps,
// coherent memory and registrations allocate at the cursor under it. Unmaps never take it.
// Spaces below 2^20 granules use no magazines, so that exhaustion is exact.
//
// An IOMMU is safe for concurrent use. The zero value is not usable (its methods panic, as a nil
// receiver's do); call NewIOMMU.
type IOMMU struct {
	// The IOMMU's head line (TestMapperHotLine): what its fast paths read besides core's head
	// line, which follows it (iommu_fast.go).

	// mags are the per-P IOVA magazines (iova.go), nil if the space is small or under purego;
	// the slice header is immutable, each magazine its P's (see iovaMag).
	mags       []iovaMag
	shift      uint   // log2 granule; immutable
	bits       int    // IOVABits; immutable
	spacePages uint64 // granules in the IOVA space, 1<<(IOVABits-shift); immutable
	// inj is the fault injection on map calls (IOMMUConfig), nil for none; set by NewIOMMU,
	// immutable (the injector's own counters are atomic).
	inj *injector
	// epoch counts the wraps of the cursor: added to by the holder of mu when the cursor wraps,
	// loaded by takeFast (a magazine of an earlier epoch is not used) and by refill. On the head
	// line, which mu's holders do not write (core lies between).
	epoch atomic.Uint64

	core

	mu     sync.Mutex // serialises IOVA allocation from the cursor with publication of the new mapping
	cursor uint64     // next-fit cursor, a granule number in [1, spacePages]; guarded by mu
}

// NewIOMMU validates cfg and returns an IOMMU.
func NewIOMMU(cfg IOMMUConfig) (*IOMMU, error) {
	if cfg.PageSize == 0 {
		cfg.PageSize = 4096
	}
	if cfg.IOVABits == 0 {
		cfg.IOVABits = 48
	}
	if cfg.PageSize < 256 || cfg.PageSize&(cfg.PageSize-1) != 0 {
		return nil, fmt.Errorf("dma: IOMMU page size %d, want a power of two >= 256: %w", cfg.PageSize, ErrInvalid)
	}
	shift := uint(bits.TrailingZeros(uint(cfg.PageSize)))
	if cfg.IOVABits <= int(shift) || cfg.IOVABits > 63 {
		return nil, fmt.Errorf("dma: IOMMU IOVABits %d, want %d..63: %w", cfg.IOVABits, shift+1, ErrInvalid)
	}
	if cfg.FailNth < 0 || math.IsNaN(cfg.FailFraction) || cfg.FailFraction < 0 || cfg.FailFraction > 1 {
		return nil, fmt.Errorf("dma: IOMMU fault injection FailNth %d FailFraction %v: %w", cfg.FailNth, cfg.FailFraction, ErrInvalid)
	}
	m := &IOMMU{
		shift:      shift,
		spacePages: 1 << (uint(cfg.IOVABits) - shift),
		bits:       cfg.IOVABits,
		cursor:     1,
	}
	m.init(shift, m)
	m.mags = newMags(m.spacePages)
	m.tab.setOwners(len(m.mags))
	if cfg.FailNth > 0 || cfg.FailFraction > 0 {
		m.inj = new(injector)
		m.inj.setNth(cfg.FailNth)
		m.inj.setFraction(cfg.FailFraction, cfg.Seed)
	}
	return m, nil
}

// PageSize returns the IOVA granule.
func (m *IOMMU) PageSize() int { return 1 << m.shift }

// Injected returns the number of map calls that failed by the configured fault injection.
func (m *IOMMU) Injected() uint64 {
	if m.inj == nil {
		return 0
	}
	return m.inj.injected.Load()
}

// assign allocates IOVA granules for the record template r (iommu_dma_alloc_iova), sets r.addr
// and publishes a record holding r's fields in the page table (iommu_map). A map of at most magMax
// granules takes them from its P's magazine with no mutex (alloc_iova_fast, iova.go), or reserves
// a new run for the magazine under mu; other maps allocate from the cursor and publish under mu,
// so that no two mappings get the same granules.
func (m *IOMMU) assign(r *record) error {
	off, n, fast := m.plan(r.buf, kindCode(r.kind))
	if fast {
		if g, ok := m.takeFast(n); ok {
			r.addr = Addr(g<<m.shift | off)
			m.insertUnlocked(r) // fresh granules of this P's run: no other map touches them
			return nil
		}
	}
	return m.assignSlow(r, off, n, fast)
}

// plan returns the offset of buf's first byte in its granule, the number of granules a mapping
// of buf touches, and whether the map may take them from its P's magazine (iova.go): at most
// magMax granules with no alignment wanted, and not a registration.
func (m *IOMMU) plan(buf []byte, code uint64) (off, n uint64, fast bool) {
	off = uint64(sliceAddr(buf)) & (1<<m.shift - 1)
	n = (off+uint64(len(buf))-1)>>m.shift + 1
	// Coherent memory that wants its granules aligned (coherentGranules) does not come from a
	// magazine.
	aligned := code == codeCoherent && m.coherentGranules(len(buf)) > 1
	return off, n, m.mags != nil && n <= magMax && !aligned && code != codeRegistered
}

// coherentGranules returns the alignment, in granules, of the first granule of coherent memory of
// size bytes (iommu_dma_alloc_iova's size-aligned alloc_iova): dma_alloc_coherent's handle is
// aligned as its CPU address is, to coherentAlign(size), whatever the granule (Pool relies on it
// for blocks aligned beyond a granule). The bus address keeps the CPU address's offset in its
// granule, which is a multiple of coherentAlign(size) when that is at most a granule: then any
// granule will do (1).
func (m *IOMMU) coherentGranules(size int) uint64 {
	return max(1, uint64(coherentAlign(size))>>m.shift)
}

// mapFast is the common map (iommu_dma_map_page with alloc_iova_fast hitting its per-CPU
// magazine): if plan allows it and the P's magazine has the granules, it takes them and publishes
// the mapping in the index (a record in the page lists if its set is full), with no mutex and no
// record template, and returns the bus address and the index entry's Sole handle (0: a record,
// made with the public code); otherwise ok is false and nothing changed.
func (m *IOMMU) mapFast(buf []byte, dir Direction, code uint64, region *Region) (Addr, Sole, bool) {
	off, n, fast := m.plan(buf, code)
	if !fast {
		return 0, 0, false
	}
	// Take the granules and fill their entry in one pinned section: a low entry of a block this
	// P owns is filled with plain stores (index.go, "Plain fills of a P's own block").
	id := pcpu.Pin()
	g, ok := m.takePinned(id, n)
	if !ok {
		pcpu.Unpin()
		return 0, 0, false
	}
	addr := Addr(g<<m.shift | off)
	h := m.tab.tryIndexPinned(id, addr, buf, dir, code, region)
	pcpu.Unpin()
	if h == 0 {
		v := record{addr: addr, buf: buf, dir: dir, kind: codeKind(code), region: region}
		m.insertUnlocked(&v) // with the public code
	}
	return addr, h, true
}

// insertUnlocked publishes the record template r of fresh granules from a magazine, with neither
// the allocator's mutex held nor the P pinned: in the index (insert) if its blocks are not owned,
// else in the page lists, since only the owning P's pinned maps and the mutex's holder fill the
// index then (index.go, "Plain fills of a P's own block").
func (m *IOMMU) insertUnlocked(r *record) {
	if m.tab.owned {
		m.tab.insertLists(r)
		return
	}
	m.tab.insert(r)
}

// assignSlow is assign once the magazine had nothing for r (or r may not use it): under mu, a
// new run for the magazine (fast), else granules from the cursor. off and n are plan's.
func (m *IOMMU) assignSlow(r *record, off, n uint64, fast bool) error {
	align := uint64(1)
	if r.kind == KindCoherent {
		align = m.coherentGranules(len(r.buf))
	}
	m.mu.Lock()
	if fast {
		if g, published, ok := m.refill(n, off, r); ok {
			if !published { // under mu: a fill by the mutex's holder (index.go)
				r.addr = Addr(g<<m.shift | off)
				m.tab.insert(r)
			}
			m.mu.Unlock()
			return nil
		}
	}
	defer m.mu.Unlock()
	if n == 1 && align == 1 {
		return m.assignOne(r, off)
	}
	start, ok := m.findFree(n, align)
	if !ok {
		if align > 1 { // coherent memory: the run must start at a multiple of align
			return fmt.Errorf("dma: IOVA space full: no run of %d free granules aligned to %d granules of %d: %w", n, align, m.spacePages, ErrMapping)
		}
		return fmt.Errorf("dma: IOVA space full: no %d free granules of %d: %w", n, m.spacePages, ErrMapping)
	}
	r.addr = Addr(start<<m.shift | off)
	m.tab.insert(r) // copies r: the caller's template stays its own
	m.cursor = start + n
	return nil
}

// assignOne is assign for a mapping within one granule (the common case: a descriptor-sized
// buffer): it looks for the first free granule at or after the cursor, wrapping once to granule
// 1, and publishes the record there under the same hold of the granule's stripe lock that found
// it free (insertIfFree), one lock instead of findFree's and insert's two. mu held.
func (m *IOMMU) assignOne(r *record, off uint64) error {
	c := m.cursor
	for scanned := uint64(0); scanned <= m.spacePages; {
		if c >= m.spacePages {
			scanned += m.spacePages - c
			c = 1
			m.epoch.Add(1) // the cursor wraps: magazines of the old epoch are dropped (iova.go)
			continue
		}
		r.addr = Addr(c<<m.shift | off)
		next, ok := m.tab.insertIfFree(c, r)
		if ok {
			m.cursor = c + 1
			return nil
		}
		if next <= c { // cannot happen (the occupant ends past c); never loop forever
			next = c + 1
		}
		scanned += next - c
		c = next
	}
	return fmt.Errorf("dma: IOVA space full: no free granule of %d: %w", m.spacePages, ErrMapping)
}

// findFree returns the first run of n free granules starting at a multiple of align (a power of
// two) at or after the cursor, wrapping once to granule 1. A granule is free if no record touches
// it in the page table; on an occupied granule the search jumps past the mapping there. Called
// with mu held: only mu holders insert, so a run found free stays free until published. Unmaps
// may run concurrently, which only frees granules.
func (m *IOMMU) findFree(n, align uint64) (uint64, bool) {
	if n >= m.spacePages {
		return 0, false
	}
	c := m.cursor
	for scanned := uint64(0); scanned <= m.spacePages; {
		up := (c + align - 1) &^ (align - 1) // c <= spacePages here
		if up >= m.spacePages || n > m.spacePages-up {
			scanned += m.spacePages - c
			c = 1
			m.epoch.Add(1) // the cursor wraps: magazines of the old epoch are dropped (iova.go)
			continue
		}
		scanned += up - c
		c = up
		next := uint64(0)
		for pg := c; pg < c+n; pg++ {
			if next = m.tab.occupant(pg); next != 0 {
				break
			}
		}
		if next == 0 {
			return c, true
		}
		if next <= c { // cannot happen (the occupant ends past c); never loop forever
			next = c + 1
		}
		scanned += next - c
		c = next
	}
	return 0, false
}

var _ Mapper = (*IOMMU)(nil)
