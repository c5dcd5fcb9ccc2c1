package dma

import (
	"fmt"
	"math/bits"
)

// Unmap names one mapping to undo in a batch (UnmapBatch): the address, length and direction it
// was mapped with and the kind of map call that made it (KindSingle, KindPage or KindSG).
type Unmap struct {
	Addr Addr
	Size int
	Dir  Direction
	Kind Kind
	// Sole is the handle MapSingleSole returned for the mapping (KindSingle), or 0 for any other
	// mapping: the entry is then undone as UnmapSingleSole would (see SoleMapper). Mappers that
	// are not SoleMappers never hand one out; UnmapAll's one-by-one path passes it to
	// UnmapSingleSole. An entry without the handle revokes a sole mapping (see Sole).
	Sole Sole
}

// BatchUnmapper is implemented by mappers that undo many mappings at once: the completion pass
// of package sdma unmaps every fragment of the txreqs it completes in one call (hfi1 unmaps them
// one by one in sdma_txclean; the batch is the same unmaps, in fewer lock holds). Direct, IOMMU,
// Counting and FaultInjector implement it.
type BatchUnmapper interface {
	// UnmapBatch undoes each mapping of us as the matching Unmap* call would. Every entry is
	// tried; the error, if any, matches ErrNotMapped and names the first entry that was not
	// mapped (the others changed nothing, as a single unmap of them would). It does not allocate
	// unless an entry fails, and may reorder us.
	UnmapBatch(us []Unmap) error
}

// maxBatch is the number of entries removeBatch groups at once; longer batches go in chunks.
const maxBatch = 16

// UnmapBatch undoes the mappings of us (see BatchUnmapper). Mappings in the index (index.go: up to
// spanMax pages each, the common case) are ended with one CAS each and no lock. The others are grouped by
// the stripe of their first page, and each stripe's lock is taken once per chunk of up to 16
// entries, however many of them it holds; single-page records are recycled under that hold.
// Regions are unpinned with no lock held. It moves the entries it did not find in the index to
// the front of each chunk, keeping their order.
func (c *core) UnmapBatch(us []Unmap) error {
	var err error
	for len(us) > 0 {
		n := min(len(us), maxBatch)
		chunk := us[:n]
		rest := 0                // chunk[:rest]: entries not in the index, in their order
		var orig [maxBatch]int8  // orig[j]: the position in the chunk of rest entry j before it moved
		bad, badU := -1, Unmap{} // the first entry of the chunk not mapped (so far) and its value
		for i := range chunk {
			u := &chunk[i] // not moved yet: the swaps below only move entries before it
			var reg *Region
			var ok bool
			if c := kindCode(u.Kind); c == codeCoherent || c == codeRegistered {
				// Not a kind an Unmap names: FreeCoherent and Deregister end those, and a
				// batch entry must not free their IOVA range behind them.
				if bad < 0 {
					bad, badU = i, *u
				}
				continue
			}
			if u.Sole != 0 {
				code := uint64(0) // a sole handle of another kind matches no entry
				if u.Kind == KindSingle {
					code = codeSingleSole
				}
				var revoked bool
				if reg, ok, revoked = c.tab.claimSole(u.Sole, u.Addr, u.Size, u.Dir, code); !ok || revoked {
					if bad < 0 {
						bad, badU = i, *u
					}
					continue
				}
			} else if reg, ok = c.tab.claimIndex(u.Addr, u.Size, u.Dir, kindCode(u.Kind)); !ok {
				chunk[rest], chunk[i] = chunk[i], chunk[rest]
				orig[rest] = int8(i)
				rest++
				continue
			}
			if reg != nil {
				reg.unpin()
			}
		}
		if rest > 0 {
			if j := c.tab.removeBatch(chunk[:rest]); j >= 0 && (bad < 0 || int(orig[j]) < bad) {
				bad, badU = int(orig[j]), chunk[j]
			}
		}
		if bad >= 0 && err == nil {
			err = fmt.Errorf("dma: unmap %s [%#x,+%d) %v: %w", badU.Kind, uint64(badU.Addr), badU.Size, badU.Dir, ErrNotMapped)
		}
		us = us[n:]
	}
	return err
}

