package dma

import (
	"runtime"
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/relaxed"
)

// # The index: mappings of up to spanMax pages, with no lock
//
// Translate is the hardware model's read of every descriptor and map/unmap the CPU side of every
// packet, so the common mapping (a descriptor-sized buffer within one page or IOMMU granule, or a
// kvaddr payload of a few pages: one entry covering [addr, addr+len), as a physically contiguous
// buffer is one dma_map_single in the kernel) lives in a structure that neither side locks: each stripe's index, a fixed array of nSets sets
// of two entries. A Go map must never be read during a write (that can crash), so the index is a
// fixed, open array, and each entry is a few words read and written with sync/atomic only.
//
// A Direct mapping's entry is in the set of its key's cache line in the region of the index
// chosen by a hash of the key's half page (below: "Direct's sets: one line per buffer line");
// an IOMMU mapping's is in the set of its key in granule order (below). The key is the first byte's bus address for Direct, where many small buffers share a page and
// a descriptor names the first byte of its mapping (so the set of the descriptor's address holds
// its mapping), and the granule for the IOMMU, whose granules hold one mapping each (so the set
// of any address in the granule holds it). A Direct translation of an address inside a mapping,
// not its first byte, or of one that is not mapped, also looks at the set of the page's first
// byte and then the whole regions of the page's two halves: a mapping of one page that holds the
// address starts in the address's page, hence in one of them (scanAll).
//
// A mapping of several pages (up to spanMax) is keyed by its first page: for Direct that page's
// first byte, for the IOMMU its first granule (entryKey). A translation from inside its first
// page finds it as above (the set of the page's first byte); one from a later page, which the
// index of its own page does not answer, looks at the set of each of the spanMax-1 pages before
// in that page's stripe (scanBack), a probe of two entries each. The IOMMU's allocator asks the
// same sets whether a granule is taken (indexOccupant, on its slow paths only). No shared counter
// of such mappings is kept: a map or unmap of several granules touches its own entry and nothing
// else shared.
//
// Mappings that find both entries of their set taken, of more than spanMax pages, or of 16 MiB
// or more go to
// the page lists behind the index (stripe.m and stripe.slots), which only holders of the stripe's
// mutex read or write. stripe.pairs counts what they hold, and a translation that finds no
// answer in the index while pairs is not zero takes the mutex and looks there too.
//
// # Direct's sets: one line per buffer line
//
// The index is cut into nStripes regions of nSets sets (nEnt entries, 2 KiB: a set is two
// entries, one cache line). Direct's set of key is in the region chosen by a Fibonacci hash of
// the key's half page (2 KiB, as many cache lines as a region has sets), at the key's cache line
// within the half page plus the next setBits hash bits, modulo the sets in use (directSet). Keys
// in different cache lines of one half page thus never share a set, and a set is one line of the
// index: two senders whose buffers lie in different lines, such as two txreqs of one slab page
// used by two Ps, map, translate and unmap on different lines of the index, whatever the distance
// between their objects. A hash of the whole key, as before, sends keys at a fixed distance to
// sets at a fixed offset (Fibonacci hashing is linear in the key): for some object strides (704,
// 720, 736 bytes, among others) two Ps' buffers then shared a set, and every map, translation
// and unmap of one missed on the line the other core had written. The added hash bits spread
// page-aligned keys (line 0 of their half) over the sets, as the stripes spread pages.
//
// # The IOMMU's index in granule order
//
// The IOMMU hands out fresh granules, in runs of consecutive ones per P (iova.go), so a hashed
// set would put every map on an index line that nothing touched since the space last came round
// (a cache miss at the map, paid again by the translation and the unmap on another core). Its
// sets are laid out in granule order instead, over the whole table's index (table.ents, every
// stripe's entries in a row): the set of granule g is entry g and the entry half the index away,
// modulo the entries in use. A map of a fresh granule takes the first free entry of its set, its
// own (entry g) unless an older mapping still holds it, so consecutive fresh granules fill
// consecutive entries: two per cache line (a packet's header and payload share one), in address
// order, which the hardware's prefetchers follow, and two Ps mapping from their own runs write
// disjoint lines. A long-lived mapping in entry g only moves the mapping of a granule that comes
// round to g to the far entry, which is the own entry of a granule half a pass later (by then
// unmapped, in the common case); a set is full only if both its entries are taken. The second
// entry is far rather than next to the first so that a run of long-lived mappings in consecutive
// granules (a Pool's chunks, allocated one after the other) does not fill the sets of the
// granules that come round to them.
//
// Every reader and writer of granule g's mapping looks at the same two entries, and every entry
// carries its mapping's bus address, so sharing entries between sets changes nothing else: each
// probe checks the address, as it does for the entries of a hashed set, which hold several keys
// too. The stripes still shard the page lists and their locks by the Fibonacci hash.
//
// # Plain fills of a P's own block (the IOMMU)
//
// A map's fill must take a free entry that no other map takes at the same time, which a CAS of
// the meta word ensures; it is a map's only locked instruction. The IOMMU's maps of fresh granules
// from a P's magazine (iova.go) need none in the blocks their P owns: the index in use is cut into
// blocks of 64 entries (ownBlock), each owned by at most one P at a time (table.owners). When a P
// reserves a run of 64 granules for its magazine (refill, under the allocator's mutex and pinned
// to the P), it releases the blocks of its previous run and claims the blocks of its new run's
// own entries (at most two) and those of their far entries (farBlock, setHalf away); a run with a
// block another P owns is skipped (its granules are never handed out, as a magazine's leftovers
// are not). Then:
//
//   - a map pinned to the owning P (pcpu.Pin: no other goroutine runs on the P meanwhile) fills
//     an entry of an owned block: the magazine's maps take their granules and fill their entry in
//     one pinned section (mapFast, refill), own entry first, then the far one, both the P's;
//   - every other fill of the index holds the allocator's mutex (the cursor's maps, coherent
//     memory, registrations, a refill for a P beyond the magazines), under which the owners do not
//     change, and fills only entries of blocks no P owns (with a CAS, as before); a magazine's map
//     whose set has no entry free for it goes to the page lists, not to the index;
//   - the unmaps, revokes and the sole owner's free only move an entry out of the live state, and
//     a free entry changes only by a fill: so the owning P's pinned map, which loads meta free,
//     is the entry's only writer until its store-release makes it live, and fills it with plain
//     stores (publish), no busy state: readers and unmappers ignore a free entry whatever its
//     words, and the generation moves at the live store;
//   - a block changes owner only under the mutex, at a refill pinned to the P that releases it, so
//     every fill of that P, pinned, has ended, and the next owner's fills come after its claim;
//     the blocks' words pass from one to the next through the mutex.
//
// The blocks are owned only if the IOMMU has magazines and its index four blocks for each P
// (setOwners); otherwise every fill is a CAS, as for Direct, whose sets are chosen by the CPU
// address (any P maps any buffer) and have no owner. Translate still probes one set, as before.
//
// # One entry: a sequence count per entry
//
// An entry's meta word holds its state (free, busy, live), the mapping's size, direction and
// kind, and a generation that every fill moves forward. It is the entry's lock and its sequence
// count at once (the kernel's seqcount_t, with the writers' exclusion in the same word):
//
//   - A map takes a free entry with one compare-and-swap of meta. If the entry last held the
//     same buffer at the same address and in the same way (a sender reusing its buffers), the
//     CAS makes it live at once, with the next generation: one atomic operation per map.
//     Otherwise the CAS makes it busy with the next generation, the map stores the words that
//     differ (ptr, addr, region) and then stores meta live with that generation. Once the CAS
//     has made it busy the map is the entry's only writer, so those stores (and the store of
//     meta) are plain MOVs on amd64 (store_amd64.go, relaxed.StoreRelease64): one locked
//     instruction per map, the CAS, where sync/atomic stores would add an XCHG per word.
//   - An unmap ends a live entry with one CAS of meta from live to free (same generation); the
//     entry keeps its words for the next map of the same buffer. An entry that must drop its
//     buffer (Region memory, which is munmapped at its release, or more than keepMax bytes)
//     goes live→busy, has ptr and region cleared (the owner's stores), then goes free.
//   - A translation loads meta, then addr and ptr, then meta again (read_seqcount_begin,
//     read_seqcount_retry). Equal and live: no fill and no unmap of the entry happened between
//     the loads (each changes meta, and a fill moves the generation), so the three words are one
//     mapping's, and that mapping was live at the second load, during the call. Otherwise it
//     loads them again. It forms a slice only from a pointer validated that way (bytesAt), so it
//     never reaches the bytes of a mapping that was not live during the call; a pointer it loaded
//     and then discards is still a whole Go pointer (every store to ptr is one), so the garbage
//     collector never sees a torn one.
//
// The generation has genBits bits: a torn read goes unnoticed only if one entry is filled
// exactly a multiple of 2^33 times between two loads of one translation, a few nanoseconds
// apart unless the goroutine is descheduled there for minutes (the kernel's seqcount_t has 32).
//
// A translation of a mapping in the index thus does no atomic read-modify-write and writes no
// shared cache line (the loads are plain MOVs on amd64, LDARs on arm64), and a map and an unmap
// of a reused buffer are one CAS each. Every word a reader touches is read and written with
// sync/atomic under the race detector (the owner's plain stores are atomic stores there), so it
// checks the protocol as it is.

