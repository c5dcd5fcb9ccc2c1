package dma

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/cpu"

	"github.com/gosdma/gosdma/internal/cacheline"
)

// A mapping record is the mapper's struct dma_debug_entry: one live map call that is not in the
// index (index.go): a mapping of more than spanMax pages, or one whose index set was full. Its fields
// are written before the record is published into the page lists (under a stripe lock) and not
// changed until it has been removed from every stripe again; readers only look at it while holding
// a stripe's lock, so the stripe locks order every access. Mappings in the index have no record:
// their entry is all there is.
//
// Publication hands the record over: once it is on its first page (which insert does last) any
// unmap of an identical mapping may claim it, remove it and recycle it (Direct's mappings of the
// same buffer are interchangeable), so the mapping goroutine must not read it again; insert
// returns nothing and the mappers take the address from their own copy.
//
// Records are recycled so that map+unmap does not allocate in steady state. A record on one page
// only lives its whole life under the lock of that page's stripe: taken from the stripe's free
// list (a new one if it is empty), filled and published under one hold of the lock, and claimed,
// cleared and put back on the free list (dropped if it is full) under one hold. The table's
// sync.Pool holds the records of several pages, which are published and removed one stripe at a
// time.
type record struct {
	addr   Addr      // bus address of buf[0]
	buf    []byte    // the mapped bytes; keeps Go heap memory alive while mapped
	dir    Direction // mapping direction
	kind   Kind      // Kind* constant
	region *Region   // pinned region behind buf, or nil for Go heap memory
}

func (r *record) size() int { return len(r.buf) }

// end is one past the last bus address (no overflow: mapped ranges fit in the address space).
func (r *record) end() Addr { return r.addr + Addr(len(r.buf)) }

// pageList holds the records touching one page of bus address space. The IOMMU has at most one
// per page; Direct may have many (small buffers sharing a page, or one buffer mapped twice).
type pageList struct{ recs []*record }

const (
	stripeBits = 6
	nStripes   = 1 << stripeBits

	// maxEmpty is how many empty page lists a stripe keeps in its map. A page whose last record
	// is unmapped keeps its (empty) list in the map while the stripe has fewer than this many, so
	// that the next mapping of that page (a sender reusing its buffers maps the same pages over
	// and over) finds it with a lookup instead of a map insert, and the unmap costs no map
	// delete. Beyond it, the list is deleted from the map and kept on the free list.
	maxEmpty = 16
	// maxFree bounds each stripe's free lists (page lists and records) unless more records were
	// live on the stripe at once (stripe.peak).
	maxFree = 64
)

// slot is one direct-mapped page list of a stripe (stripe.slots): pl, if not nil, is page pg's.
type slot struct {
	pg uint64
	pl *pageList
}

// nSlots is the number of slots per stripe (a power of two).
const (
	slotBits = 4
	nSlots   = 1 << slotBits
)

// stripe is one shard of the table: the pages whose number hashes to it.
type stripe struct {
	// mu guards the page lists and everything below but pairs: map and unmap of
	// mappings that are not in the index hold it to change them, Live, LiveCount, the IOVA
	// allocator's occupancy checks and a Translate that needs the page lists to read them. A
	// plain mutex (see the package documentation for why not an RWMutex). The index needs no lock.
	mu sync.Mutex
	// pairs counts the (page, record) pairs in this stripe's page lists, that is how many
	// mappings a reader of the index cannot see. Written under mu (a store when it changes),
	// loaded by readers: zero lets a Translate that found no answer in the index report it
	// without the lock.
	pairs atomic.Int64
	m     map[uint64]*pageList // page number -> records touching it (possibly none); guarded by mu
	// lastPg, lastPl cache the last entry of m found or made (lastPl nil: none): a sender reusing
	// its buffers maps, translates and unmaps the same page in turn, and a compare is cheaper than
	// the map lookup. lastPl is always lastPg's list (in m or in its slot) or nil. Guarded by mu.
	lastPg uint64
	lastPl *pageList
	// keepEmpty says whether empty lists stay in m (see maxEmpty): for Direct, whose pages are
	// the CPU's and come back as buffers are reused, not for the IOMMU, which hands out fresh
	// granules until its space wraps. Immutable.
	keepEmpty bool
	empty     int // lists in m with no record (at most maxEmpty); guarded by mu
	live      int // live records (not index entries) whose first page hashes here; guarded by mu
	// peak is the most records live here at once (live's high-water mark): the free lists keep
	// up to max(maxFree, peak) records and page lists, so that a sender whose mappings overflow
	// the index in bursts (many packets in flight mapping the same pages) reuses the records of
	// its last burst instead of allocating each time. Guarded by mu.
	peak int
	free []*pageList // empty lists out of m, kept for reuse; guarded by mu
	recs []*record   // cleared single-page records, kept for reuse; guarded by mu
	// slots (the IOMMU's, !keepEmpty) hold page lists in front of m, direct-mapped by page number:
	// the IOMMU hands out fresh granules, so without them every mapping would be a map insert and
	// every unmap a map delete. A page's list is in its slot (slots[i].pg == pg) or in m, never
	// both; a slot whose list is empty is vacant: the next new page of that slot takes it over,
	// list and all. Guarded by mu.
	slots [nSlots]slot
	_     cpu.CacheLinePad // stripes on separate cache lines: translations of different pages do not share a lock word
}

