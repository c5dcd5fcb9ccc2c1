package dma

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fuzzOps reads a fuzz input as a stream of small numbers; an exhausted stream reads as zeros.
type fuzzOps struct{ b []byte }

func (f *fuzzOps) more() bool { return len(f.b) > 0 }

func (f *fuzzOps) next(n int) int { // in [0, n)
	if len(f.b) == 0 || n <= 0 {
		return 0
	}
	v := int(f.b[0])
	if len(f.b) > 1 {
		v = v<<8 | int(f.b[1])
		f.b = f.b[2:]
	} else {
		f.b = f.b[1:]
	}
	return v % n
}

// modelMapping is the model's view of one live mapping: its bus address, where its bytes are in
// the fuzz region, its length, direction and kind.
type modelMapping struct {
	addr Addr
	off  int // offset of the first byte in the region
	size int
	dir  Direction
	kind Kind
	// sole is the handle of a MapSingleSole mapping in the index (0: any other mapping, also a
	// sole one the index did not take): UnmapSingleSole with it frees the mapping.
	sole Sole
	// revoked: a public unmap ended the sole mapping; it is unmapped to every reader, but its
	// entry (and IOVA) stays taken until UnmapSingleSole frees it, which reports ErrNotMapped.
	revoked bool
	// heap: the bytes are in the Go heap buffer (hmem), not the region (off is into hmem).
	heap bool
}

func (m modelMapping) end() Addr { return m.addr + Addr(m.size) }

