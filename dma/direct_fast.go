package dma

import (
	"unsafe"

	"github.com/gosdma/gosdma/internal/relaxed"
)

// # Direct's per-packet fast paths
//
// Package sdma's kvaddr path maps every buffer with MapSingleSole, reads it with Translate and
// unmaps it with UnmapSingleSole, and a sender reuses its buffers, so the common case of each is
// one index entry of a buffer of at most keepMax bytes mapped before at the same address: a map
// that finds the entry the buffer left still free (tryIndex's first step), a translation that
// finds the live entry in its set (table.fast), and a sole unmap that frees it with a store
// (claimSole's first branch). Direct defines these three methods itself, not through core's, so
// that each runs as one call with Direct's geometry as constants (page shift directShift, key =
// first byte) and no bounds check: the index, set and entry are found with arithmetic. Anything
// else (a first map, a full set, a longer buffer, registrations, a revoked or Region mapping, a
// fault) leaves the fast path having changed nothing and takes core's general path, which
// decides everything again; the fast paths are core's first steps, made with the same loads,
// compare-and-swaps and stores in the same order, so the protocol of the index (index.go) and of
// sole mappings (sole.go) is unchanged.

// directSet returns the number of the first entry of Direct's set for key (the second is the
// next; index.go, "Direct's sets: one line per buffer line"): in the region (nEnt entries) of the
// Fibonacci hash of key's half page, the set of key's cache line in the half page plus the next
// setBits hash bits, modulo the sets in use. Even, and at most nIndex-2.
func (t *table) directSet(key uint64) uint64 {
	const phi = 0x9E3779B97F4A7C15
	h := key >> directHalfShift * phi
	return h>>(64-stripeBits)*nEnt + 2*((key>>lineShift+h>>(64-stripeBits-setBits))&t.setSel&(nSets-1))
}

// lineShift is log2 of a cache line (64 bytes, cacheline.Pad's unit on every target that gosdma
// lays out for), and directHalfShift log2 of the bytes whose lines one region of Direct's index
// holds, one set each: a half page of 2 KiB.
const (
	lineShift       = 6
	directHalfShift = lineShift + setBits
)

// entryAt returns entry i of the index, i < nIndex (no bounds check: directSet's results and
// their successors are in range), with no check at all: the index must exist. The zero value of
// Direct and IOMMU (not made by NewDirect, NewIOMMU) has none, and nil plus an entry's offset lies
// past the nil page, where a load is a fatal fault that no recover catches, not the nil
// dereference's panic that their docs promise: so each fast path that may reach an entry other
// than the first 64 tests ents first (one compare and branch a call) and takes its general path
// without it, which panics on the zero value's nil fields as documented (TestCensusZeroMappers).
func (t *table) entryAt(i uint64) *entry {
	return (*entry)(unsafe.Add(unsafe.Pointer(t.ents), uintptr(i)*unsafe.Sizeof(entry{})))
}

// directKey is Direct's entryKey of a mapping of n bytes (1 <= n, at most spanMax pages) at addr:
// addr, or its first page's first byte if the mapping touches two pages or more (table.multi).
func directKey(addr uint64, n int) uint64 {
	if (addr^(addr+uint64(n)-1))>>directShift != 0 {
		return addr &^ (PageSize - 1)
	}
	return addr
}

// MapSingleSole maps buf as MapSingle does and returns the mapping's Sole handle (see
// SoleMapper): MapSingleSoleHint with no hint.
func (d *Direct) MapSingleSole(buf []byte, dir Direction) (Addr, Sole, error) {
	return d.MapSingleSoleHint(buf, dir, 0)
}

// MapSingleSoleHint is MapSingleSole with the handle of an earlier sole mapping of the caller as a
// hint (see SoleMapper). Its common case is tryIndex's first step, with no other call: buf
// (1..keepMax bytes, so indexable: at most spanMax pages; Go memory, no byte of it in a Region's
// span; dir valid) was mapped before at the same address in the same way and its entry is still
// free (it kept its words: keepMax) in the set of its entryKey (directKey): one CAS makes it live
// again. The entry that hint names is tried first, without the set's hash: if it is such an
// entry, it is one of that set's (below). Otherwise core's map.
func (d *Direct) MapSingleSoleHint(buf []byte, dir Direction, hint Sole) (Addr, Sole, error) {
	// One condition per if: the compiler branches on each, with no boolean in between.
	n := len(buf)
	if uint(n-1) >= keepMax {
		goto general
	}
	if !dir.Valid() {
		goto general
	}
	if d.tab.testPublished != nil {
		goto general
	}
	if d.tab.ents == nil { // a zero Direct (entryAt)
		goto general
	}
	if mayOverlapRegion(sliceAddr(buf), uintptr(n)) {
		goto general
	}
	{
		p := unsafe.SliceData(buf)
		addr := uint64(uintptr(unsafe.Pointer(p)))
		want := metaFieldsOf(n, dir, codeSingleSole) | metaFree
		// tryIndex's first step, without its loads of addr and region, which cannot differ here
		// (TestDirectEntryInvariants checks both facts after every test's maps and unmaps):
		//   - addr: every Direct fill (tryIndex from mapBuf, the only filler of Direct's index)
		//     stores addr = the CPU address of the buffer's first byte and ptr = that byte, in one
		//     busy section, and no store changes addr without a fill; entries that drop their
		//     buffer store ptr nil, which matches no p. So ptr == p implies addr == p's address.
		//   - region: only a free entry matches (want), and a free entry holds no region: every
		//     unmap of a Region mapping (endIndex, claimSole) clears ptr and region while busy,
		//     before the free store; a revoked entry is not free and its owner's free clears them
		//     likewise. (And p is Go memory outside every Region's span, mayOverlapRegion.)
		// The CAS from the free word m makes the words the ones loaded: every fill moves meta's
		// generation (see index.go), so none ran between the loads and the CAS.
		//
		// The hint's entry: the entries are this table's, and a fill puts a mapping in the set
		// of its entryKey, which its address and size decide; an entry that matches (ptr p,
		// size n) was therefore filled for the address and size of buf, in buf's set, where
		// the hashed search below would look (either of two matching entries will do, as
		// there). Any hint (0, stale, another mapper's) is safe: only a match is taken.
		if i := uint64(hint&(1<<soleBits-1)) - 1; i < nIndex {
			e := d.tab.entryAt(i)
			if m := e.meta.Load(); m&(metaState|metaFields) == want && e.ptr.Load() == p {
				h := Sole((m+metaGen1)>>metaGenShift<<soleBits | (i + 1))
				if e.meta.CompareAndSwap(m, m+metaGen1|metaLive) {
					return Addr(addr), h, nil
				}
			}
		}
		i := d.tab.directSet(directKey(addr, n))
		for end := i + nWays; i < end; i++ {
			e := d.tab.entryAt(i)
			m := e.meta.Load()
			if m&(metaState|metaFields) != want {
				continue
			}
			if e.ptr.Load() != p {
				continue
			}
			h := Sole((m+metaGen1)>>metaGenShift<<soleBits | (i + 1))
			if e.meta.CompareAndSwap(m, m+metaGen1|metaLive) {
				return Addr(addr), h, nil
			}
		}
	}
general:
	return d.mapBuf(buf, dir, codeSingleSole, nil, true)
}

