package dma

import (
	"fmt"

	"github.com/gosdma/gosdma/internal/relaxed"
)

// # Sole mappings: an unmap with no atomic read-modify-write
//
// A public unmap (UnmapSingle, UnmapBatch) ends an index entry with a compare-and-swap of its meta
// word (claimIndex), because two goroutines may unmap at once: the same mapping twice (a double
// unmap, which one of them must be told about), or, on Direct, two identical mappings of one
// buffer, either of which may take either entry. A mapping made by MapSingleSole is the sole
// caller's to unmap, and its handle (Sole) names its entry and the entry's generation, so neither
// can happen to it:
//
//   - its entry carries its own kind code (codeSingleSole), which no public unmap ends as it ends
//     a public mapping: the public calls never free it, and it ends no other mapping;
//   - while it is live no fill writes the entry (fills take free entries, with a CAS from the
//     free meta word they loaded; the generation moved at this mapping's fill), so its caller is
//     the entry's only writer of the free state;
//   - the caller checks that the entry's meta is still the live (or revoked, below) word of the
//     handle's generation and its address the mapping's, then frees it with a store-release (a
//     MOV on amd64): the unmap of a sole mapping of Go heap memory of at most keepMax bytes, the
//     kvaddr path's, is one plain store. Entries that must drop their buffer (Region memory,
//     longer buffers) go busy with a CAS first, as in claimIndex: the clearing stores must not
//     become visible before the entry stops being live, and a plain busy store followed by the
//     free store of the same word could be merged away by the compiler (see internal/relaxed).
//
// # Revoke: a public unmap of a sole mapping
//
// A user may still unmap such a mapping with the public calls (UnmapSingle, a batch entry without
// the handle, UnmapAll), behind its owner's back, as a driver's user may dma_unmap_single a
// mapping the driver made: the device must not read it afterwards (package sdma's promise that the
// hardware model never reads unmapped memory). A public KindSingle unmap that finds no public
// mapping to end (in the index or the page lists) looks for a live sole one of the same address,
// length and direction and revokes it (revokeIndex): one CAS of the meta word, generation
// included, from live to revoked. From then on it is unmapped to every reader (Translate and the
// syncs fault with ReasonNotMapped, Live and LiveCount do not list it, another public unmap of it
// is ErrNotMapped), and its Region, if any, is unpinned, as a public unmap does; but the entry is
// not freed: no fill takes it, and the IOMMU does not hand out its granules (its allocator counts
// a revoked entry as taken, startsAt), so its bus address is not reused. Its owner still frees
// it, with the same store: only the owner ever writes the free state of a sole entry, and the
// revoke only ever writes a live one. The owner's unmap of a revoked mapping reports ErrNotMapped,
// as a public unmap that came second would have (package sdma counts it in UnmapErrors).
//
// A revoke that runs between the owner's load of meta and its free store is overwritten by that
// store: the entry is still freed once, by the owner, and was unreadable from the earlier of the
// two, but both unmaps report success (the double unmap goes unreported; with a CAS one of them
// would fail). The revoke's CAS fails once the owner has freed the entry, and the generation keeps
// it off any later mapping of the entry (a later public unmap of the address may of course end a
// later mapping of it, as for public mappings).
//
// A second UnmapSingleSole of the same handle, one after the other, finds the entry free or
// filled again with a later generation and reports ErrNotMapped, as a double public unmap does.
// Two at the same time are the misuse the contract excludes: the caller must be the mapping's
// only unmapper (package sdma's completion, which unmaps each txreq it mapped exactly once).
//
// A mapping that does not go to the index (its set full, more than spanMax pages, an IOMMU map off
// its P's magazine) is made with the public code and handle 0: UnmapSingleSole of handle 0 is
// UnmapSingle.

// Sole is the handle of a mapping made by MapSingleSole, for its one unmapper (UnmapSingleSole, or
// the Sole field of an Unmap in a batch): the index entry (low 16 bits, entry number plus one) and
// the generation of the fill that made the mapping (the bits above). 0 means the mapping is not in
// the index and is unmapped as a public one.
type Sole uint64

// soleBits is the width of the entry number (plus one) in a Sole.
const soleBits = 16