// ownerWord is one block's owner (table.owners), alone on its cache lines.
type ownerWord struct {
	atomic.Int32
	_ [cacheline.Pad - 4]byte
}

// table maps page numbers of bus address space to mappings. It is striped by page number: there
// is no global lock, a translation reads one stripe's index with no lock (index.go), and a
// mapping of n pages takes n stripe locks one after the other (never two at once, so no lock
// order); a mapping of one page takes one.
type table struct {
	// The table's head: with core.regs.set before it, the first cache line of a Direct's or an
	// IOMMU's core (TestMapperHotLine), which holds every word of the mapper that the per-packet
	// fast paths read (direct_fast.go, iommu_fast.go, sole_translate.go): a packet's map,
	// translation and unmap touch this one line of the mapper and their index entry's, where
	// these words were spread over four lines (the index pointer behind the owners' blocks, the
	// hooks behind the stripes), each a line more that the copy of a large packet, which fills
	// the L1 cache, evicted and missed on per packet.

	// ents is the whole index, every stripe's in stripe order; the IOMMU's sets
	// span it (set). The pointer is set by init and immutable; the entries are read and
	// written with atomic operations only, by anyone.
	ents *[nIndex]entry
	// setHalf, setMask and setSel are derived from setBits (useSets) for set: half the entries in
	// use and their mask (the IOMMU), and the mask of the hash bits that pick a stripe's set
	// (Direct). Set before the table is used; immutable.
	setHalf, setMask, setSel uint64
	// testMidRead, if set, runs in Translate between the loads of a matching index entry's words
	// (the window in which a writer may recycle the entry). Tests only; set before use.
	testMidRead func()
	// testPublished, if set, runs in mapBuf after the record is published and before the map
	// returns (the window in which an unmap of an identical mapping may claim it). Tests only;
	// set before use. (core's hook, here for the head line: the fast maps test it.)
	testPublished func()
	// spillOnly keeps every mapping out of the index (tests of the page lists only). Set before
	// the table is used; immutable.
	spillOnly bool
	// owned says whether the IOMMU's index's low half is owned by Ps block by block (see "Plain
	// fills of a P's own block" in index.go): derived from ownPs and setBits (setOwners), before
	// the table is used; immutable.
	owned bool

	// The rest: read by the general paths.

	shift uint // log2 of the page granule; immutable
	// keyShift turns a mapping's first bus address into its index key: 0 for Direct (the
	// address), shift for the IOMMU (the granule). Immutable.
	keyShift uint
	// setBits is log2 of the sets of each stripe's index that are used: setBits, or fewer in
	// tests that want entries reused and sets full. Set before the table is used; immutable.
	setBits uint
	// ownPs is the number of per-P IOVA magazines of the IOMMU whose index this is (0: none, or
	// Direct), set by NewIOMMU before the table is used; immutable.
	ownPs int
	// owners[b] is the P (its index plus one, 0: none) that owns block b of the index's low half.
	// Stored by the IOMMU's refill (mu held, pinned to the P that claims or releases); loaded by
	// fills pinned to a P (does it own the block?) and by refill. One word per cache-line pair
	// (ownerWord): a P's fast map loads its own block's word, which another P's refill, claiming
	// and releasing other blocks, then does not write.
	owners  [nOwnBlocks]ownerWord
	stripes [nStripes]stripe
	// pool recycles records of several pages (see record).
	pool sync.Pool
}

func (t *table) init(shift uint, keepEmpty bool) {
	t.shift = shift
	t.useSets(setBits)
	if !keepEmpty { // the IOMMU: one mapping per granule, keyed by granule
		t.keyShift = shift
	}
	t.ents = new([nIndex]entry)
	for i := range t.stripes {
		t.stripes[i].m = make(map[uint64]*pageList)
		t.stripes[i].keepEmpty = keepEmpty
		if !keepEmpty { // the slots' lists up front: a fresh slot then allocates nothing
			lists := make([]pageList, nSlots)
			for j := range t.stripes[i].slots {
				lists[j].recs = make([]*record, 0, 1)
				t.stripes[i].slots[j] = slot{pg: ^uint64(0), pl: &lists[j]}
			}
		}
	}
	t.pool.New = func() any { return new(record) }
}

func (t *table) stripe(page uint64) *stripe { return &t.stripes[t.stripeIndex(page)] }

// stripeIndex hashes a page number to its stripe (Fibonacci hashing: neighbouring pages land on
// different stripes).
func (t *table) stripeIndex(page uint64) uint {
	return uint((page * 0x9E3779B97F4A7C15) >> (64 - stripeBits))
}

