package dma

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSoleMapUnmap: a MapSingleSole mapping is a KindSingle mapping to Translate, the syncs, Live
// and LiveCount; no public unmap with another length, direction or kind touches it (a matching
// one revokes it: TestSoleRevoke); UnmapSingleSole with the wrong length, direction, address or
// handle changes nothing; with its handle it undoes it once (the second call, and one after the entry was
// filled again, are ErrNotMapped), after which Translate faults. Heap buffers of one page (the
// plain-store unmap), of several pages and Region memory (the unmap that drops the buffer), in
// every index variant (a sole map the index does not take has handle 0 and is a public mapping).
func TestSoleMapUnmap(t *testing.T) {
	indexVariants(t, func(t *testing.T, m testMapper) {
		sm := m.(SoleMapper)
		reg := newRegion(t, 3)
		heap := make([]byte, 4*PageSize)
		for name, buf := range map[string][]byte{
			"heap":      heap[100:400],
			"multipage": heap[100 : 100+2*PageSize],
			"region":    reg.Bytes()[64 : 64+300],
		} {
			t.Run(name, func(t *testing.T) {
				copy(buf, pattern(len(buf), 11))
				a, h, err := sm.MapSingleSole(buf, ToDevice)
				require.NoError(t, err)
				got, err := m.Translate(a, len(buf), ToDevice)
				require.NoError(t, err)
				require.Equal(t, &buf[0], &got[0])
				require.NoError(t, m.SyncForDevice(a, len(buf), ToDevice))
				require.Equal(t, []Mapping{{Addr: a, Size: len(buf), Dir: ToDevice, Kind: KindSingle}}, m.Live())
				require.Equal(t, 1, m.LiveCount())
				_, err = m.Translate(a, len(buf), FromDevice)
				requireFault(t, err, a, ReasonDirection)

				if h != 0 {
					require.ErrorIs(t, m.UnmapSingle(a, len(buf)-1, ToDevice), ErrNotMapped, "a public unmap of another length")
					require.ErrorIs(t, m.(BatchUnmapper).UnmapBatch([]Unmap{{Addr: a, Size: len(buf), Dir: Bidirectional, Kind: KindSingle}}), ErrNotMapped)
					require.ErrorIs(t, m.UnmapPage(a, len(buf), ToDevice), ErrNotMapped, "a public unmap of another kind")
					require.ErrorIs(t, sm.UnmapSingleSole(a, len(buf)-1, ToDevice, h), ErrNotMapped)
					require.ErrorIs(t, sm.UnmapSingleSole(a, len(buf), Bidirectional, h), ErrNotMapped)
					require.ErrorIs(t, sm.UnmapSingleSole(a+1, len(buf), ToDevice, h), ErrNotMapped)
					require.ErrorIs(t, sm.UnmapSingleSole(a, len(buf), ToDevice, h+1<<soleBits), ErrNotMapped, "another generation")
					require.ErrorIs(t, sm.UnmapSingleSole(a, len(buf), ToDevice, h&^(1<<soleBits-1)|nIndex+1), ErrNotMapped, "no such entry")
					require.Equal(t, 1, m.LiveCount(), "a refused unmap undid the mapping")
				}
				require.NoError(t, sm.UnmapSingleSole(a, len(buf), ToDevice, h))
				require.Zero(t, m.LiveCount())
				_, err = m.Translate(a, len(buf), ToDevice)
				requireFault(t, err, a, ReasonNotMapped)
				require.ErrorIs(t, sm.UnmapSingleSole(a, len(buf), ToDevice, h), ErrNotMapped, "a double unmap")

				// The entry filled again (the same buffer: on Direct the same address and entry):
				// the old handle names an older generation.
				a2, h2, err := sm.MapSingleSole(buf, ToDevice)
				require.NoError(t, err)
				if h != 0 {
					require.ErrorIs(t, sm.UnmapSingleSole(a2, len(buf), ToDevice, h), ErrNotMapped, "a stale handle")
					require.Equal(t, 1, m.LiveCount())
				}
				require.NoError(t, sm.UnmapSingleSole(a2, len(buf), ToDevice, h2))
				requireTableEmpty(t, m)
			})
		}
	})
}