// SoleMapper is implemented by mappers whose mappings may be handed to one unmapper (Direct and
// IOMMU, and the wrappers Counting and FaultInjector, which pass it on, or map with MapSingle and
// handle 0 if the wrapped mapper is not one): package sdma's kvaddr path maps with MapSingleSole and unmaps at completion with the
// handle, a plain store in the common case instead of a compare-and-swap.
type SoleMapper interface {
	// MapSingleSole is MapSingle for a caller that will be the mapping's only unmapper: it also
	// returns the mapping's Sole handle. The mapping is KindSingle to Translate, the syncs, Live
	// and LiveCount. UnmapSingle and the batches' entries without the handle (a user's unmap
	// behind the owner's back) revoke it: it is unmapped to every reader at once, but its owner's
	// UnmapSingleSole frees it, and reports ErrNotMapped (see Sole).
	MapSingleSole(buf []byte, dir Direction) (Addr, Sole, error)
	// MapSingleSoleHint is MapSingleSole for a caller that passes the handle of an earlier sole
	// mapping of its own (its hint; 0 or any stale handle is fine): a sender that maps the same
	// buffer again and again, as package sdma's txreqs do with the handle each descriptor slot
	// last recorded, lets the mapper look first at the entry that mapping left behind (Direct:
	// without its index's hash). The hint never changes the outcome, only which of equivalent
	// free entries the mapping takes; mappers that cannot use it ignore it. Callers use it only
	// where HintIsOwn says it is the mapper's own (a type embedding *Direct inherits it).
	MapSingleSoleHint(buf []byte, dir Direction, hint Sole) (Addr, Sole, error)
	// UnmapSingleSole undoes MapSingleSole: addr, size and dir as for UnmapSingle, h the handle
	// the map returned. The caller must be the mapping's only unmapper: two calls for one mapping
	// at the same time are undefined (one after the other, the second is ErrNotMapped). If a
	// public unmap revoked the mapping, it frees it and reports ErrNotMapped.
	UnmapSingleSole(addr Addr, size int, dir Direction, h Sole) error
}

// soleOf returns the Sole handle of entry e of the index holding the live meta word m.
func (t *table) soleOf(e *entry, m uint64) Sole {
	return Sole(m>>metaGenShift<<soleBits | (t.entryIndex(e) + 1))
}

// claimSole ends the sole mapping (addr, size, dir, code) of the index entry that handle h names
// and returns its region; ok is false if that entry does not hold it (h 0 included), revoked true
// if a public unmap ended the mapping first (revokeIndex, which unpinned the region: reg is then
// nil); the entry is freed either way. The caller is the mapping's only unmapper (see Sole). No
// lock, and in the common case no atomic read-modify-write.
func (t *table) claimSole(h Sole, addr Addr, size int, dir Direction, code uint64) (reg *Region, ok, revoked bool) {
	i := uint64(h&(1<<soleBits-1)) - 1
	if i >= nIndex || size <= 0 || size > maxIndexed || !dir.Valid() { // see metaFieldsOf
		return nil, false, false
	}
	e := &t.ents[i]
	live := uint64(h>>soleBits)<<metaGenShift | metaFieldsOf(size, dir, code) | metaLive
	m := e.meta.Load()
	if m != live && m != live|metaRevoked || e.addr.Load() != uint64(addr) {
		return nil, false, false
	}
	reg = e.region.Load()
	if reg == nil && size <= keepMax {
		// The entry's only writer of the free state (see Sole): free, fields and buffer kept for
		// the next map of the same buffer, as claimIndex does. A public unmap that revokes the
		// entry between the load and this store loses its revoked state to it: the entry is
		// freed once, by this store, and both unmaps report success.
		relaxed.StoreRelease64(&e.meta, m&^metaState)
		return nil, true, m != live
	}
	for !e.meta.CompareAndSwap(m, m&^metaState|metaBusy) {
		// A public unmap revoked the entry since the load (the only other writer a sole
		// entry has, and only from live): it is revoked now and stays so until this frees it.
		if m != live || e.meta.Load() != live|metaRevoked {
			return nil, false, false // cannot happen to a sole mapping's only unmapper
		}
		m = live | metaRevoked
	}
	ownStorePtr(&e.ptr, nil) // let the garbage collector have it; Region memory is munmapped
	if reg != nil {
		ownStorePtr(&e.region, nil)
	}
	relaxed.StoreRelease64(&e.meta, m&^metaState)
	if m != live {
		return nil, true, true // revokeIndex unpinned the region
	}
	return reg, true, false
}

// MapSingleSole maps buf as MapSingle does and returns the mapping's Sole handle (see SoleMapper).
func (c *core) MapSingleSole(buf []byte, dir Direction) (Addr, Sole, error) {
	return c.mapBuf(buf, dir, codeSingleSole, nil, true)
}

// MapSingleSoleHint is MapSingleSole: core's general path has no use for the hint.
func (c *core) MapSingleSoleHint(buf []byte, dir Direction, _ Sole) (Addr, Sole, error) {
	return c.mapBuf(buf, dir, codeSingleSole, nil, true)
}

// UnmapSingleSole undoes MapSingleSole (see SoleMapper).
func (c *core) UnmapSingleSole(addr Addr, size int, dir Direction, h Sole) error {
	if h == 0 {
		return c.unmap(addr, size, dir, codeSingle)
	}
	reg, ok, revoked := c.tab.claimSole(h, addr, size, dir, codeSingleSole)
	if !ok || revoked {
		return soleNotMapped(addr, size, dir, h, revoked)
	}
	if reg != nil {
		reg.unpin()
	}
	return nil
}