// removeBatch removes the records of us (at most maxBatch entries, none in the index), one hold of
// each stripe's lock; it unpins their regions and returns the index of the first entry not
// found, or -1. A KindSingle entry with no record revokes a sole mapping if one matches, as the
// public unmap does (core.unmap, revokeIndex).
func (t *table) removeBatch(us []Unmap) int {
	// Bucket the entries by stripe: mask says which stripes have any, head[s] is the first entry
	// of stripe s and next[i] the one after entry i (-1 ends a bucket). Only the buckets named in
	// mask are read, so head needs no clearing.
	var (
		mask uint64
		head [nStripes]int8
		next [maxBatch]int8
	)
	for i := range us {
		si := t.stripeIndex(uint64(us[i].Addr) >> t.shift)
		if mask&(1<<si) == 0 {
			mask |= 1 << si
			next[i] = -1
		} else {
			next[i] = head[si]
		}
		head[si] = int8(i)
	}
	bad := -1
	var (
		regs        [maxBatch]*Region // regions to unpin once no lock is held
		rest        [maxBatch]*record // claimed records of several pages, taken off their later pages after
		nreg, nrest int
	)
	for m := mask; m != 0; m &= m - 1 {
		si := uint(bits.TrailingZeros64(m))
		s := &t.stripes[si]
		s.mu.Lock()
		for i := head[si]; i >= 0; i = next[i] {
			u := &us[i]
			pg := uint64(u.Addr) >> t.shift
			r := s.claim(pg, u.Addr, u.Size, u.Dir, u.Kind)
			if r == nil {
				if u.Kind == KindSingle && t.revokeIndex(u.Addr, u.Size, u.Dir) {
					continue // a sole mapping, unmapped behind its owner's back (see Sole)
				}
				if bad < 0 || int(i) < bad {
					bad = int(i)
				}
				continue
			}
			if r.region != nil {
				regs[nreg] = r.region
				nreg++
			}
			if uint64(r.end()-1)>>t.shift == pg {
				s.recycle(r)
			} else {
				rest[nrest] = r
				nrest++
			}
		}
		s.mu.Unlock()
	}
	for _, r := range rest[:nrest] {
		t.removeRest(r)
		*r = record{}
		t.pool.Put(r)
	}
	for _, reg := range regs[:nreg] {
		reg.unpin()
	}
	return bad
}

// UnmapAll undoes the mappings of us through m: in one UnmapBatch call if m is a BatchUnmapper,
// else one Unmap* call per entry (KindSG entries through UnmapSG of one entry). The error is as
// UnmapBatch's, and so are the entries refused: one of another Kind than KindSingle, KindPage and
// KindSG, or with a Sole handle and another Kind than KindSingle, is not mapped and changes
// nothing.
func UnmapAll(m Mapper, us []Unmap) error {
	if b, ok := m.(BatchUnmapper); ok {
		return b.UnmapBatch(us)
	}
	var first error
	for _, u := range us {
		var err error
		switch {
		case u.Sole != 0 && u.Kind == KindSingle:
			err = unmapSole(m, u.Addr, u.Size, u.Dir, u.Sole)
		case u.Sole != 0:
			err = fmt.Errorf("dma: unmap %s [%#x,+%d) %v with a sole handle: %w", u.Kind, uint64(u.Addr), u.Size, u.Dir, ErrNotMapped)
		case u.Kind == KindSingle:
			err = m.UnmapSingle(u.Addr, u.Size, u.Dir)
		case u.Kind == KindPage:
			err = m.UnmapPage(u.Addr, u.Size, u.Dir)
		case u.Kind == KindSG:
			err = m.UnmapSG([]SG{{Addr: u.Addr, Len: u.Size}}, u.Dir)
		default: // not a kind an Unmap names (UnmapBatch's refusal)
			err = fmt.Errorf("dma: unmap %q [%#x,+%d) %v: %w", u.Kind, uint64(u.Addr), u.Size, u.Dir, ErrNotMapped)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// UnmapBatch counts each entry as its Unmap* call and undoes the batch through the wrapped
// mapper (UnmapAll).
func (c *Counting) UnmapBatch(us []Unmap) error {
	for _, u := range us {
		switch u.Kind {
		case KindPage:
			c.unmapPage.Add(1)
		case KindSG:
			c.unmapSG.Add(1)
		default:
			c.unmapSingle.Add(1)
		}
	}
	return c.count(UnmapAll(c.m, us))
}

// UnmapBatch undoes the batch through the wrapped mapper (unmaps are never failed by injection).
func (f *FaultInjector) UnmapBatch(us []Unmap) error { return UnmapAll(f.m, us) }

var (
	_ BatchUnmapper = (*Direct)(nil)
	_ BatchUnmapper = (*IOMMU)(nil)
	_ BatchUnmapper = (*Counting)(nil)
	_ BatchUnmapper = (*FaultInjector)(nil)
)