// FuzzMapper drives a mapper with a random sequence of map, unmap, sync and translate calls on the
// memory of one region, and checks every result against a model (the list of live mappings):
// Translate succeeds exactly when one live mapping holds the whole range and allows the access,
// returns exactly those bytes (with no capacity beyond them), and otherwise faults with the
// reason the model predicts and counts the fault; unmaps and syncs succeed exactly when the model
// says; Direct's addresses are the CPU addresses; the IOMMU's are below its space, never in
// granule 0, never share a granule, keep the offset within the granule, and are ErrMapping
// exactly when no free run of granules is left; LiveCount matches the model after every map and
// unmap, Live at the end; every input unmaps all it mapped, leaving the region unpinned. Every third
// step's MapSingle is a MapSingleSole (chosen by the step, not the input, so that seeds keep their
// meaning): its mapping is one like any other to Translate, the syncs and Live, and
// UnmapSingleSole with its handle undoes it, once. A public KindSingle unmap that matches no
// public mapping revokes a matching sole one: gone for Translate, the syncs, Live and LiveCount at
// once, its granules still taken, and its UnmapSingleSole frees it and reports ErrNotMapped.
//
// The mapping table's index (index.go) is as it is, shrunk to one set per stripe (so that
// entries are recycled for other buffers and sets overflow into the page lists), or switched off,
// depending on the input's length (fuzzIndex), so that every input keeps its meaning.
func FuzzMapper(f *testing.F) {
	// Each number is two bytes. Map 100 bytes at +16 to the device, translate all of them, unmap,
	// translate again (a fault), on each mapper.
	for mapper := range byte(4) {
		f.Add([]byte{0, mapper, 0, 0, 0, 1, 0, 16, 0, 99,
			0, 5, 0, 9, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1,
			0, 3, 0, 0,
			0, 5, 0, 9, 0, 1, 0, 1})
	}
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 4, 0, 10, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 4, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 0, 3, 0, 100, 0, 2, 0, 1, 0, 0, 0, 1, 1, 0, 7, 0, 0, 0, 1, 0})
	f.Add([]byte{2, 7, 0, 5, 0, 0, 0, 3, 0, 7, 1, 0, 0, 5, 0, 2, 0, 3, 0, 0, 0, 0, 0, 1})
	f.Add(slices.Repeat([]byte{0, 0, 16, 0, 0, 80}, 40))
	f.Add(slices.Repeat([]byte{2, 1, 3, 0, 5, 1, 7, 2, 4, 9}, 30))
	// Multi-page MapSingles (5 and 17 pages on Direct and the IOMMU), translated inside their later
	// pages and past their end, then unmapped.
	for mapper := range byte(4) {
		f.Add([]byte{0, mapper, 0, 0, 0, 7, 0, 0, 0, 200, 0, 1, 0x50, 0x00,
			0, 5, 0, 0, 0x30, 0x00, 0, 0, 0, 1, 0, 1,
			0, 0, 0, 1, 0, 100, 0, 0, 0xff, 0xff,
			0, 6, 0, 1, 0xc0, 0x00, 0, 1, 0, 0, 0, 1,
			0, 3, 0, 0, 0, 3, 0, 0})
	}
	// A MapSingleSole (step 2) revoked by a public unmap (step 3), translated, unmapped publicly
	// again (ErrNotMapped) and freed by its own unmap (ErrNotMapped), on Direct and the IOMMU with
	// magazines (whose sole maps get handles).
	for _, mapper := range []byte{0, 3} {
		nums := []byte{mapper, 5, 0, 0, 1, 0, 5, 0, 0, 1, 0, 0, 0, 0, 1, 99, 3, 0, 5, 0, 0, 0, 1, 0, 3, 0, 3, 0}
		var seed []byte
		for _, n := range nums {
			seed = append(seed, 0, n)
		}
		f.Add(append(seed, make([]byte, (3-len(seed)%3)%3)...)) // the whole index (fuzzIndex)
	}
	// A sole map of a 16380-byte Go heap buffer (step 5: Direct's and the IOMMU's fast maps of
	// several pages), its own unmap (step 6), the same buffer mapped again (step 11: on Direct the
	// entry it left, made live again), translated whole and one byte past the end, and unmapped.
	for mapper := range uint16(4) {
		nums := []uint16{mapper, 3, 3, 3, 3, 3,
			0, 1, 300, 0, 16379,
			3, 0,
			3, 3, 3, 3,
			0, 1, 300, 0, 16379,
			5, 0, 0, 1, 0, 1, 1, 1,
			5, 0, 0, 1, 0, 2, 1, 1,
			3, 0}
		var seed []byte
		for _, n := range nums {
			seed = append(seed, byte(n>>8), byte(n))
		}
		f.Add(append(seed, make([]byte, (3-len(seed)%3)%3)...)) // the whole index (fuzzIndex)
	}
	// One mapping of 100 bytes at +16, unmapped one byte off (ErrNotMapped), one byte long
	// (ErrNotMapped), translated one byte past its end (ReasonPartlyMapped), then unmapped: with
	// the index as it is and with the page lists only (fuzzIndex), on each mapper. The seeds
	// before caught none of these mutants (review rv3): an index unmap ignoring the address, a
	// page-list unmap ignoring the length, a page-list translation reaching one byte past.
	for mapper := range uint16(4) {
		nums := []uint16{mapper,
			0, 1, 16, 1, 99,
			4, 0, 0, 2,
			4, 0, 1, 2,
			5, 0, 0, 1, 0, 2, 1, 1, 1,
			3, 0}
		var seed []byte
		for _, n := range nums {
			seed = append(seed, byte(n>>8), byte(n))
		}
		f.Add(append(seed, make([]byte, (3-len(seed)%3)%3)...)) // the whole index (fuzzIndex)
		f.Add(append(seed, make([]byte, (5-len(seed)%3)%3)...)) // the page lists only
	}
	f.Fuzz(fuzzMapper)
}