// soleNotMapped is the error of an UnmapSingleSole that found no mapping, or one a public unmap
// had ended (revoked): ErrNotMapped, as the public unmap that came second reports.
func soleNotMapped(addr Addr, size int, dir Direction, h Sole, revoked bool) error {
	why := ""
	if revoked {
		why = ", unmapped by a public unmap first"
	}
	return fmt.Errorf("dma: unmap %s [%#x,+%d) %v (sole %#x%s): %w", KindSingle, uint64(addr), size, dir, uint64(h), why, ErrNotMapped)
}

// mapSole is MapSingleSole through m if m is a SoleMapper, else MapSingle with handle 0: the
// wrappers' MapSingleSole, so that a wrapped Direct or IOMMU keeps its sole path.
func mapSole(m Mapper, buf []byte, dir Direction) (Addr, Sole, error) {
	if s, ok := m.(SoleMapper); ok {
		return s.MapSingleSole(buf, dir)
	}
	a, err := m.MapSingle(buf, dir)
	return a, 0, err
}

// mapSoleHint is mapSole with MapSingleSoleHint where m's hint method is its own (HintIsOwn),
// else mapSole: a type that embeds *Direct and overrides MapSingleSole keeps its override.
func mapSoleHint(m Mapper, buf []byte, dir Direction, hint Sole) (Addr, Sole, error) {
	if HintIsOwn(m) {
		return m.(SoleMapper).MapSingleSoleHint(buf, dir, hint)
	}
	return mapSole(m, buf, dir)
}

// HintIsOwn reports whether m's MapSingleSoleHint is sure to map as its MapSingleSole does: m is
// one of this package's SoleMappers (Direct, IOMMU, and the Counting and FaultInjector wrappers,
// which pass the hint on only under the same test). A caller that holds a hint calls
// MapSingleSoleHint only then, and MapSingleSole otherwise: a type that embeds *Direct or
// *IOMMU and overrides MapSingleSole (a quota, a fault plan) is a SoleMapper through the
// promoted MapSingleSoleHint, which would map without the override. Package sdma decides once,
// in NewDevice.
func HintIsOwn(m Mapper) bool {
	switch m.(type) {
	case *Direct, *IOMMU, *Counting, *FaultInjector:
		return true
	}
	return false
}

// unmapSole undoes mapSole: UnmapSingleSole through m for a handle, else UnmapSingle.
func unmapSole(m Mapper, addr Addr, size int, dir Direction, h Sole) error {
	if s, ok := m.(SoleMapper); ok && h != 0 {
		return s.UnmapSingleSole(addr, size, dir, h)
	}
	return m.UnmapSingle(addr, size, dir)
}

// MapSingleSole counts a MapSingle and maps through the wrapped mapper's MapSingleSole, or its
// MapSingle (handle 0) if it is not a SoleMapper.
func (c *Counting) MapSingleSole(buf []byte, dir Direction) (Addr, Sole, error) {
	c.mapSingle.Add(1)
	a, h, err := mapSole(c.m, buf, dir)
	return a, h, c.count(err)
}

// MapSingleSoleHint is MapSingleSole through the wrapped mapper's MapSingleSoleHint.
func (c *Counting) MapSingleSoleHint(buf []byte, dir Direction, hint Sole) (Addr, Sole, error) {
	c.mapSingle.Add(1)
	a, h, err := mapSoleHint(c.m, buf, dir, hint)
	return a, h, c.count(err)
}

// UnmapSingleSole counts an UnmapSingle and undoes MapSingleSole through the wrapped mapper.
func (c *Counting) UnmapSingleSole(addr Addr, size int, dir Direction, h Sole) error {
	c.unmapSingle.Add(1)
	return c.count(unmapSole(c.m, addr, size, dir, h))
}

// MapSingleSole is the wrapped mapper's MapSingleSole (MapSingle if it is not a SoleMapper),
// unless this call is chosen to fail, as MapSingle.
func (f *FaultInjector) MapSingleSole(buf []byte, dir Direction) (Addr, Sole, error) {
	if !refusedBuf(buf, dir) && f.inj.fail() {
		return 0, 0, injected("map_single")
	}
	return mapSole(f.m, buf, dir)
}

// MapSingleSoleHint is MapSingleSole through the wrapped mapper's MapSingleSoleHint.
func (f *FaultInjector) MapSingleSoleHint(buf []byte, dir Direction, hint Sole) (Addr, Sole, error) {
	if !refusedBuf(buf, dir) && f.inj.fail() {
		return 0, 0, injected("map_single")
	}
	return mapSoleHint(f.m, buf, dir, hint)
}

// UnmapSingleSole passes through.
func (f *FaultInjector) UnmapSingleSole(addr Addr, size int, dir Direction, h Sole) error {
	return unmapSole(f.m, addr, size, dir, h)
}

var (
	_ SoleMapper = (*Direct)(nil)
	_ SoleMapper = (*IOMMU)(nil)
	_ SoleMapper = (*Counting)(nil)
	_ SoleMapper = (*FaultInjector)(nil)
)