// TestSoleUnmapBatch: a batch undoes sole entries (with their handles) and public ones together;
// an entry that is not mapped (a sole one unmapped already, or one whose handle is for another
// kind) is reported, the first of them in the batch's order, and the others are undone.
func TestSoleUnmapBatch(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		// One P for the test: the IOMMU's map that refills a P's magazine (its first on a P) maps
		// under its mutex with handle 0, so entry 2 must be mapped on the P entry 0 filled (a
		// goroutine moved to another P between them failed this under qemu-user).
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		sm := m.(SoleMapper)
		bufs := make([][]byte, 6)
		us := make([]Unmap, len(bufs))
		for i := range bufs {
			bufs[i] = make([]byte, 64+8*i)
			var err error
			if i%2 == 0 {
				us[i].Addr, us[i].Sole, err = sm.MapSingleSole(bufs[i], ToDevice)
			} else {
				us[i].Addr, err = m.MapSingle(bufs[i], ToDevice)
			}
			require.NoError(t, err)
			us[i].Size, us[i].Dir, us[i].Kind = len(bufs[i]), ToDevice, KindSingle
		}
		if im, ok := m.(*IOMMU); !ok || im.mags != nil { // an IOMMU without magazines maps under its mutex: handle 0
			require.NotZero(t, us[2].Sole)
		}
		require.NoError(t, sm.UnmapSingleSole(us[2].Addr, us[2].Size, ToDevice, us[2].Sole)) // entry 2 is gone
		bad := us[4]
		bad.Kind = KindPage // a handle with the wrong kind matches nothing
		batch := append([]Unmap(nil), us...)
		batch = append(batch, bad)
		err := m.(BatchUnmapper).UnmapBatch(batch)
		require.ErrorIs(t, err, ErrNotMapped)
		assert.Contains(t, err.Error(), fmt.Sprintf("single [%#x,+%d)", uint64(us[2].Addr), us[2].Size), "the first entry not mapped is entry 2")
		require.Zero(t, m.LiveCount(), "every mapped entry of the batch is undone")
		requireTableEmpty(t, m)
	})
}

// TestSolePacketAllocs: a packet's sole mappings (map, translate, and unmap one by one and in a
// batch) allocate nothing once warm, with a payload of 256 bytes and of 16380 (several pages).
func TestSolePacketAllocs(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		for _, n := range []int{256, 16380} {
			testSolePacketAllocs(t, m, n)
		}
	})
}