// entry is one mapping of up to spanMax pages in a stripe's index (see above). All words are atomic: map
// and unmap write them, Translate, Live and the IOVA allocator read them, with no lock.
type entry struct {
	// meta is the entry's state, fields and generation (metaState..metaGen). Taken by map and
	// unmap with CAS, stored by the map that made it busy; loaded twice by every reader.
	meta atomic.Uint64
	// addr is the bus address of the mapping's first byte. Stored while busy, when it changes.
	addr atomic.Uint64
	// ptr is the CPU address of the mapping's first byte. While the entry is live it keeps a Go
	// heap buffer reachable (the record's job in the page lists). A free entry keeps it (for the
	// next map of the same buffer) only for Go heap memory of at most keepMax bytes, which thus
	// stays reachable until the entry is filled for another buffer: at most nIndex buffers per
	// mapper (the Go objects holding them). Stored while busy, when it changes.
	ptr atomic.Pointer[byte]
	// region is the pinned Region behind the bytes (nil: Go heap memory), unpinned by the unmap
	// that ends the entry. Stored while busy, when it changes; loaded by that unmap.
	region atomic.Pointer[Region]
}

// The fields of entry.meta, low bits first: state (2 bits), direction (2), kind code (3), size
// (24: the index holds mappings below 16 MiB), generation (the rest).
const (
	metaFree = 0 // no mapping (never filled, or unmapped)
	metaLive = 1 // a mapping the device may use
	metaBusy = 2 // a map is storing the words, or an unmap clearing them: not live
	// metaRevoked: a sole mapping (codeSingleSole) a public unmap ended (revokeIndex): not live,
	// so no reader reaches its bytes and Live, LiveCount and the unmaps do not see it, but not
	// free either: no fill takes the entry and the IOMMU's allocator counts its granules as taken
	// (startsAt) until the mapping's owner frees it (claimSole). See sole.go.
	metaRevoked = 3
	metaState   = 3 // mask of the state bits

	metaDirShift  = 2
	metaKindShift = 4
	metaSizeShift = 7
	metaSizeBits  = 24
	metaGenShift  = metaSizeShift + metaSizeBits
	genBits       = 64 - metaGenShift

	// metaFields masks direction, kind and size: what a map and an unmap match on.
	metaFields = (1<<metaGenShift - 1) &^ metaState
	metaGen1   = 1 << metaGenShift // one generation
	maxIndexed = 1<<metaSizeBits - 1
)

