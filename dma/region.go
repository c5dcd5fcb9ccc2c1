package dma

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// PageSize is the size of a Page and the granule of AllocPages: 4096 bytes, the kernel's
// PAGE_SIZE on x86 and the common arm64 configuration. It is fixed rather than read from the OS
// so that bus addresses and test expectations are the same on every machine; mmap returns memory
// aligned to the OS page size, which is a multiple of 4096 on every Linux port.
const PageSize = 4096

// regionClosed is the high bit of Region.state; the low bits count pins.
const regionClosed = uint64(1) << 63

// Region is a run of page-aligned memory outside the Go heap (anonymous mmap), the pages a
// driver would get from alloc_pages. Its bytes never move and are not scanned by the GC.
//
// A Region is safe for concurrent use. Close releases it; every mapping of its memory (MapPage,
// MapSingle of its bytes, coherent memory) pins it, and the memory is unmapped from the process
// only when it is closed and the last pin is gone, so the device side can never touch released
// memory. Mapping a closed region is ErrClosed: through a Page (MapPage) always, and through a
// slice of its bytes (MapSingle, MapSG) for as long as the memory is not yet released. Slices
// obtained from Bytes or Page.Bytes must not be used at all once the region is closed and
// unmapped: like reading them, mapping them then is a use after free that cannot be detected
// (the address range may already belong to other memory).
type Region struct {
	mem  []byte  // the mmap'd bytes; written by AllocPages only, read by anyone
	base uintptr // address of mem[0]; immutable, the key of the region registry
	n    int     // number of pages; immutable

	// state: bit 63 = closed (set once by Close), bits 0..62 = live mappings pinning the region.
	// Mappers increment it on map (CAS, refused once closed) and decrement it on unmap; whoever
	// takes it to exactly "closed, no pins" releases the memory, so release happens once.
	state atomic.Uint64
}

// AllocPages allocates n zeroed, page-aligned pages outside the Go heap (alloc_pages, via
// mmap(MAP_ANONYMOUS|MAP_PRIVATE)).
func AllocPages(n int) (*Region, error) {
	return allocPagesAligned(n, PageSize)
}

// allocPagesAligned is AllocPages with the first page aligned to align (a power of two, at least
// PageSize): alloc_pages of the order that covers n pages, without keeping the pages past n.
func allocPagesAligned(n, align int) (*Region, error) {
	if n <= 0 || n > (int(^uint(0)>>1)-(align-PageSize))/PageSize {
		return nil, fmt.Errorf("dma: AllocPages(%d): %w", n, ErrInvalid)
	}
	mem, err := mmapAligned(n*PageSize, align)
	if err != nil {
		return nil, fmt.Errorf("dma: AllocPages(%d): mmap: %w", n, err)
	}
	r := &Region{mem: mem, base: sliceAddr(mem), n: n}
	registerRegion(r)
	return r, nil
}

// NumPages returns the number of pages in r.
func (r *Region) NumPages() int { return r.n }

// Closed reports whether Close has been called.
func (r *Region) Closed() bool { return r.state.Load()&regionClosed != 0 }

// Bytes returns all of r's memory, NumPages()*PageSize bytes, or nil once r is closed. The
// slice is valid until Close.
func (r *Region) Bytes() []byte {
	if r.Closed() {
		return nil
	}
	return r.mem[:len(r.mem):len(r.mem)]
}

// Page returns page i of r (the struct page of the i-th page). It fails with ErrInvalid for an
// index out of range and ErrClosed for a closed region.
func (r *Region) Page(i int) (Page, error) {
	if i < 0 || i >= r.n {
		return Page{}, fmt.Errorf("dma: page %d of %d: %w", i, r.n, ErrInvalid)
	}
	if r.Closed() {
		return Page{}, ErrClosed
	}
	return Page{r: r, i: i}, nil
}

// Close releases r (free_pages). Using a closed region is ErrClosed. If mappings of r's memory are
// still live, the release is deferred to the last unmap and Close reports them with an error
// matching ErrBusy; r is closed either way. A second Close returns ErrClosed; Close of a Region
// that AllocPages did not make (the zero one) is ErrInvalid.
func (r *Region) Close() error {
	if r.mem == nil { // the zero Region: nothing to release (release would munmap nothing)
		return fmt.Errorf("dma: close of a Region that AllocPages did not make: %w", ErrInvalid)
	}
	old := r.state.Or(regionClosed)
	if old&regionClosed != 0 {
		return ErrClosed
	}
	if old == 0 {
		return r.release()
	}
	return fmt.Errorf("dma: region closed with %d live mappings, released at the last unmap: %w", old, ErrBusy)
}

// pin records a live mapping of r's memory; it fails with ErrClosed once r is closed.
func (r *Region) pin() error {
	for {
		old := r.state.Load()
		if old&regionClosed != 0 {
			return ErrClosed
		}
		if r.state.CompareAndSwap(old, old+1) {
			return nil
		}
	}
}

// unpin drops a pin taken by pin, releasing the memory if r is closed and this was the last.
func (r *Region) unpin() {
	if r.state.Add(^uint64(0)) == regionClosed {
		_ = r.release() // munmap of a region we mapped cannot fail in a way the caller can act on
	}
}

// release unmaps the memory; called exactly once (see state).
func (r *Region) release() error {
	unregisterRegion(r)
	return munmapBytes(r.mem)
}

// Page is one page of a Region (struct page): the region and the page's index in it. The zero
// Page is invalid. Pages are values; they are safe for concurrent use.
type Page struct {
	r *Region
	i int
}