// fuzzMapper is FuzzMapper's body: one input.
func fuzzMapper(t *testing.T, data []byte) {
	{
		in := &fuzzOps{b: data}
		const pages = fuzzPages
		reg, mem, hmem := fuzzMapperMem(t)
		var err error
		var m testMapper
		var iommu *IOMMU
		switch in.next(4) {
		case 0:
			m = NewDirect()
		case 1:
			iommu, err = NewIOMMU(IOMMUConfig{IOVABits: 18}) // 63 usable granules of 4 KiB
		case 2:
			iommu, err = NewIOMMU(IOMMUConfig{PageSize: 256, IOVABits: 17}) // 511 of 256 B
		default: // 2^20 granules: maps of up to magMax granules take them from per-P magazines
			iommu, err = NewIOMMU(IOMMUConfig{IOVABits: 12 + 20})
		}
		if err != nil {
			t.Fatal(err)
		}
		if iommu != nil {
			m = iommu
		}
		fuzzIndex(tableOf(t, m), len(data))
		base := sliceAddr(mem)
		hbase := sliceAddr(hmem)
		var live []modelMapping
		faults := m.Faults()
		dirs := []Direction{Bidirectional, ToDevice, FromDevice}

		// granules returns the IOMMU granules [first, last] of a mapping.
		granules := func(mm modelMapping) (uint64, uint64) {
			return uint64(mm.addr) >> iommu.shift, uint64(mm.end()-1) >> iommu.shift
		}
		// fits reports whether a run of n granules starting at a multiple of align is free.
		fits := func(n, align uint64) bool {
			used := make([]bool, iommu.spacePages)
			used[0] = true
			for _, mm := range live {
				a, b := granules(mm)
				for g := a; g <= b; g++ {
					used[g] = true
				}
			}
			for s := align; s+n <= iommu.spacePages; s += align {
				if !slices.Contains(used[s:s+n], true) {
					return true
				}
			}
			return false
		}
		mapped := func(addr Addr, err error, off, size int, dir Direction, kind Kind, sole Sole, heap bool) {
			base := base
			if heap {
				base = hbase
			}
			if iommu != nil && errors.Is(err, ErrMapping) {
				cpu := uint64(base) + uint64(off)
				gmask := uint64(1)<<iommu.shift - 1
				n := (cpu&gmask+uint64(size)-1)>>iommu.shift + 1
				if fits(n, 1) {
					t.Fatalf("map of %d bytes at +%d: ErrMapping with a free run of %d granules", size, off, n)
				}
				return
			}
			if err != nil {
				t.Fatalf("map %s of %d bytes at +%d %v: %v", kind, size, off, dir, err)
			}
			mm := modelMapping{addr: addr, off: off, size: size, dir: dir, kind: kind, sole: sole, heap: heap}
			if iommu == nil {
				if addr != Addr(base)+Addr(off) {
					t.Fatalf("Direct address %#x, want the CPU address %#x", addr, base+uintptr(off))
				}
			} else {
				a, b := granules(mm)
				if a == 0 || b >= iommu.spacePages {
					t.Fatalf("IOVA %#x+%d outside granules 1..%d", addr, size, iommu.spacePages-1)
				}
				gmask := Addr(1)<<iommu.shift - 1
				if addr&gmask != Addr(base+uintptr(off))&gmask {
					t.Fatalf("IOVA %#x does not keep the CPU offset in the granule", addr)
				}
				for _, o := range live {
					oa, ob := granules(o)
					if a <= ob && oa <= b {
						t.Fatalf("IOVA %#x+%d shares a granule with live %#x+%d", addr, size, o.addr, o.size)
					}
				}
			}
			live = append(live, mm)
		}

		var lastSole Sole // the last MapSingleSole's handle: MapSingleSoleHint's hint
		for step := 0; in.more() && step < 300; step++ {
			op := in.next(8)
			switch op {
			case 0, 1: // MapSingle / MapPage of region memory
				dir := dirs[in.next(3)]
				if op == 0 {
					// Up to spanMax+1 pages: in the index up to spanMax, in the page lists beyond.
					off := in.next(len(mem))
					span := 3 * PageSize
					if in.next(4) == 0 {
						span = (spanMax + 1) * PageSize
					}
					size := 1 + in.next(min(len(mem)-off, span))
					var a Addr
					var h Sole
					heap := step%6 == 5
					if heap && step%12 == 11 {
						// The hint: the last sole handle (live, unmapped, revoked or 0),
						// which names an entry of this buffer or of another.
						a, h, err = m.(SoleMapper).MapSingleSoleHint(hmem[off:off+size], dir, lastSole)
					} else if heap {
						a, h, err = m.(SoleMapper).MapSingleSole(hmem[off:off+size], dir)
					} else if step%3 == 2 {
						a, h, err = m.(SoleMapper).MapSingleSole(mem[off:off+size], dir)
					} else {
						a, err = m.MapSingle(mem[off:off+size], dir)
					}
					if h != 0 {
						lastSole = h
					}
					mapped(a, err, off, size, dir, KindSingle, h, heap)
				} else {
					pg, off := in.next(pages), in.next(PageSize)
					size := 1 + in.next(PageSize-off)
					p, err := reg.Page(pg)
					if err != nil {
						t.Fatal(err)
					}
					a, err := m.MapPage(p, off, size, dir)
					mapped(a, err, pg*PageSize+off, size, dir, KindPage, 0, false)
				}
			case 2: // MapSG of one or two entries
				dir := dirs[in.next(3)]
				sg := make([]SG, 1+in.next(2))
				offs := make([]int, len(sg))
				for i := range sg {
					offs[i] = in.next(len(mem))
					sg[i].Buf = mem[offs[i] : offs[i]+1+in.next(min(len(mem)-offs[i], 2*PageSize))]
				}
				n, err := m.MapSG(sg, dir)
				if err != nil {
					if iommu == nil || !errors.Is(err, ErrMapping) {
						t.Fatalf("MapSG: %v", err)
					}
					for _, e := range sg {
						if e.Addr != 0 || e.Len != 0 {
							t.Fatal("failed MapSG left an entry filled in")
						}
					}
					break // the model cannot cheaply tell which entry ran out; the leak check below covers it
				}
				if n != len(sg) {
					t.Fatalf("MapSG mapped %d of %d", n, len(sg))
				}
				for i, e := range sg {
					if e.Len != len(e.Buf) {
						t.Fatalf("MapSG entry %d Len %d, want %d", i, e.Len, len(e.Buf))
					}
					mapped(e.Addr, nil, offs[i], e.Len, dir, KindSG, 0, false)
				}
			case 3, 4: // unmap a live mapping exactly (3), or with one parameter wrong (4)
				if len(live) == 0 {
					break
				}
				mm := live[in.next(len(live))]
				addr, size, dir, kind := mm.addr, mm.size, mm.dir, mm.kind
				if op == 4 {
					switch in.next(4) {
					case 0:
						addr += Addr(in.next(3)) - 1
					case 1:
						size += in.next(3) - 1
					case 2:
						dir = dirs[in.next(3)]
						if in.next(8) == 0 { // a direction that is not valid: ErrNotMapped, nothing changes
							dir = badDirs[in.next(len(badDirs))]
						}
					default:
						kind = []Kind{KindSingle, KindPage, KindSG}[in.next(3)]
					}
				}
				// A sole mapping: on even steps its own unmap (with the parameters as chosen), on
				// odd ones the public unmap, which revokes it if no public mapping matches.
				sole := Sole(0)
				if mm.sole != 0 && kind == KindSingle && step%2 == 0 {
					sole = mm.sole
				}
				err := fuzzUnmap(m, addr, size, dir, kind, sole)
				same := func(x modelMapping) bool {
					return x.addr == addr && x.size == size && x.dir == dir && x.kind == kind
				}
				if sole != 0 {
					i := slices.IndexFunc(live, func(x modelMapping) bool { return same(x) && x.sole == sole })
					if i < 0 {
						if !errors.Is(err, ErrNotMapped) {
							t.Fatalf("sole unmap %#x+%d %v of nothing: %v, want ErrNotMapped", addr, size, dir, err)
						}
						break
					}
					// Identical sole mappings (Direct: one buffer mapped twice) are told apart by
					// their handles only, and a revoke takes either: if the model revoked another
					// one of them, the result says which it was.
					for j := range live {
						if j != i && same(live[j]) && live[j].sole != 0 && live[j].revoked != live[i].revoked &&
							live[i].revoked == (err == nil) {
							live[i].revoked, live[j].revoked = live[j].revoked, live[i].revoked
							break
						}
					}
					if live[i].revoked && !errors.Is(err, ErrNotMapped) || !live[i].revoked && err != nil {
						t.Fatalf("sole unmap %#x+%d %v (revoked %v): %v", addr, size, dir, live[i].revoked, err)
					}
					live = slices.Delete(live, i, i+1)
					break
				}
				if i := slices.IndexFunc(live, func(x modelMapping) bool { return same(x) && x.sole == 0 }); i >= 0 {
					if err != nil {
						t.Fatalf("unmap %s %#x+%d %v: %v", kind, addr, size, dir, err)
					}
					live = slices.Delete(live, i, i+1)
					break
				}
				if i := slices.IndexFunc(live, func(x modelMapping) bool { return same(x) && x.sole != 0 && !x.revoked }); i >= 0 && kind == KindSingle {
					if err != nil {
						t.Fatalf("unmap (revoke) %s %#x+%d %v: %v", kind, addr, size, dir, err)
					}
					live[i].revoked = true
					break
				}
				if !errors.Is(err, ErrNotMapped) {
					t.Fatalf("unmap %s %#x+%d %v of nothing: %v, want ErrNotMapped", kind, addr, size, dir, err)
				}
			case 5, 6, 7: // Translate (5, 6) or sync (7) of a range near a live mapping
				var addr Addr
				var hint Sole // op 6: TranslateSole with this handle (right, another's, stale)
				size := 1 + in.next(PageSize)
				if len(live) > 0 {
					mm := live[in.next(len(live))]
					addr = mm.addr + Addr(in.next(mm.size+2)) - 1
					if in.next(2) == 0 {
						size = max(1, mm.size-int(addr-mm.addr)+in.next(3)-1)
					}
					if op == 6 {
						switch in.next(4) {
						case 0, 1:
							hint = mm.sole
						case 2:
							hint = live[in.next(len(live))].sole
						default:
							hint = mm.sole + 1<<soleBits // the entry's next generation
						}
					}
				} else {
					addr = Addr(base) + Addr(in.next(len(mem)))
				}
				if in.next(16) == 0 {
					size = -in.next(2) // bad length
				}
				access := dirs[in.next(3)]
				if op != 7 && in.next(16) == 0 { // an access that is not valid: a fault (not for syncs: ErrInvalid)
					access = badDirs[in.next(len(badDirs))]
				}
				// The model: the first matching reason, in Translate's order of precedence.
				var hold *modelMapping
				reason := ReasonNotMapped
				if !access.Valid() {
					reason = ReasonBadAccess
				} else if size <= 0 {
					reason = ReasonBadLength
				} else {
					for i := range live {
						x := &live[i]
						if x.revoked || addr < x.addr || addr >= x.end() {
							continue
						}
						if addr+Addr(size) > x.end() {
							if reason == ReasonNotMapped {
								reason = ReasonPartlyMapped
							}
							continue
						}
						ok := x.dir.Allows(access)
						if op == 7 {
							ok = x.dir == Bidirectional || x.dir == access
						}
						if !ok {
							reason = ReasonDirection
							continue
						}
						hold = x
						break
					}
				}
				if iommu != nil && hold == nil && uint64(addr)>>iommu.bits != 0 {
					reason = ReasonOutside
				}
				if op == 7 {
					err := m.SyncForDevice(addr, size, access)
					if (err == nil) != (hold != nil) || err != nil && !errors.Is(err, ErrNotMapped) {
						t.Fatalf("sync %#x+%d %v: %v, model holds: %v", addr, size, access, err, hold != nil)
					}
					break
				}
				// TranslateSole answers as Translate, whatever its hint.
				var b []byte
				if op == 6 {
					b, err = m.(SoleTranslator).TranslateSole(addr, size, access, hint)
				} else {
					b, err = m.Translate(addr, size, access)
				}
				if hold != nil {
					if err != nil {
						t.Fatalf("Translate %#x+%d %v: %v, want the bytes of %+v", addr, size, access, err, *hold)
					}
					off := hold.off + int(addr-hold.addr)
					src := mem
					if hold.heap {
						src = hmem
					}
					if len(b) != size || cap(b) != size || &b[0] != &src[off] {
						t.Fatalf("Translate %#x+%d: %d bytes (cap %d), not the mapped ones", addr, size, len(b), cap(b))
					}
					break
				}
				faults++
				var flt *Fault
				if !errors.As(err, &flt) || b != nil {
					t.Fatalf("Translate %#x+%d %v: %v, want a fault (%s)", addr, size, access, err, reason)
				}
				if flt.Addr != addr || flt.Size != size || flt.Access != access || flt.Reason != reason {
					t.Fatalf("fault %+v, want reason %q for %#x+%d", *flt, reason, addr, size)
				}
				if m.Faults() != faults {
					t.Fatalf("Faults() = %d, want %d", m.Faults(), faults)
				}
			}
			// LiveCount after every map and unmap, the steps that change what is live: it scans
			// the whole index (most of an input's time if done after every step), and a
			// translation or sync that changed it shows at the next check, or the end's.
			if n := liveOf(live); op <= 4 && m.LiveCount() != n {
				t.Fatalf("LiveCount %d, model %d", m.LiveCount(), n)
			}
		}

		requireEntryInvariants(t, tableOf(t, m))

		// The leak report lists exactly the model's mappings; unmapping them all empties the table.
		want := make([]Mapping, 0, len(live))
		for _, mm := range live {
			if !mm.revoked {
				want = append(want, Mapping{mm.addr, mm.size, mm.dir, mm.kind})
			}
		}
		if got := m.Live(); !sameMappings(got, want) {
			t.Fatalf("Live() = %v, model %v", got, want)
		}
		for _, mm := range live {
			if err := fuzzUnmap(m, mm.addr, mm.size, mm.dir, mm.kind, mm.sole); mm.revoked && !errors.Is(err, ErrNotMapped) || !mm.revoked && err != nil {
				t.Fatalf("unmap of %+v: %v", mm, err)
			}
		}
		if m.LiveCount() != 0 {
			t.Fatalf("LiveCount %d after unmapping everything", m.LiveCount())
		}
		requireTableEmpty(t, m)
		if n := reg.state.Load(); n != 0 {
			t.Fatalf("region state %#x after unmapping everything, want 0 (no pins)", n)
		}
	}
}