// Index geometry: nSets sets of two entries per stripe.
const (
	setBits = 5
	nSets   = 1 << setBits
	nEnt    = 2 * nSets
	nIndex  = nStripes * nEnt // entries in the whole table's index (table.ents)
)

// The IOMMU's owned blocks (see "Plain fills of a P's own block"): the index in use is cut into
// blocks of 1<<ownBlockBits entries, as many granules as a magazine run, so that a run's own
// entries lie in at most two blocks, and their far entries in two more.
const (
	ownBlockBits = 6
	nOwnBlocks   = nIndex >> ownBlockBits
)

// spanMax is the number of pages (IOMMU granules) an index mapping may touch: a kvaddr buffer of
// up to 15 pages plus an unaligned start (a 16380-byte payload touches 5) is one entry, found at
// its first page by a range check, with no page list and no lock. Longer mappings go to the page
// lists. A translation of an address in a later page of a mapping looks back over at most
// spanMax-1 pages (scanBack).
const spanMax = 16

// keepMax is the longest Go heap buffer whose free entry keeps its words (ptr included) for the
// next map of the same buffer, and whose unmap frees the entry with one CAS (claimIndex) or, for
// a sole mapping, one store (claimSole): spanMax-1 pages, so that every buffer of at most keepMax
// bytes touches at most spanMax pages (granules of PageSize or more) and is indexable, which
// Direct's fast map (direct_fast.go) relies on. Longer buffers, and Region memory, are dropped
// from the entry at their unmap. The bound is on the buffer a free entry keeps reachable, not on
// the memory: a buffer keeps its whole Go object alive, whatever its length, as a live mapping
// does; a free entry is refilled by the next map of another buffer in its set.
const keepMax = (spanMax - 1) * PageSize