// UnmapSingleSole undoes MapSingleSole (see SoleMapper). Its common case is claimSole's first
// branch, with no other call: the entry of handle h holds the live sole mapping (addr, size <=
// keepMax, dir) of Go memory, freed with a store-release. Otherwise (a revoked or Region
// mapping, handle 0 or stale, any mismatch) nothing has changed and core's unmap decides.
func (d *Direct) UnmapSingleSole(addr Addr, size int, dir Direction, h Sole) error {
	if i := uint64(h&(1<<soleBits-1)) - 1; i < nIndex && uint(size-1) < keepMax && dir.Valid() && d.tab.ents != nil {
		e := d.tab.entryAt(i)
		live := uint64(h>>soleBits)<<metaGenShift | metaFieldsOf(size, dir, codeSingleSole) | metaLive
		if e.meta.Load() == live && e.addr.Load() == uint64(addr) && e.region.Load() == nil {
			relaxed.StoreRelease64(&e.meta, live&^metaState) // see claimSole
			return nil
		}
	}
	return d.core.UnmapSingleSole(addr, size, dir, h)
}

// Translate is the device side (see Mapper). Its common case is table.fast with Direct's
// geometry and no other call: no registrations, and a live mapping in the set of addr's key or in
// the set of its page's first byte holds the range and allows the access (the latter set first
// if the range touches two pages: a mapping that starts at addr and holds the range is then keyed
// by its first page). The checks of each entry are fastSet's. With registrations, its common case
// is the one registration holding the range (regSet.hitOne: arithmetic, no call). Otherwise, or
// with the test hook testMidRead, core's Translate.
func (d *Direct) Translate(addr Addr, size int, access Direction) ([]byte, error) {
	// One condition per if: the compiler branches on each, with no boolean in between.
	if size <= 0 {
		return d.core.Translate(addr, size, access)
	}
	if !access.Valid() {
		return d.core.Translate(addr, size, access)
	}
	if s := d.set.Load(); s != nil {
		// Registrations: one that holds the range answers with arithmetic (the common case
		// of registered memory); anything else takes the general path, which looks at the
		// registrations and then at the table, and names the fault.
		if r, off := s.hitOne(addr, size, access); r != nil {
			return bytesAt(unsafe.SliceData(r.buf), off, size), nil
		}
		return d.core.Translate(addr, size, access)
	}
	if d.tab.testMidRead != nil {
		return d.core.Translate(addr, size, access)
	}
	if d.tab.ents == nil { // a zero Direct (entryAt)
		return d.core.Translate(addr, size, access)
	}
	a := uint64(addr)
	k0, k1 := a, a&^(PageSize-1)
	if (a^(a+uint64(size)-1))>>directShift != 0 {
		k0, k1 = k1, k0
	}
	for {
		i := d.tab.directSet(k0)
		for end := i + nWays; i < end; i++ {
			e := d.tab.entryAt(i)
			m := e.meta.Load()
			off := a - e.addr.Load()
			sz := uint64(metaSize(m))
			if m&metaState != metaLive || off >= sz || uint64(size) > sz-off {
				continue
			}
			if dir := metaDir(m); dir != Bidirectional && dir != access {
				continue
			}
			p := e.ptr.Load()
			if e.meta.Load() == m { // validated (see lookEntry)
				return bytesAt(p, int(off), size), nil
			}
		}
		if k0 == k1 {
			return d.translateSlow(addr, size, access)
		}
		k0 = k1
	}
}

// Registered returns the live registration holding all of buf, or nil (see Registrar): nil at
// once if nothing is registered.
func (d *Direct) Registered(buf []byte) *Registration {
	if d.set.Load() == nil {
		return nil
	}
	return d.regs.Registered(buf)
}