// Index returns the page's index in its region.
func (p Page) Index() int { return p.i }

// Region returns the page's region (nil for the zero Page).
func (p Page) Region() *Region { return p.r }

// Valid reports whether p is a page of an open region.
func (p Page) Valid() bool { return p.r != nil && p.i >= 0 && p.i < p.r.n && !p.r.Closed() }

// Bytes returns the page's PageSize bytes (page_address), or nil if the page is invalid or its
// region closed. The slice is valid until the region is closed.
func (p Page) Bytes() []byte {
	if !p.Valid() {
		return nil
	}
	off := p.i * PageSize
	return p.r.mem[off : off+PageSize : off+PageSize]
}

// The region registry lets MapSingle and MapSG find the Region behind a buffer and pin it, so that
// memory a device may still read is never munmapped under it. Readers load an immutable sorted
// snapshot (no lock on the map path); AllocPages and release copy it under regionsMu.
var (
	regionsMu  sync.Mutex                 // serialises writers of regionList and regionSpan
	regionList atomic.Pointer[regionSnap] // store-release of a new snapshot; readers load-acquire
	// regionSpan is the latest snapshot's [lo, hi) (hi 0: no region), stored by storeRegions
	// (regionsMu held) before the snapshot, loaded by the map paths' first check (mayBeRegion,
	// mayOverlapRegion): two adjacent words, where the snapshot's span cost a load of the
	// pointer and a line more per map. The words may come from two snapshots (a map that races
	// a registration or release of another region), and every snapshot from a region's
	// registration to its release spans it, so both words cover the region of a buffer mapped
	// in that time, the only time its memory may be handed to a map.
	regionSpan struct{ lo, hi atomic.Uintptr }
)

// regionSnap is one immutable snapshot of the registry: the regions sorted by base, and the span
// [lo, hi) from the first one's base to the end of the last one. Every map call of Go heap memory
// asks the registry, and the heap lies outside the span of the regions in the common case (the
// Go heap's arenas and anonymous mmaps are apart), so a compare answers it without the search.
type regionSnap struct {
	l      []*Region
	lo, hi uintptr
}

// storeRegions publishes a snapshot of l (sorted by base). regionsMu held.
func storeRegions(l []*Region) {
	s := &regionSnap{l: l}
	if n := len(l); n > 0 {
		s.lo = l[0].base
		for _, r := range l {
			s.hi = max(s.hi, r.base+uintptr(len(r.mem)))
		}
	}
	regionSpan.lo.Store(s.lo)
	regionSpan.hi.Store(s.hi)
	regionList.Store(s)
}

func registerRegion(r *Region) {
	regionsMu.Lock()
	defer regionsMu.Unlock()
	var old []*Region
	if p := regionList.Load(); p != nil {
		old = p.l
	}
	i := sort.Search(len(old), func(i int) bool { return old[i].base > r.base })
	l := make([]*Region, 0, len(old)+1)
	l = append(l, old[:i]...)
	l = append(l, r)
	l = append(l, old[i:]...)
	storeRegions(l)
}

func unregisterRegion(r *Region) {
	regionsMu.Lock()
	defer regionsMu.Unlock()
	old := regionList.Load().l
	l := make([]*Region, 0, len(old))
	for _, x := range old {
		if x != r {
			l = append(l, x)
		}
	}
	storeRegions(l)
}

// regionOf returns the registered region holding address a, or nil (Go heap memory).
func regionOf(a uintptr) *Region {
	p := regionList.Load()
	if p == nil || a < p.lo || a >= p.hi {
		return nil
	}
	l := p.l
	lo, hi := 0, len(l)
	for lo < hi { // first region with base > a
		m := int(uint(lo+hi) >> 1)
		if l[m].base > a {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == 0 {
		return nil
	}
	r := l[lo-1]
	if a-r.base < uintptr(len(r.mem)) {
		return r
	}
	return nil
}

// mayBeRegion reports whether a may lie in a Region: regionOf's first check, inlined into the map
// path, so that a Go heap buffer outside every region's span costs no call. false: a is in none
// (pinBuf would return nil); true: ask pinBuf.
func mayBeRegion(a uintptr) bool {
	return a < regionSpan.hi.Load() && a >= regionSpan.lo.Load()
}

// mayOverlapRegion reports whether any byte of [a, a+n) (n >= 1; a Go slice does not wrap the
// address space) may lie in a Region: mayBeRegion for every byte of a buffer, with the same
// compares, for the fast maps of buffers of several pages (direct_fast.go, iommu_fast.go). false:
// no byte is in a region, so the buffer is Go memory and the general path (pinBuf, which asks
// about the first byte) would map it with no region too; true: the general path decides.
func mayOverlapRegion(a, n uintptr) bool {
	return a < regionSpan.hi.Load() && a+n > regionSpan.lo.Load()
}

// pinBuf pins the region behind buf, if any, and returns it.
func pinBuf(buf []byte) (*Region, error) {
	for range 3 { // a region released and its address reused between lookup and pin: look again
		r := regionOf(sliceAddr(buf))
		if r == nil {
			return nil, nil
		}
		if err := r.pin(); err == nil {
			return r, nil
		}
		if regionOf(sliceAddr(buf)) == r {
			return nil, fmt.Errorf("dma: buffer in a closed region: %w", ErrClosed)
		}
	}
	return nil, fmt.Errorf("dma: buffer in a closed region: %w", ErrClosed)
}