// readSpins is how many times a reader retries one entry before it yields the processor: a
// retry means a writer changed the entry between two loads a few nanoseconds apart.
const readSpins = 64

// The kind codes of entry.meta (0: a kind no map call makes). The map and unmap paths carry the
// code, not the Kind, so that they compare integers, not strings.
const (
	codeSingle uint64 = 1 + iota
	codePage
	codeSG
	codeCoherent
	codeRegistered
	// codeSingleSole is a MapSingleSole mapping's code in the index (see Sole): KindSingle to
	// every reader, but no public unmap matches it.
	codeSingleSole
)

// kindCode packs a Kind into three bits of entry.meta (0: a kind no map call makes).
func kindCode(k Kind) uint64 {
	switch k {
	case KindSingle:
		return codeSingle
	case KindPage:
		return codePage
	case KindSG:
		return codeSG
	case KindCoherent:
		return codeCoherent
	case KindRegistered:
		return codeRegistered
	}
	return 0
}

// codeKind is kindCode's inverse.
func codeKind(c uint64) Kind {
	return [...]Kind{"", KindSingle, KindPage, KindSG, KindCoherent, KindRegistered, KindSingle, ""}[c&7]
}

// metaFieldsOf packs size, direction and kind code (size must be at most maxIndexed, dir valid:
// the bits of an invalid one land in the other fields, so that its word could match another
// mapping's).
func metaFieldsOf(size int, dir Direction, code uint64) uint64 {
	return uint64(size)<<metaSizeShift | code<<metaKindShift | uint64(dir)<<metaDirShift
}

func metaSize(m uint64) int      { return int(m>>metaSizeShift) & maxIndexed }
func metaDir(m uint64) Direction { return Direction(m>>metaDirShift) & 3 }

// ways is one set of the index: its two entries. A struct of two pointers, not an array, so that
// it stays in registers (the register ABI passes arrays of two on the stack).
type ways struct{ e0, e1 *entry }

// way returns entry i (0 or 1) of the set.
func (w ways) way(i int) *entry {
	if i == 0 {
		return w.e0
	}
	return w.e1
}

// nWays is the number of entries of a set.
const nWays = 2

// set returns the two entries of the set for key. Direct's are directSet's (see "Direct's sets:
// one line per buffer line" above): found in table.ents, not through a stripe, whose cache line
// (its mutex, its page lists) the index's users do not touch. The IOMMU's are in granule order (see "The IOMMU's index in granule order" above): entry key
// and the entry half the index away, modulo the entries in use, of the whole table's index.
func (t *table) set(key uint64) ways {
	if t.keyShift != 0 {
		i := key & t.setMask
		return ways{&t.ents[i&(nIndex-1)], &t.ents[(i^t.setHalf)&(nIndex-1)]} // i^setHalf: i+setHalf modulo the entries in use
	}
	i := t.directSet(key)
	return ways{&t.ents[i&(nIndex-1)], &t.ents[(i+1)&(nIndex-1)]}
}

// useSets makes the table use 1<<bits sets of each stripe's index (setBits, or fewer in tests).
// Before the table is used.
func (t *table) useSets(bits uint) {
	t.setBits = bits
	t.setHalf = uint64(nStripes) << bits
	t.setMask = 2*t.setHalf - 1
	t.setSel = 1<<bits - 1
	t.setOwners(t.ownPs)
}

// setOwners records the number of per-P magazines of the IOMMU (0: none) and switches the
// owned blocks on if the index in use has four blocks for each P (a run claims up to four, see
// "Plain fills of a P's own block"). Before the table is used.
func (t *table) setOwners(ps int) {
	t.ownPs = ps
	t.owned = ps > 0 && uint64(4*ps) <= 2*t.setHalf>>ownBlockBits
}

// ownBlock returns the block of the index that holds entry i (modulo the entries in use), or the
// own entry of granule i (see "Plain fills of a P's own block").
func (t *table) ownBlock(i uint64) uint64 { return i & t.setMask >> ownBlockBits }

// farBlock returns the block that holds the far entries of block b's (setHalf away).
func (t *table) farBlock(b uint64) uint64 { return b ^ t.setHalf>>ownBlockBits }

// key returns the index key of a mapping whose first byte is at addr (see the index's
// description): the address for Direct, the granule for the IOMMU.
func (t *table) key(addr Addr) uint64 { return uint64(addr) >> t.keyShift }

