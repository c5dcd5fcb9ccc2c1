package dma

import "unsafe"

// SoleTranslator is implemented by mappers that translate a device access with a hint (Direct
// and IOMMU; the wrappers do not, so that their Translate sees every access): the Sole handle of
// the mapping that the caller believes holds the range. Package sdma's hardware model passes
// the handle its txreq recorded for the descriptor (AddKVAddr's mapping), an IOTLB entry that
// the descriptor's owner carries: the mapper finds the entry from it with arithmetic, without
// its index's hash and set walk, and validates it.
type SoleTranslator interface {
	// TranslateSole returns what Translate(addr, size, access) returns. When the entry that h
	// names holds, live, the sole mapping of exactly [addr, addr+size) in direction access
	// (validated with the loads Translate's fast path makes), it answers from it; otherwise (h
	// 0 or stale, a revoked or other mapping, any mismatch) it is Translate. A hint never
	// changes the answer: a live mapping of the range is what Translate would find, and any
	// fault is Translate's.
	TranslateSole(addr Addr, size int, access Direction, h Sole) ([]byte, error)
}

// TranslateSole is Translate with the handle of the mapping that holds the range (see
// SoleTranslator). Its common cases, with no other call: the entry that h names holds the live
// sole mapping of the range, or (no handle: registered memory) the one registration holds it,
// Translate's case.
func (d *Direct) TranslateSole(addr Addr, size int, access Direction, h Sole) ([]byte, error) {
	if i := uint64(h&(1<<soleBits-1)) - 1; i < nIndex && uint(size-1) < keepMax && access.Valid() && d.tab.ents != nil {
		// The entry's words validated as fastSet's are: meta, then addr and ptr, then meta
		// again unchanged (every fill moves meta's generation, so an unchanged word means the
		// words loaded between are of one fill). An access that is not valid is Translate's
		// fault (its bits would land in the word's kind and size fields: see metaFieldsOf).
		e := d.tab.entryAt(i)
		live := uint64(h>>soleBits)<<metaGenShift | metaFieldsOf(size, access, codeSingleSole) | metaLive
		if e.meta.Load() == live && e.addr.Load() == uint64(addr) {
			if f := d.tab.testMidRead; f != nil {
				f() // tests: a writer between the loads (TestTranslateSoleTornRead)
			}
			p := e.ptr.Load()
			if e.meta.Load() == live {
				return bytesAt(p, 0, size), nil
			}
		}
	} else if s := d.set.Load(); s != nil && size > 0 && access.Valid() {
		if r, off := s.hitOne(addr, size, access); r != nil {
			return bytesAt(unsafe.SliceData(r.buf), off, size), nil
		}
	}
	return d.Translate(addr, size, access)
}

// TranslateSole is Translate with the handle of the mapping that holds the range (see
// SoleTranslator), as Direct's (the same code: a shared helper is not inlined); addresses above
// the IOVA space fault as Translate's do (no entry and no registration holds them).
func (m *IOMMU) TranslateSole(addr Addr, size int, access Direction, h Sole) ([]byte, error) {
	if i := uint64(h&(1<<soleBits-1)) - 1; i < nIndex && uint(size-1) < keepMax && access.Valid() && m.tab.ents != nil {
		e := m.tab.entryAt(i)
		live := uint64(h>>soleBits)<<metaGenShift | metaFieldsOf(size, access, codeSingleSole) | metaLive
		if e.meta.Load() == live && e.addr.Load() == uint64(addr) {
			if f := m.tab.testMidRead; f != nil {
				f()
			}
			p := e.ptr.Load()
			if e.meta.Load() == live {
				return bytesAt(p, 0, size), nil
			}
		}
	} else if s := m.set.Load(); s != nil && size > 0 && access.Valid() {
		if r, off := s.hitOne(addr, size, access); r != nil {
			return bytesAt(unsafe.SliceData(r.buf), off, size), nil
		}
	}
	return m.Translate(addr, size, access)
}

var (
	_ SoleTranslator = (*Direct)(nil)
	_ SoleTranslator = (*IOMMU)(nil)
)