// fuzzPages is the length of FuzzMapper's region: room for mappings of more pages than the
// index takes.
const fuzzPages = spanMax + 4

// fuzzMapperMemory is FuzzMapper's memory, made once per process and shared by its inputs (the
// mappers only read it, and every input unmaps all it mapped, which the input checks): a region of
// fuzzPages pages, and Go heap memory of the same length and page offset for every sixth step's
// MapSingleSole (steps 5, 11, ...: Direct's and the IOMMU's fast maps take only Go memory).
// Allocating, filling and releasing them for each input took most of its time.
var fuzzMapperMemory struct {
	reg       *Region
	mem, hmem []byte
}

// fuzzMapperMem returns FuzzMapper's memory, made anew if an input that failed left the region
// pinned (so that the inputs after it do not fail for it).
func fuzzMapperMem(t *testing.T) (*Region, []byte, []byte) {
	fm := &fuzzMapperMemory
	if fm.reg != nil && fm.reg.state.Load() == 0 {
		return fm.reg, fm.mem, fm.hmem
	}
	reg, err := AllocPages(fuzzPages)
	if err != nil {
		t.Fatal(err)
	}
	mem := reg.Bytes()
	for i := range mem {
		mem[i] = byte(i * 13)
	}
	hmem := make([]byte, len(mem)+PageSize)
	hmem = hmem[-sliceAddr(hmem)&(PageSize-1):][:len(mem)]
	for i := range hmem {
		hmem[i] = byte(i*7 + 1)
	}
	fm.reg, fm.mem, fm.hmem = reg, mem, hmem
	return reg, mem, hmem
}