// entryKey returns the index key of the mapping [addr, addr+size): key(addr), except that a Direct
// mapping of several pages is keyed by its first page's first byte, so that a translation of any
// address in it knows where to look: the set of its own page's first byte, or of one of the
// spanMax-1 pages before (scanBack).
func (t *table) entryKey(addr Addr, size int) uint64 {
	if t.keyShift == 0 && t.multi(addr, size) {
		return uint64(addr &^ (1<<t.shift - 1))
	}
	return t.key(addr)
}

// indexable reports whether the mapping [addr, addr+size) may live in the index: at most
// maxIndexed bytes touching at most spanMax pages (granules), and the index not switched off.
func (t *table) indexable(addr Addr, size int) bool {
	return !t.spillOnly && size <= maxIndexed &&
		uint64(addr+Addr(size)-1)>>t.shift-uint64(addr)>>t.shift < spanMax
}

// multi reports whether the mapping [addr, addr+size) touches more than one page (granule).
func (t *table) multi(addr Addr, size int) bool {
	return (addr^(addr+Addr(size)-1))>>t.shift != 0
}

// tryIndex publishes a mapping of buf (not empty) at bus address addr in the index, and returns
// the entry's Sole handle (soleOf), or 0 if it did not: the mapping is not indexable (too long) or
// its set had no free entry. Direct prefers the entry that last held the same buffer at the same
// address, which it takes with one CAS; otherwise fill takes a free entry with one CAS. No lock.
func (t *table) tryIndex(addr Addr, buf []byte, dir Direction, code uint64, region *Region) Sole {
	if !t.indexable(addr, len(buf)) {
		return 0
	}
	fields := metaFieldsOf(len(buf), dir, code)
	p := &buf[0]
	if t.keyShift != 0 {
		return t.fillIOMMU(t.key(addr), addr, p, fields, region, -1)
	}
	set := t.set(t.entryKey(addr, len(buf)))
	// Direct: the entry this buffer left, if still free: one CAS.
	for i := range nWays {
		e := set.way(i)
		m := e.meta.Load()
		if m&(metaState|metaFields) == metaFree|fields && e.addr.Load() == uint64(addr) &&
			e.ptr.Load() == p && e.region.Load() == region &&
			e.meta.CompareAndSwap(m, m+metaGen1|metaLive) {
			return t.soleOf(e, m+metaGen1)
		}
	}
	return t.fill(set, addr, p, fields, region)
}

// fill takes a free entry of Direct's set with a CAS (maps of one set may run at the same time),
// stores the words that differ and makes it live with the next generation, and returns its Sole
// handle; 0 if the set has no free entry.
func (t *table) fill(set ways, addr Addr, p *byte, fields uint64, region *Region) Sole {
	for {
		// A free entry that holds no buffer (never filled, or dropped), else any free entry, so
		// two buffers sharing a set each keep an entry of their own; the first such, so that the
		// first buffer of a set takes way 0, where the maps and translations of it look first.
		e, m, held := (*entry)(nil), uint64(0), false
		for i := range nWays {
			x := set.way(i)
			if xm := x.meta.Load(); xm&metaState == metaFree && (e == nil || held && x.ptr.Load() == nil) {
				e, m, held = x, xm, x.ptr.Load() != nil
			}
		}
		if e == nil {
			return 0
		}
		gen := m&^(metaGen1-1) + metaGen1
		if e.meta.CompareAndSwap(m, gen|metaBusy) {
			return t.publish(e, gen, addr, p, fields, region)
		}
		// Taken or ended meanwhile: choose again.
	}
}

// tryIndexPinned is tryIndex for the IOMMU's map of granules from the magazine of P id, to which
// the caller is pinned (pcpu.Pin): it may fill the low entry of a block P id owns with plain
// stores (see "Plain fills of a P's own block").
func (t *table) tryIndexPinned(id int, addr Addr, buf []byte, dir Direction, code uint64, region *Region) Sole {
	if !t.indexable(addr, len(buf)) {
		return 0
	}
	return t.fillIOMMU(t.key(addr), addr, &buf[0], metaFieldsOf(len(buf), dir, code), region, id)
}