func testSolePacketAllocs(t *testing.T, m testMapper, n int) {
	sm := m.(SoleMapper)
	page := make([]byte, 40+n)
	hdr, payload := page[:40:40], page[40:40+n:40+n]
	us := make([]Unmap, 1)
	allocs := testing.AllocsPerRun(200, func() {
		ha, hh, err := sm.MapSingleSole(hdr, ToDevice)
		if err != nil {
			panic(err)
		}
		pa, ph, err := sm.MapSingleSole(payload, ToDevice)
		if err != nil {
			panic(err)
		}
		if _, err := m.Translate(pa, len(payload), ToDevice); err != nil {
			panic(err)
		}
		if err := sm.UnmapSingleSole(ha, len(hdr), ToDevice, hh); err != nil {
			panic(err)
		}
		us[0] = Unmap{Addr: pa, Size: len(payload), Dir: ToDevice, Kind: KindSingle, Sole: ph}
		if err := m.(BatchUnmapper).UnmapBatch(us); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs, "payload of %d bytes", n)
}

// TestSoleWrappers: Counting and FaultInjector pass the sole path on (the wrapped mapper's
// handle, counted as MapSingle and UnmapSingle), map with MapSingle and handle 0 around a mapper
// that is not a SoleMapper, and UnmapAll undoes a batch of sole entries one by one through a
// mapper that is not a BatchUnmapper.
func TestSoleWrappers(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		buf := make([]byte, 100)
		for _, w := range []SoleMapper{NewCounting(m), NewFaultInjector(m), NewCounting(noBatch{m}), NewCounting(NewCounting(m))} {
			_, inner := w.(*Counting)
			if inner {
				_, inner = w.(*Counting).Unwrap().(noBatch)
			}
			im, isIOMMU := m.(*IOMMU)
			handles := !inner && (!isIOMMU || im.mags != nil)
			a, h, err := w.MapSingleSole(buf, ToDevice)
			require.NoError(t, err)
			// The IOMMU's map that refills its P's magazine (the first, or after a move to
			// another P) goes under its mutex, with handle 0: try again.
			for tries := 0; handles && h == 0 && tries < 10; tries++ {
				require.NoError(t, w.UnmapSingleSole(a, len(buf), ToDevice, h))
				a, h, err = w.MapSingleSole(buf, ToDevice)
				require.NoError(t, err)
			}
			tries := 1
			if c, ok := w.(*Counting); ok {
				tries = c.Counts().MapSingle
			}
			if handles {
				require.NotZero(t, h, "%T: the wrapped mapper's handle", w)
				// A public unmap through the wrapper revokes it (TestSoleRevoke): unreadable at
				// once, freed by the owner's unmap below, which reports ErrNotMapped.
				require.NoError(t, w.(Mapper).UnmapSingle(a, len(buf), ToDevice))
				_, err = m.Translate(a, len(buf), ToDevice)
				requireFault(t, err, a, ReasonNotMapped)
				require.ErrorIs(t, w.(Mapper).UnmapSingle(a, len(buf), ToDevice), ErrNotMapped, "a second public unmap")
			}
			if inner {
				require.Zero(t, h, "a mapper that is not a SoleMapper maps with MapSingle")
			}
			err = UnmapAll(soleNoBatch{noBatch{w.(Mapper)}, w}, []Unmap{{Addr: a, Size: len(buf), Dir: ToDevice, Kind: KindSingle, Sole: h}})
			if handles {
				require.ErrorIs(t, err, ErrNotMapped, "the owner's unmap of a revoked mapping")
			} else {
				require.NoError(t, err)
			}
			requireTableEmpty(t, m)
			require.Zero(t, m.LiveCount())
			if c, ok := w.(*Counting); ok {
				require.Equal(t, tries, c.Counts().MapSingle)
				require.Equal(t, tries+2*btoi(handles), c.Counts().UnmapSingle, "the public unmaps count too")
				require.Equal(t, 2*btoi(handles), c.Counts().Errors, "%T: the second public unmap and the owner's", w)
			}
		}
	})
}

// soleNoBatch is a SoleMapper that is not a BatchUnmapper.
type soleNoBatch struct {
	noBatch
	s SoleMapper
}

func (n soleNoBatch) MapSingleSole(buf []byte, dir Direction) (Addr, Sole, error) {
	return n.s.MapSingleSole(buf, dir)
}

func (n soleNoBatch) MapSingleSoleHint(buf []byte, dir Direction, hint Sole) (Addr, Sole, error) {
	return n.s.MapSingleSoleHint(buf, dir, hint)
}