// sameMappings reports whether got and want list the same mappings, in any order (it sorts both).
func sameMappings(got, want []Mapping) bool {
	cmp := func(a, b Mapping) int {
		switch {
		case a.Addr != b.Addr:
			if a.Addr < b.Addr {
				return -1
			}
			return 1
		case a.Size != b.Size:
			return a.Size - b.Size
		case a.Dir != b.Dir:
			return int(a.Dir) - int(b.Dir)
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	}
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	return slices.Equal(got, want)
}

// liveOf counts the model's mappings that are live to readers (not revoked).
func liveOf(live []modelMapping) int {
	n := 0
	for _, mm := range live {
		if !mm.revoked {
			n++
		}
	}
	return n
}

// fuzzUnmap undoes a mapping with the unmap call of its kind, or with UnmapSingleSole if sole is
// not 0.
func fuzzUnmap(m testMapper, addr Addr, size int, dir Direction, kind Kind, sole Sole) error {
	if sole != 0 {
		return m.(SoleMapper).UnmapSingleSole(addr, size, dir, sole)
	}
	switch kind {
	case KindSingle:
		return m.UnmapSingle(addr, size, dir)
	case KindPage:
		return m.UnmapPage(addr, size, dir)
	}
	return m.UnmapSG([]SG{{Addr: addr, Len: size}}, dir)
}

// fuzzIndex sets the table's index up as the fuzz input's length n says: as it is, one set per
// stripe, or off (page lists only). It reads no input, so seeds keep their meaning.
func fuzzIndex(tab *table, n int) {
	switch n % 3 {
	case 1:
		tab.useSets(0)
	case 2:
		tab.spillOnly = true
	}
}