// fillIOMMU takes the first free entry of the IOMMU's set of granule key, its own entry if it is
// free (granule order), stores the words that differ and makes it live with the next generation,
// and returns its Sole handle; 0 if the set has no entry free for the caller. If the blocks are
// owned (see "Plain fills of a P's own block"), a caller pinned to P id fills only entries of
// blocks P id owns, with plain stores; a caller with id -1, which holds the allocator's mutex,
// fills only entries of blocks no P owns, with a CAS. Otherwise every fill is a CAS (maps of
// fresh granules of different Ps, and of the allocator's cursor, may fill one entry at once).
func (t *table) fillIOMMU(key uint64, addr Addr, p *byte, fields uint64, region *Region, id int) Sole {
	i := key & t.setMask
	for w := range uint64(nWays) {
		j := i ^ w*t.setHalf // the own entry, then the far one
		e := &t.ents[j&(nIndex-1)]
		if t.owned {
			o := t.owners[t.ownBlock(j)].Load()
			if id >= 0 && o == int32(id)+1 {
				// The block's P, pinned: the entry's only filler (nothing else moves a free
				// entry of an owned block), so a free entry stays free until these stores.
				if m := e.meta.Load(); m&metaState == metaFree {
					return t.publish(e, m&^(metaGen1-1)+metaGen1, addr, p, fields, region)
				}
				continue
			}
			if id >= 0 || o != 0 {
				continue // another P's block, or, for the mutex's holder, a P's
			}
		}
		for {
			m := e.meta.Load()
			if m&metaState != metaFree {
				break
			}
			gen := m&^(metaGen1-1) + metaGen1
			if e.meta.CompareAndSwap(m, gen|metaBusy) {
				return t.publish(e, gen, addr, p, fields, region)
			}
		}
	}
	return 0
}

// publish fills entry e, which the caller alone may write (it made it busy with a CAS, or it is a
// free entry of the caller's own block), with the mapping (addr, p, fields, region) and
// generation gen, and returns its Sole handle. The word stores are the owner's (plain MOVs on
// amd64, store_amd64.go), and the store that makes it live is a store-release (a MOV on amd64),
// ordered after them, so a reader that sees the new meta sees the words it validates (message
// passing); a reader that loaded the entry's earlier live meta sees the generation move at its
// second load.
func (t *table) publish(e *entry, gen uint64, addr Addr, p *byte, fields uint64, region *Region) Sole {
	if e.ptr.Load() != p {
		ownStorePtr(&e.ptr, p)
	}
	if e.addr.Load() != uint64(addr) {
		ownStore64(&e.addr, uint64(addr))
	}
	if e.region.Load() != region {
		ownStorePtr(&e.region, region)
	}
	relaxed.StoreRelease64(&e.meta, gen|fields|metaLive)
	return t.soleOf(e, gen)
}

// claimIndex ends the live mapping (addr, size, dir, code) of the index and returns its region;
// ok is false if the index holds none. No lock.
func (t *table) claimIndex(addr Addr, size int, dir Direction, code uint64) (reg *Region, ok bool) {
	return t.endIndex(addr, size, dir, code, false)
}

// revokeIndex ends the live sole mapping (addr, size, dir) of the index for a public unmap that
// found no public one: it makes the entry revoked with a CAS of its meta word, and unpins the
// entry's region, which the public unmap releases as it would a public mapping's; the owner's
// claimSole frees the entry (see Sole). It reports whether it found one. No lock.
//
// The CAS compares the whole meta word, generation included, loaded before addr: it succeeds only
// if the entry still holds the mapping whose address was checked (an owner's free and a later fill
// change the word, and the generation never comes back), so it never ends a later mapping of the
// entry. The region is loaded before the CAS, as claimIndex does: only a writer that made the
// entry busy stores it, so if the CAS succeeds it is that mapping's. After the CAS the owner may
// free the entry and a fill take it at any moment: nothing of the entry is read again.
func (t *table) revokeIndex(addr Addr, size int, dir Direction) bool {
	_, ok := t.endIndex(addr, size, dir, codeSingleSole, true)
	return ok
}

// endIndex is claimIndex, or revokeIndex if revoke (which returns no region: it unpinned it).
func (t *table) endIndex(addr Addr, size int, dir Direction, code uint64, revoke bool) (reg *Region, ok bool) {
	if size > maxIndexed || size <= 0 || addr+Addr(size) < addr || !dir.Valid() {
		return nil, false // (an invalid dir's bits would land in the kind and size fields)
	}
	want := metaFieldsOf(size, dir, code) | metaLive
	set := t.set(t.entryKey(addr, size))
	for i := range nWays {
		e := set.way(i)
		for {
			m := e.meta.Load()
			if m&(metaState|metaFields) != want || e.addr.Load() != uint64(addr) {
				break
			}
			reg = e.region.Load() // m's region: if the CAS below succeeds, nothing changed it
			if revoke {
				if !e.meta.CompareAndSwap(m, m|metaRevoked) {
					continue
				}
				if reg != nil {
					reg.unpin()
				}
				return nil, true
			}
			if reg == nil && size <= keepMax {
				if e.meta.CompareAndSwap(m, m&^metaState|metaFree) {
					return nil, true
				}
				continue
			}
			if !e.meta.CompareAndSwap(m, m&^metaState|metaBusy) {
				continue
			}
			// Busy: this goroutine is the entry's only writer (see fill).
			ownStorePtr(&e.ptr, nil) // let the garbage collector have it; Region memory is munmapped
			if reg != nil {
				ownStorePtr(&e.region, nil)
			}
			relaxed.StoreRelease64(&e.meta, m&^metaState) // free, fields kept (a map compares ptr too)
			return reg, true
		}
	}
	return nil, false
}