func (n soleNoBatch) UnmapSingleSole(addr Addr, size int, dir Direction, h Sole) error {
	return n.s.UnmapSingleSole(addr, size, dir, h)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// entryState returns the state bits of the index entry a Sole handle names.
func entryState(t testing.TB, m testMapper, h Sole) uint64 {
	return tableOf(t, m).ents[uint64(h&(1<<soleBits-1))-1].meta.Load() & metaState
}

// TestSoleRevoke: a public unmap of a sole mapping (UnmapSingle, a batch entry without the
// handle, UnmapAll one by one) revokes it: it succeeds, and at once Translate and the syncs fault
// as for an unmapped address, Live and LiveCount do not list it, a second public unmap is
// ErrNotMapped, the owner's unmap with a wrong length or handle changes nothing, and a Region
// behind it is unpinned (its Close releases it). The entry stays taken until the owner's unmap,
// which frees it and reports ErrNotMapped (in a batch: names it); after that the table is empty
// and a second owner's unmap is ErrNotMapped. On Direct a public unmap ends an identical public
// mapping before it revokes a sole one.
func TestSoleRevoke(t *testing.T) {
	indexVariants(t, func(t *testing.T, m testMapper) {
		sm := m.(SoleMapper)
		heap := make([]byte, 4*PageSize)
		type revokeFn func(a Addr, n int) error
		revokes := map[string]revokeFn{
			"single": func(a Addr, n int) error { return m.UnmapSingle(a, n, ToDevice) },
			"batch": func(a Addr, n int) error {
				return m.(BatchUnmapper).UnmapBatch([]Unmap{{Addr: a, Size: n, Dir: ToDevice, Kind: KindSingle}})
			},
			"unmapall": func(a Addr, n int) error {
				return UnmapAll(noBatch{m}, []Unmap{{Addr: a, Size: n, Dir: ToDevice, Kind: KindSingle}})
			},
		}
		for rname, revoke := range revokes {
			for _, bname := range []string{"heap", "multipage", "region"} {
				t.Run(rname+"/"+bname, func(t *testing.T) {
					var reg *Region
					var buf []byte
					switch bname {
					case "heap":
						buf = heap[100:400]
					case "multipage":
						buf = heap[100 : 100+2*PageSize]
					default:
						var err error
						reg, err = AllocPages(1)
						require.NoError(t, err)
						buf = reg.Bytes()[64 : 64+300]
					}
					copy(buf, pattern(len(buf), 5))
					a, h, err := sm.MapSingleSole(buf, ToDevice)
					require.NoError(t, err)
					if h == 0 { // not in the index: a public mapping
						require.NoError(t, revoke(a, len(buf)))
						require.ErrorIs(t, revoke(a, len(buf)), ErrNotMapped)
						requireTableEmpty(t, m)
						if reg != nil {
							require.NoError(t, reg.Close())
						}
						return
					}
					require.NoError(t, revoke(a, len(buf)), "a public unmap of a sole mapping")
					require.Equal(t, uint64(metaRevoked), entryState(t, m, h))
					_, err = m.Translate(a, len(buf), ToDevice)
					requireFault(t, err, a, ReasonNotMapped)
					_, err = m.Translate(a+1, 1, ToDevice)
					requireFault(t, err, a+1, ReasonNotMapped)
					require.ErrorIs(t, m.SyncForDevice(a, len(buf), ToDevice), ErrNotMapped)
					require.Empty(t, m.Live())
					require.Zero(t, m.LiveCount())
					require.ErrorIs(t, revoke(a, len(buf)), ErrNotMapped, "a second public unmap")
					require.ErrorIs(t, m.UnmapSingle(a, len(buf), ToDevice), ErrNotMapped)
					require.ErrorIs(t, sm.UnmapSingleSole(a, len(buf)-1, ToDevice, h), ErrNotMapped)
					require.ErrorIs(t, sm.UnmapSingleSole(a, len(buf), ToDevice, h+1<<soleBits), ErrNotMapped, "another generation")
					require.Equal(t, uint64(metaRevoked), entryState(t, m, h), "a refused owner's unmap freed the entry")
					if reg != nil {
						require.NoError(t, reg.Close(), "the revoke unpinned the region")
					}
					if rname == "batch" {
						err = m.(BatchUnmapper).UnmapBatch([]Unmap{{Addr: a, Size: len(buf), Dir: ToDevice, Kind: KindSingle, Sole: h}})
						require.ErrorIs(t, err, ErrNotMapped)
						assert.Contains(t, err.Error(), fmt.Sprintf("single [%#x,+%d)", uint64(a), len(buf)))
					} else {
						err = sm.UnmapSingleSole(a, len(buf), ToDevice, h)
						require.ErrorIs(t, err, ErrNotMapped, "the owner's unmap of a revoked mapping")
						assert.Contains(t, err.Error(), "unmapped by a public unmap first")
					}
					require.Equal(t, uint64(metaFree), entryState(t, m, h), "the owner's unmap frees the entry")
					require.ErrorIs(t, sm.UnmapSingleSole(a, len(buf), ToDevice, h), ErrNotMapped, "a second owner's unmap")
					requireTableEmpty(t, m)
					if reg == nil {
						// The buffer maps again, and the new mapping is readable.
						a2, h2, err := sm.MapSingleSole(buf, ToDevice)
						require.NoError(t, err)
						got, err := m.Translate(a2, len(buf), ToDevice)
						require.NoError(t, err)
						require.Equal(t, pattern(len(buf), 5), got)
						require.NoError(t, sm.UnmapSingleSole(a2, len(buf), ToDevice, h2))
						requireTableEmpty(t, m)
					}
				})
			}
		}
		if _, ok := m.(*Direct); ok {
			t.Run("public first", func(t *testing.T) {
				buf := heap[1000:1100]
				a, err := m.MapSingle(buf, ToDevice)
				require.NoError(t, err)
				a2, h, err := sm.MapSingleSole(buf, ToDevice)
				require.NoError(t, err)
				require.Equal(t, a, a2)
				require.NoError(t, m.UnmapSingle(a, len(buf), ToDevice))
				require.Equal(t, 1, m.LiveCount())
				if h != 0 {
					require.Equal(t, uint64(metaLive), entryState(t, m, h), "the public unmap revoked the sole mapping, not the public one")
					require.NoError(t, m.UnmapSingle(a, len(buf), ToDevice))
					require.ErrorIs(t, sm.UnmapSingleSole(a, len(buf), ToDevice, h), ErrNotMapped)
				} else {
					require.NoError(t, sm.UnmapSingleSole(a, len(buf), ToDevice, h))
				}
				requireTableEmpty(t, m)
			})
		}
	})
}

// TestSoleRevokeIOVA: the IOMMU does not hand out the granule of a revoked sole mapping until its
// owner's unmap frees it: the allocator counts it as taken (a run from the cursor skips it), and
// the granule is free again after the owner's unmap.
func TestSoleRevokeIOVA(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	if m.mags == nil {
		t.Skip("no IOVA magazines (purego): every IOMMU map is under its mutex, with handle 0")
	}
	buf := make([]byte, 200)
	a, h, err := m.MapSingleSole(buf, ToDevice)
	for tries := 0; err == nil && h == 0 && tries < 10; tries++ { // a magazine refill maps with handle 0
		require.NoError(t, m.UnmapSingle(a, len(buf), ToDevice))
		a, h, err = m.MapSingleSole(buf, ToDevice)
	}
	require.NoError(t, err)
	require.NotZero(t, h)
	g := uint64(a) >> m.shift
	freeAt := func() uint64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		old := m.cursor
		defer func() { m.cursor = old }()
		m.cursor = g
		start, ok := m.findFree(1, 1)
		require.True(t, ok)
		return start
	}
	require.NotEqual(t, g, freeAt(), "a live mapping's granule")
	require.NoError(t, m.UnmapSingle(a, len(buf), ToDevice))
	require.NotZero(t, m.tab.occupant(g), "a revoked mapping's granule is taken")
	require.NotEqual(t, g, freeAt(), "a revoked mapping's granule handed out")
	require.ErrorIs(t, m.UnmapSingleSole(a, len(buf), ToDevice, h), ErrNotMapped)
	require.Zero(t, m.tab.occupant(g))
	require.Equal(t, g, freeAt(), "the owner's unmap frees the granule")
	requireTableEmpty(t, m)
}