// slotOf returns page pg's slot in its stripe: the hash bits after the stripe's.
func (s *stripe) slotOf(pg uint64) *slot {
	return &s.slots[(pg*0x9E3779B97F4A7C15)>>(64-stripeBits-slotBits)&(nSlots-1)]
}

// list returns the list of page pg, making it if needed. s is pg's stripe, locked.
func (s *stripe) list(pg uint64) *pageList {
	pl := s.get(pg)
	if pl != nil {
		if len(pl.recs) == 0 && s.keepEmpty {
			s.empty--
		}
		return pl
	}
	if !s.keepEmpty {
		if sl := s.slotOf(pg); sl.pl == nil || len(sl.pl.recs) == 0 {
			// The slot is free or vacant: it becomes pg's, with its list if it has one.
			if sl.pl == nil {
				sl.pl = s.newList()
			}
			sl.pg = pg
			s.lastPg, s.lastPl = pg, sl.pl
			return sl.pl
		}
	}
	pl = s.newList()
	s.m[pg] = pl
	s.lastPg, s.lastPl = pg, pl
	return pl
}

// newList returns an empty page list from the free list, or a new one. s locked.
func (s *stripe) newList() *pageList {
	var pl *pageList
	if n := len(s.free); n > 0 {
		pl = s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
	} else {
		pl = new(pageList)
	}
	return pl
}

// get returns m[pg] through the one-entry cache; s is pg's stripe, locked.
func (s *stripe) get(pg uint64) *pageList {
	if s.lastPl != nil && s.lastPg == pg {
		return s.lastPl
	}
	if !s.keepEmpty {
		if sl := s.slotOf(pg); sl.pl != nil && sl.pg == pg {
			s.lastPg, s.lastPl = pg, sl.pl
			return sl.pl
		}
	}
	pl := s.m[pg]
	if pl != nil {
		s.lastPg, s.lastPl = pg, pl
	}
	return pl
}

// insert publishes a record holding v's fields on every page it touches, the first page last:
// claim looks for a record on its first page only, so it must not be claimable before it is on all
// of them (else an unmap of an identical mapping could claim it, find it on no further page,
// recycle it, and insert would then add the recycled record to the remaining pages).
func (t *table) insert(v *record) {
	// Into the index with no lock if it fits (at most spanMax pages), else a record.
	if t.tryIndex(v.addr, v.buf, v.dir, kindCode(v.kind), v.region) != 0 {
		return
	}
	t.insertLists(v)
}