// indexOccupant returns the end granule (exclusive) of an index entry that holds granule pg,
// live, revoked or being cleared, or 0 if none does. The IOMMU's keys are first granules, so only the set
// of pg holds a mapping that starts at pg, and the sets of the spanMax-1 granules before pg hold
// those of several granules that start there and may reach pg. Every one of those sets is asked
// (no counter of live mappings of several granules says when the others may be skipped: keeping
// one cost the fast map and unmap of every such mapping a locked add on a line shared by all Ps).
// Called with the IOMMU's allocator mutex held, on its slow paths only: the only fills that
// may run meanwhile are of granules the per-P IOVA magazines handed out (iova.go), which lie
// below the allocator's cursor, where it does not look before the space wraps (see IOMMU).
func (t *table) indexOccupant(pg uint64) uint64 {
	if end := t.startsAt(pg, pg); end != 0 {
		return end
	}
	for j := uint64(1); j < spanMax && j < pg; j++ {
		if end := t.startsAt(pg-j, pg); end > pg {
			return end
		}
	}
	return 0
}

// startsAt returns the end granule (exclusive) of an index entry, live, revoked or being cleared, whose
// mapping starts in granule g, if it reaches granule pg (>= g); else 0. For the IOMMU.
func (t *table) startsAt(g, pg uint64) uint64 {
	set := t.set(g)
	for i := range nWays {
		e := set.way(i)
		m := e.meta.Load()
		a := e.addr.Load()
		if m&metaState == metaFree || a>>t.shift != g {
			continue
		}
		if end := (a+uint64(metaSize(m))-1)>>t.shift + 1; end > pg {
			return end
		}
	}
	return 0
}

// indexLive lists the live mappings of the index, appending to out.
func (t *table) indexLive(out []Mapping) []Mapping {
	for i := range t.ents {
		e := &t.ents[i]
		m := e.meta.Load()
		a := e.addr.Load()
		if m&metaState == metaLive && e.meta.Load() == m {
			out = append(out, Mapping{Addr: Addr(a), Size: metaSize(m), Dir: metaDir(m), Kind: codeKind(m >> metaKindShift)})
		}
	}
	return out
}

// indexCount counts the live entries of the index.
func (t *table) indexCount() int {
	n := 0
	for i := range t.ents {
		if t.ents[i].meta.Load()&metaState == metaLive {
			n++
		}
	}
	return n
}

// probe is a reader's view of the index: what it found for [addr, end) in direction access.
type probe struct {
	addr, end Addr
	access    Direction
	exact     bool
	// mid, if set, runs between the loads of a matching entry's words (table.testMidRead).
	mid func()
	// Results: p and base (the mapping's first byte, CPU and bus) if a live entry holds the whole
	// range and allows the access; otherwise reason, the best one (see rank) seen so far.
	p      *byte
	base   Addr
	reason FaultReason
}

// rank orders the reasons lookup reports: a mapping that holds the range but refuses the access
// beats one that holds only its start, which beats none.
func rank(r FaultReason) int {
	switch r {
	case ReasonDirection:
		return 2
	case ReasonPartlyMapped:
		return 1
	}
	return 0
}

// worse keeps the higher-ranked reason in pr.
func (pr *probe) worse(r FaultReason) {
	if rank(r) > rank(pr.reason) {
		pr.reason = r
	}
}

// look checks the entries of set (atomic loads only) and reports whether one answers the probe.
func (pr *probe) look(set ways) bool {
	for i := range nWays {
		e := set.way(i)
		if pr.lookEntry(e) {
			return true
		}
	}
	return false
}