// insertLists is insert into the page lists only (a record), not the index.
func (t *table) insertLists(v *record) {
	first, last := uint64(v.addr)>>t.shift, uint64(v.end()-1)>>t.shift
	if first == last {
		// One page: a record filled and published under one hold of the lock.
		s := t.stripe(first)
		s.mu.Lock()
		s.insertList(first, v)
		s.mu.Unlock()
		return
	}
	r := t.pool.Get().(*record)
	*r = *v
	for pg := last; ; pg-- {
		s := t.stripe(pg)
		s.mu.Lock()
		s.add(pg, r)
		if pg == first {
			s.live++
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// insertList publishes a record holding v's fields, which lie in page pg alone, on pg's page
// list; s is pg's stripe, locked. The record comes from s's free list (a new one if it is empty).
func (s *stripe) insertList(pg uint64, v *record) {
	var r *record
	if n := len(s.recs); n > 0 {
		r = s.recs[n-1]
		s.recs[n-1] = nil
		s.recs = s.recs[:n-1]
	} else {
		r = new(record)
	}
	*r = *v
	s.add(pg, r)
	if s.live++; s.live > s.peak {
		s.peak = s.live
	}
}

// add appends r to the list of page pg and counts the pair; s is pg's stripe, locked.
func (s *stripe) add(pg uint64, r *record) {
	pl := s.list(pg)
	pl.recs = append(pl.recs, r)
	s.pairs.Store(s.pairs.Load() + 1)
}

// insertIfFree publishes a mapping with v's fields, which lie in granule pg alone, if no mapping
// touches pg; otherwise it returns the end granule (exclusive) of a mapping there, as occupant
// does. For the IOMMU's allocator (its mu held: no other map fills the table at the same time,
// and unmaps only free granules). With no record on the stripe's page lists it checks and fills
// the index with no lock; otherwise it checks and publishes under one hold of the stripe lock.
func (t *table) insertIfFree(pg uint64, v *record) (next uint64, ok bool) {
	s := t.stripe(pg)
	code := kindCode(v.kind)
	if s.pairs.Load() == 0 {
		if next = t.indexOccupant(pg); next != 0 {
			return next, false
		}
		if t.tryIndex(v.addr, v.buf, v.dir, code, v.region) != 0 {
			return 0, true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if next = s.occupantLocked(t, pg); next != 0 {
		return next, false
	}
	if t.tryIndex(v.addr, v.buf, v.dir, code, v.region) == 0 {
		s.insertList(pg, v)
	}
	return 0, true
}

// drop removes record i from the list of page pg; s is pg's stripe, locked.
func (s *stripe) drop(pg uint64, pl *pageList, i int) {
	n := len(pl.recs) - 1
	pl.recs[i] = pl.recs[n]
	pl.recs[n] = nil
	pl.recs = pl.recs[:n]
	s.pairs.Store(s.pairs.Load() - 1)
	if n == 0 {
		if s.keepEmpty && s.empty < maxEmpty {
			s.empty++ // stays in m for the page's next mapping
			return
		}
		if !s.keepEmpty && s.slotOf(pg).pl == pl {
			return // vacant in its slot, for the next new page there
		}
		delete(s.m, pg)
		if s.lastPl == pl {
			s.lastPl = nil
		}
		if len(s.free) < s.keep() {
			s.free = append(s.free, pl)
		}
	}
}

// remove unmaps the live record mapped at exactly (addr, size, dir, kind): it claims the record
// by removing it from its first page (of two goroutines unmapping the same mapping, only one finds
// it), removes it from its other pages and recycles it. It returns the record's pinned region
// (the caller unpins it) and whether a record was found.
func (t *table) remove(addr Addr, size int, dir Direction, kind Kind) (*Region, bool) {
	if reg, ok := t.claimIndex(addr, size, dir, kindCode(kind)); ok {
		return reg, true
	}
	return t.removeLists(addr, size, dir, kind)
}

// removeLists is remove of a mapping that is not in the index: a record of the page lists.
func (t *table) removeLists(addr Addr, size int, dir Direction, kind Kind) (*Region, bool) {
	pg := uint64(addr) >> t.shift
	s := t.stripe(pg)
	s.mu.Lock()
	r := s.claim(pg, addr, size, dir, kind)
	if r == nil {
		s.mu.Unlock()
		return nil, false
	}
	reg := r.region
	if uint64(r.end()-1)>>t.shift == pg {
		// One page: it is on no other list; recycle it under the same hold.
		s.recycle(r)
		s.mu.Unlock()
		return reg, true
	}
	s.mu.Unlock()
	t.removeRest(r)
	*r = record{}
	t.pool.Put(r)
	return reg, true
}

// claim removes the live record mapped at exactly (addr, size, dir, kind) from the list of its
// first page pg and returns it, or nil if there is none; s is pg's stripe, locked. Once claimed
// the record is the caller's: it still sits on its later pages (removeRest takes it off).
func (s *stripe) claim(pg uint64, addr Addr, size int, dir Direction, kind Kind) *record {
	if s.pairs.Load() == 0 {
		return nil // no page list holds a record
	}
	pl := s.get(pg)
	if pl == nil {
		return nil
	}
	for i, r := range pl.recs {
		if r.addr == addr && r.size() == size && r.dir == dir && r.kind == kind {
			s.drop(pg, pl, i)
			s.live--
			return r
		}
	}
	return nil
}

// recycle clears a claimed single-page record and keeps it on s's free list (for the garbage
// collector beyond keep); s is locked.
func (s *stripe) recycle(r *record) {
	*r = record{}
	if len(s.recs) < s.keep() {
		s.recs = append(s.recs, r)
	}
}

// keep is how many records, and how many empty page lists, s's free lists hold at most: maxFree,
// or the most records ever live on s at once (peak), whichever is more. s is locked.
func (s *stripe) keep() int { return max(maxFree, s.peak) }

// removeRest removes a claimed record from its pages after the first.
func (t *table) removeRest(r *record) {
	first, last := uint64(r.addr)>>t.shift, uint64(r.end()-1)>>t.shift
	for pg := first + 1; pg <= last && pg > first; pg++ {
		s := t.stripe(pg)
		s.mu.Lock()
		if pl := s.get(pg); pl != nil {
			for i, x := range pl.recs {
				if x == r {
					s.drop(pg, pl, i)
					break
				}
			}
		}
		s.mu.Unlock()
	}
}

// lookup returns the bytes behind [addr, addr+size) if one live mapping holds the whole range and
// allows access, else the reason it does not. It reads the index of addr's stripe with no lock
// (index.go) and takes the stripe's lock only if the index has no answer while the stripe's page
// lists hold records. It does not allocate. The result is a subslice of the mapped buffer:
// nothing outside the mapping is ever reachable through it. If exact (sync checks, dma-debug's
// check_sync), access must equal the mapping's direction unless the mapping is bidirectional.
func (t *table) lookup(addr Addr, size int, access Direction, exact bool) ([]byte, FaultReason) {
	end := addr + Addr(size)
	if size <= 0 || end < addr {
		return nil, ReasonBadLength
	}
	if b, ok := t.fast(addr, size, access, exact); ok {
		return b, ""
	}
	return t.lookupSlow(addr, size, access, exact)
}

// lookupSlow is lookup once fast found no answer (size > 0 and addr+size does not wrap).
func (t *table) lookupSlow(addr Addr, size int, access Direction, exact bool) ([]byte, FaultReason) {
	end := addr + Addr(size)
	pg := uint64(addr) >> t.shift
	s := t.stripe(pg)
	// A mapping live for the whole call is in the index or in the page lists, and stays where it
	// is: each place is asked once, the page lists (mappings of several pages) before Direct's
	// scan of the whole index (an address inside a small buffer), which costs more.
	pr := probe{addr: addr, end: end, access: access, exact: exact, mid: t.testMidRead, reason: ReasonNotMapped}
	if t.scanSets(&pr) {
		return bytesAt(pr.p, int(addr-pr.base), size), ""
	}
	if s.pairs.Load() != 0 {
		s.mu.Lock()
		b, ok := s.lookupLists(pg, &pr)
		s.mu.Unlock()
		if ok {
			return b, ""
		}
	}
	if t.scanBack(&pr) || t.keyShift == 0 && t.scanAll(&pr) {
		return bytesAt(pr.p, int(addr-pr.base), size), ""
	}
	return nil, pr.reason
}

// lookupLists answers the probe from the page list of pg (s is pg's stripe, locked), keeping the
// best reason in pr if no record holds the range.
func (s *stripe) lookupLists(pg uint64, pr *probe) ([]byte, bool) {
	pl := s.get(pg)
	if pl == nil {
		return nil, false
	}
	for _, r := range pl.recs {
		if pr.addr < r.addr || pr.addr >= r.end() {
			continue
		}
		if pr.end > r.end() {
			pr.worse(ReasonPartlyMapped)
			continue
		}
		if pr.exact && r.dir != Bidirectional && r.dir != pr.access || !pr.exact && !r.dir.Allows(pr.access) {
			pr.worse(ReasonDirection)
			continue
		}
		off := int(pr.addr - r.addr)
		n := int(pr.end - pr.addr)
		return r.buf[off : off+n : off+n], true
	}
	return nil, false
}

// liveCount sums the stripes' live counts, one lock at a time.
func (t *table) liveCount() int {
	n := t.indexCount()
	for i := range t.stripes {
		s := &t.stripes[i]
		s.mu.Lock()
		n += s.live
		s.mu.Unlock()
	}
	return n
}

// live lists every live mapping once (records on their first page), sorted by address.
func (t *table) live() []Mapping {
	out := t.indexLive(nil)
	for i := range t.stripes {
		s := &t.stripes[i]
		s.mu.Lock()
		for pg, pl := range s.m {
			out = pl.appendFirst(out, pg, t.shift)
		}
		for _, sl := range s.slots {
			if sl.pl != nil {
				out = sl.pl.appendFirst(out, sl.pg, t.shift)
			}
		}
		s.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// appendFirst appends the records of pl (page pg's) whose first page is pg.
func (pl *pageList) appendFirst(out []Mapping, pg uint64, shift uint) []Mapping {
	for _, r := range pl.recs {
		if uint64(r.addr)>>shift == pg {
			out = append(out, Mapping{Addr: r.addr, Size: r.size(), Dir: r.dir, Kind: r.kind})
		}
	}
	return out
}

// occupant returns the end page (exclusive) of a mapping touching page pg, or 0 if pg is free.
func (t *table) occupant(pg uint64) uint64 {
	s := t.stripe(pg)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.occupantLocked(t, pg)
}

// occupantLocked is occupant with s, pg's stripe, locked. For the IOMMU (keyed by granule).
func (s *stripe) occupantLocked(t *table, pg uint64) uint64 {
	if next := t.indexOccupant(pg); next != 0 {
		return next
	}
	if pl := s.get(pg); pl != nil && len(pl.recs) > 0 {
		return uint64(pl.recs[0].end()-1)>>t.shift + 1
	}
	return 0
}

// core is what Direct and IOMMU share: the mapping table, counters, the Mapper methods.
type core struct {
	// regs (registered memory, register.go: a snapshot read with no lock) is the first word of
	// the mapper's head line, tab's head the rest (see table).
	regs
	tab table
	// regMu serialises writers of regs.set (Register, Deregister).
	regMu sync.Mutex
	// iommu is the IOMMU this core belongs to, or nil for Direct: it says how a new record gets
	// its bus address (Direct: its CPU address; IOMMU: IOMMU.assign), and holds the fault
	// injection on map calls (IOMMU.inj). A concrete pointer rather than a function value, so
	// that the record template mapBuf builds stays on its stack. Immutable.
	iommu *IOMMU

	// faults counts refused device accesses: incremented by Translate on a fault, read by Faults.
	faults atomic.Uint64
}

// injection returns the fault injection on map calls (an IOMMU's, IOMMU.inj), or nil for none.
func (c *core) injection() *injector {
	if c.iommu == nil {
		return nil
	}
	return c.iommu.inj
}

// injectFail reports whether this map call is chosen to fail by the fault injection, if any.
func (c *core) injectFail() bool {
	in := c.injection()
	return in != nil && in.fail()
}

func (c *core) init(shift uint, iommu *IOMMU) {
	c.tab.init(shift, iommu == nil)
	c.iommu = iommu
}

// mapBuf maps buf and returns its bus address and, if the mapping is in the index, its entry's
// Sole handle (else 0). region, if not nil, was pinned by the caller and the pin passes to the
// record (or is dropped on failure). inject says whether this call is subject to fault injection.
// code is the mapping's kind code; a sole one (codeSingleSole) is used for an index entry only:
// a mapping that goes to the page lists is made with the public code (see Sole).
func (c *core) mapBuf(buf []byte, dir Direction, code uint64, region *Region, inject bool) (Addr, Sole, error) {
	if len(buf) == 0 || !dir.Valid() {
		kind := codeKind(code)
		if region != nil {
			region.unpin()
		}
		return 0, 0, fmt.Errorf("dma: map %s of %d bytes %v: %w", kind, len(buf), dir, ErrInvalid)
	}
	// A buffer in a closed Region is refused (ErrClosed) before the injection's draw, as MapPage
	// refuses a closed region's page: a refused call is not a map call that injection counts.
	if region == nil && mayBeRegion(sliceAddr(buf)) {
		var err error
		if region, err = pinBuf(buf); err != nil {
			return 0, 0, err
		}
	}
	if inject && c.injectFail() {
		if region != nil {
			region.unpin()
		}
		return 0, 0, fmt.Errorf("dma: map %s (injected): %w", codeKind(code), ErrMapping)
	}
	if c.iommu != nil {
		return c.mapIOMMU(buf, dir, code, region)
	}
	addr := Addr(sliceAddr(buf)) // Direct: the bus address is the CPU address
	// A mapping of up to spanMax pages goes to the index (one CAS when the buffer was mapped
	// there before), unless its set is full.
	h := c.tab.tryIndex(addr, buf, dir, code, region)
	if h == 0 {
		c.insertSlow(addr, buf, dir, codeKind(code), region)
	}
	if f := c.tab.testPublished; f != nil {
		f()
	}
	return addr, h, nil
}

// insertSlow publishes a Direct mapping that is not in the index (several pages, or a full set)
// in the page lists. The address comes from the caller, never from the published record, which
// an unmap of an identical mapping (the same buffer mapped again) may claim and recycle at once.
func (c *core) insertSlow(addr Addr, buf []byte, dir Direction, kind Kind, region *Region) {
	v := record{addr: addr, buf: buf, dir: dir, kind: kind, region: region} // the template insert copies
	c.tab.insert(&v)
}

// mapIOMMU has the IOMMU allocate the bus address and publish the mapping. The pin of region
// passes to the mapping, or is dropped on failure.
func (c *core) mapIOMMU(buf []byte, dir Direction, code uint64, region *Region) (Addr, Sole, error) {
	if a, h, ok := c.iommu.mapFast(buf, dir, code, region); ok {
		return a, h, nil
	}
	v := record{buf: buf, dir: dir, kind: codeKind(code), region: region}
	if err := c.iommu.assign(&v); err != nil {
		if region != nil {
			region.unpin()
		}
		return 0, 0, err
	}
	return v.addr, 0, nil
}

// unmap is the public unmap of a mapping of kind code (dma_unmap_single and the others): the
// index, then the page lists; a KindSingle unmap that finds no public mapping revokes a sole one
// (see Sole).
func (c *core) unmap(addr Addr, size int, dir Direction, code uint64) error {
	reg, ok := c.tab.claimIndex(addr, size, dir, code)
	if !ok {
		reg, ok = c.tab.removeLists(addr, size, dir, codeKind(code))
	}
	if !ok && (code != codeSingle || !c.tab.revokeIndex(addr, size, dir)) {
		return fmt.Errorf("dma: unmap %s [%#x,+%d) %v: %w", codeKind(code), uint64(addr), size, dir, ErrNotMapped)
	}
	if reg != nil {
		reg.unpin()
	}
	return nil
}

// MapSingle maps buf for the device (dma_map_single, ib_dma_map_single). The record keeps buf
// reachable until it is unmapped. Memory of a Region is pinned so the region outlives the mapping.
func (c *core) MapSingle(buf []byte, dir Direction) (Addr, error) {
	a, _, err := c.mapBuf(buf, dir, codeSingle, nil, true)
	return a, err
}

// UnmapSingle undoes MapSingle (dma_unmap_single); addr, size and dir must match the map.
func (c *core) UnmapSingle(addr Addr, size int, dir Direction) error {
	return c.unmap(addr, size, dir, codeSingle)
}

// MapPage maps size bytes at offset in page p (dma_map_page, ib_dma_map_page); the range must lie
// in the page and the page's region must be open. The region is pinned until the unmap.
func (c *core) MapPage(p Page, offset, size int, dir Direction) (Addr, error) {
	if !pageRangeOK(p, offset, size) {
		return 0, fmt.Errorf("dma: map page %d offset %d size %d: %w", p.i, offset, size, ErrInvalid)
	}
	if err := p.r.pin(); err != nil {
		return 0, fmt.Errorf("dma: map page %d: %w", p.i, err)
	}
	off := p.i*PageSize + offset
	a, _, err := c.mapBuf(p.r.mem[off:off+size:off+size], dir, codePage, p.r, true)
	return a, err
}

// UnmapPage undoes MapPage (dma_unmap_page).
func (c *core) UnmapPage(addr Addr, size int, dir Direction) error {
	return c.unmap(addr, size, dir, codePage)
}

// MapSG maps every entry of sg, filling Addr and Len (dma_map_sg, ib_dma_map_sg). Entries are
// not merged, so it returns len(sg). On error nothing stays mapped and every entry's Addr and Len
// are zeroed (also those after the entry that failed, which may hold a reused list's old values:
// a cleanup that unmaps the entries with a length would otherwise unmap them a second time, or
// on Direct another live mapping of the same buffer).
func (c *core) MapSG(sg []SG, dir Direction) (int, error) {
	if len(sg) == 0 {
		return 0, fmt.Errorf("dma: map_sg of no entries: %w", ErrInvalid)
	}
	// A call refused for its arguments (a bad direction, an empty entry, memory of a closed
	// Region: the loop below refuses it, unmapping what it mapped) is not a map call that fault
	// injection counts, as MapSingle, MapPage and AllocCoherent check theirs before the draw.
	if c.injection() != nil && !refusedSG(sg, dir) && c.injectFail() {
		clearSG(sg)
		return 0, fmt.Errorf("dma: map_sg (injected): %w", ErrMapping)
	}
	for i := range sg {
		a, _, err := c.mapBuf(sg[i].Buf, dir, codeSG, nil, false) // the list is one map call for injection
		if err != nil {
			for j := range i {
				_ = c.unmap(sg[j].Addr, sg[j].Len, dir, codeSG)
			}
			clearSG(sg)
			return 0, fmt.Errorf("dma: map_sg entry %d: %w", i, err)
		}
		sg[i].Addr, sg[i].Len = a, len(sg[i].Buf)
	}
	return len(sg), nil
}

// clearSG zeroes the Addr and Len of every entry of sg (a failed MapSG's).
func clearSG(sg []SG) {
	for i := range sg {
		sg[i].Addr, sg[i].Len = 0, 0
	}
}

// UnmapSG undoes MapSG entry by entry (dma_unmap_sg), reporting every entry that was not mapped.
func (c *core) UnmapSG(sg []SG, dir Direction) error {
	var errs []error
	for i := range sg {
		if err := c.unmap(sg[i].Addr, sg[i].Len, dir, codeSG); err != nil {
			errs = append(errs, fmt.Errorf("entry %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func (c *core) sync(addr Addr, size int, dir Direction, what string) error {
	if !dir.Valid() {
		return fmt.Errorf("dma: %s [%#x,+%d) %v: %w", what, uint64(addr), size, dir, ErrInvalid)
	}
	if b, _ := c.lookupReg(addr, size, dir, true); b != nil {
		return nil
	}
	if _, reason := c.tab.lookup(addr, size, dir, true); reason != "" {
		return fmt.Errorf("dma: %s [%#x,+%d) %v: %s: %w", what, uint64(addr), size, dir, reason, ErrNotMapped)
	}
	return nil
}

// SyncForCPU (dma_sync_single_for_cpu) checks that [addr, addr+size) lies in one live mapping
// made with direction dir, or made bidirectional (dma-debug's check_sync); otherwise it fails
// with ErrNotMapped, and an invalid dir is ErrInvalid. The memory model here is cache-coherent,
// so there is nothing else to do.
func (c *core) SyncForCPU(addr Addr, size int, dir Direction) error {
	return c.sync(addr, size, dir, "sync_single_for_cpu")
}

// SyncForDevice is SyncForCPU's twin (dma_sync_single_for_device).
func (c *core) SyncForDevice(addr Addr, size int, dir Direction) error {
	return c.sync(addr, size, dir, "sync_single_for_device")
}

// Translate is the device side (see Mapper). Registered memory is found in the registrations'
// snapshot with no lock; any other range takes one stripe lock. No allocation on success. If a
// registration holds addr but refuses the access, the mapping table is asked too (on Direct a
// buffer may be both registered and mapped), and the registration's reason is reported only if
// the table has none better than "not mapped".
func (c *core) Translate(addr Addr, size int, access Direction) ([]byte, error) {
	// The common translation, with no call but fast's: no registrations, and a live mapping in
	// the index holds the range. (fast's checks leave no range longer than its mapping, so
	// addr+size does not wrap.)
	if size > 0 && access.Valid() && c.set.Load() == nil {
		if b, ok := c.tab.fast(addr, size, access, false); ok {
			return b, nil
		}
		return c.translateSlow(addr, size, access)
	}
	return c.translate(addr, size, access)
}

// translateSlow is Translate of a range the index's fast path did not answer, with no
// registrations: the rest of the mapping table, or the fault.
func (c *core) translateSlow(addr Addr, size int, access Direction) ([]byte, error) {
	if addr+Addr(size) < addr {
		return nil, c.fault(addr, size, access, ReasonBadLength)
	}
	b, reason := c.tab.lookupSlow(addr, size, access, false)
	if reason == "" {
		return b, nil
	}
	return nil, c.fault(addr, size, access, reason)
}

// translate is Translate in general: the registrations, then the mapping table.
func (c *core) translate(addr Addr, size int, access Direction) ([]byte, error) {
	if !access.Valid() {
		return nil, c.fault(addr, size, access, ReasonBadAccess)
	}
	b, regReason := c.lookupReg(addr, size, access, false)
	if b != nil {
		return b, nil
	}
	b, reason := c.tab.lookup(addr, size, access, false)
	if reason == "" {
		return b, nil
	}
	if regReason != "" && reason == ReasonNotMapped {
		reason = regReason
	}
	return nil, c.fault(addr, size, access, reason)
}

func (c *core) fault(addr Addr, size int, access Direction, reason FaultReason) error {
	c.faults.Add(1)
	return &Fault{Addr: addr, Size: size, Access: access, Reason: reason}
}

// Faults returns the number of device accesses Translate refused.
func (c *core) Faults() uint64 { return c.faults.Load() }

// LiveCount returns the number of live mappings (coherent allocations included). It takes each
// stripe's lock in turn, so mappings made or undone while it runs may or may not count.
func (c *core) LiveCount() int {
	n := c.tab.liveCount()
	if c.iommu == nil { // the IOMMU's registrations are records of its table already
		if s := c.set.Load(); s != nil {
			n += len(s.byBus.regs)
		}
	}
	return n
}

// Live returns every live mapping, sorted by address: the leak report (dma-debug's
// debug_dma_dump_mappings). It takes each stripe's lock in turn, so mappings made or undone
// while it runs may or may not appear.
func (c *core) Live() []Mapping {
	out := c.tab.live()
	if c.iommu == nil { // the IOMMU's registrations are records of its table already
		if regs := c.registrations(); len(regs) > 0 {
			out = append(out, regs...)
			sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
		}
	}
	return out
}

// AllocCoherent allocates size bytes of zeroed memory outside the Go heap, mapped
// bidirectionally (dma_alloc_coherent, ib_dma_alloc_coherent). Both its CPU address and its bus
// address are aligned to the smallest power-of-two number of pages that covers size (PageSize
// for up to a page, 8 KiB for up to two pages, 64 KiB for 33 to 64 KiB, ...), as the kernel's
// DMA API promises, so memory of at most 2^k bytes (k >= 12) never crosses a 2^k boundary. Only
// the pages that size needs stay allocated (the rest of the aligned order is returned at once),
// and FreeCoherent releases them all. Small sizes still take a page. A size that is not positive
// is ErrInvalid; memory or bus addresses that cannot be had (mmap failing, a full IOVA space, no
// aligned run of it) are ErrMapping.
func (c *core) AllocCoherent(size int) (*Coherent, error) {
	if !coherentSizeOK(size) {
		return nil, fmt.Errorf("dma: alloc_coherent(%d): %w", size, ErrInvalid)
	}
	if c.injectFail() {
		return nil, fmt.Errorf("dma: alloc_coherent (injected): %w", ErrMapping)
	}
	align := coherentAlign(size)
	if align == 0 {
		return nil, fmt.Errorf("dma: alloc_coherent(%d): no alignment of that order: %w", size, ErrMapping)
	}
	reg, err := allocPagesAligned((size+PageSize-1)/PageSize, align)
	if err != nil { // no memory for it: a mapping failure (dma_alloc_coherent returning NULL)
		return nil, fmt.Errorf("dma: alloc_coherent(%d): %w: %w", size, ErrMapping, err)
	}
	if err := reg.pin(); err != nil {
		_ = reg.Close()
		return nil, err
	}
	buf := reg.mem[:size:size]
	addr, _, err := c.mapBuf(buf, Bidirectional, codeCoherent, reg, false)
	if err != nil {
		_ = reg.Close()
		return nil, fmt.Errorf("dma: alloc_coherent(%d): %w", size, err)
	}
	return &Coherent{owner: c, region: reg, buf: buf, addr: addr}, nil
}

// FreeCoherent unmaps and releases co (dma_free_coherent). Memory from another mapper is
// ErrNotMapped; a second free is ErrClosed. If other mappings of co's memory are still live (a
// MapSingle of its Bytes), co is freed all the same (Bytes is nil, its coherent mapping is gone)
// but the memory is released only at their last unmap, and the error matches ErrBusy.
func (c *core) FreeCoherent(co *Coherent) error {
	if co == nil {
		return fmt.Errorf("dma: free_coherent(nil): %w", ErrInvalid)
	}
	if co.owner != c {
		return fmt.Errorf("dma: free_coherent of memory from another mapper: %w", ErrNotMapped)
	}
	if !co.freed.CompareAndSwap(false, true) {
		return fmt.Errorf("dma: free_coherent twice: %w", ErrClosed)
	}
	if err := c.unmap(co.addr, len(co.buf), Bidirectional, codeCoherent); err != nil {
		return err
	}
	return co.region.Close()
}