// lookEntry checks one entry: it loads meta, addr and ptr, then meta again, and trusts them only
// if the two meta loads agree (see the index's description); otherwise it loads them again.
func (pr *probe) lookEntry(e *entry) bool {
	for spins := 0; ; spins++ {
		m := e.meta.Load()
		if m&metaState != metaLive {
			return false
		}
		a := Addr(e.addr.Load())
		if pr.addr < a || pr.addr-a >= Addr(metaSize(m)) {
			// Not holding pr.addr, or torn: then the entry changed during the call, and
			// neither its old mapping (unmapped) nor its new one (made) was live throughout,
			// so the call may answer as if it had seen neither.
			return false
		}
		if pr.mid != nil {
			pr.mid()
		}
		p := e.ptr.Load()
		if e.meta.Load() == m {
			return pr.judge(m, a, p)
		}
		if spins >= readSpins {
			runtime.Gosched()
			spins = 0
		}
	}
}

// allows reports whether a mapping made with direction d permits the access: as Direction.Allows,
// or if exact (syncs), only a mapping in that very direction or a bidirectional one.
func allows(d, access Direction, exact bool) bool {
	if exact {
		return d == Bidirectional || d == access
	}
	return d.Allows(access)
}

// fast answers the common translation with no lock: a range inside a live mapping in the set
// of its key (Direct: starting at the mapping's first byte), or for Direct in the set of its
// page's first byte (a page-aligned buffer), that allows the access. Anything else (ok false) is
// for lookup's general path.
func (t *table) fast(addr Addr, size int, access Direction, exact bool) (b []byte, ok bool) {
	if b, ok = t.fastSet(t.set(t.key(addr)), addr, size, access, exact); ok || t.keyShift != 0 {
		return b, ok
	}
	return t.fastSet(t.set(t.key(addr&^(1<<t.shift-1))), addr, size, access, exact)
}

// fastSet is fast on one set.
func (t *table) fastSet(set ways, addr Addr, size int, access Direction, exact bool) ([]byte, bool) {
	for i := range nWays {
		e := set.way(i)
		m := e.meta.Load()
		a := Addr(e.addr.Load())
		if m&metaState != metaLive || addr < a || addr-a >= Addr(metaSize(m)) ||
			size > metaSize(m)-int(addr-a) || !allows(metaDir(m), access, exact) {
			continue
		}
		if t.testMidRead != nil {
			t.testMidRead()
		}
		p := e.ptr.Load()
		if e.meta.Load() == m { // validated (see lookEntry)
			return bytesAt(p, int(addr-a), size), true
		}
	}
	return nil, false
}

// judge answers the probe from one validated live mapping (meta m, first byte at a and p) that
// holds pr.addr: the bytes, or the reason it refuses them.
func (pr *probe) judge(m uint64, a Addr, p *byte) bool {
	if pr.end-a > Addr(metaSize(m)) {
		pr.worse(ReasonPartlyMapped)
		return false
	}
	if !allows(metaDir(m), pr.access, pr.exact) {
		pr.worse(ReasonDirection)
		return false
	}
	pr.p, pr.base = p, a
	return true
}

// scanSets runs the probe over the sets of the index that may hold pr.addr's mapping and reports
// whether it found the bytes (pr.reason keeps the best reason otherwise): the set of addr's key,
// and for Direct the set of its page's first byte (page-aligned buffers).
func (t *table) scanSets(pr *probe) bool {
	if pr.look(t.set(t.key(pr.addr))) {
		return true
	}
	pg := pr.addr &^ (1<<t.shift - 1)
	return t.keyShift == 0 && pg != pr.addr && pr.look(t.set(t.key(pg)))
}

// scanBack runs the probe over the sets that hold index mappings of several pages starting in one
// of the spanMax-1 pages before pr.addr's (see entryKey): the only index entries holding pr.addr
// that neither scanSets nor scanAll looks at.
func (t *table) scanBack(pr *probe) bool {
	pg := uint64(pr.addr) >> t.shift
	for j := uint64(1); j < spanMax && j <= pg; j++ {
		key := pg - j // the IOMMU's: the granule
		if t.keyShift == 0 {
			key <<= t.shift // Direct's: the page's first byte
		}
		if pr.look(t.set(key)) {
			return true
		}
	}
	return false
}

// scanAll runs the probe over the regions of the index of both halves of pr.addr's page: for
// Direct, an address inside a mapping that does not start on a page boundary (see the index's
// description): a mapping within one page that holds it is keyed in that page.
func (t *table) scanAll(pr *probe) bool {
	pg := uint64(pr.addr) &^ (PageSize - 1)
	for _, half := range [2]uint64{pg, pg + PageSize/2} {
		r := t.directSet(half) &^ (nEnt - 1) // the region's first entry
		for i := r; i < r+nEnt; i += 2 {
			if pr.look(ways{&t.ents[i], &t.ents[i+1]}) { // checked: no index (a zero Direct) panics
				return true
			}
		}
	}
	return false
}
