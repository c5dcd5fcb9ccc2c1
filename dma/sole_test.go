package dma

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSoleMapUnmap: a MapSingleSole mapping is a KindSingle mapping to Translate, the syncs, Live
// and LiveCount; while it has a handle no public unmap (UnmapSingle, a batch entry without the
// handle) undoes it; UnmapSingleSole with the wrong length, direction, address or handle changes
// nothing; with its handle it undoes it once (the second call, and one after the entry was
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
					require.ErrorIs(t, m.UnmapSingle(a, len(buf), ToDevice), ErrNotMapped, "a public unmap of a sole mapping")
					require.ErrorIs(t, m.(BatchUnmapper).UnmapBatch([]Unmap{{Addr: a, Size: len(buf), Dir: ToDevice, Kind: KindSingle}}), ErrNotMapped)
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
// batch) allocate nothing once warm.
func TestSolePacketAllocs(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		sm := m.(SoleMapper)
		page := make([]byte, PageSize)
		hdr, payload := page[:40:40], page[40:296:296]
		us := make([]Unmap, 1)
		n := testing.AllocsPerRun(200, func() {
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
		require.Zero(t, n)
	})
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
				require.ErrorIs(t, w.(Mapper).UnmapSingle(a, len(buf), ToDevice), ErrNotMapped)
			}
			if inner {
				require.Zero(t, h, "a mapper that is not a SoleMapper maps with MapSingle")
			}
			require.NoError(t, UnmapAll(soleNoBatch{noBatch{w.(Mapper)}, w}, []Unmap{{Addr: a, Size: len(buf), Dir: ToDevice, Kind: KindSingle, Sole: h}}))
			require.Zero(t, m.LiveCount())
			if c, ok := w.(*Counting); ok {
				require.Equal(t, tries, c.Counts().MapSingle)
				require.Equal(t, tries+btoi(handles), c.Counts().UnmapSingle, "the public attempt counts too")
				require.Equal(t, btoi(handles), c.Counts().Errors, "%T", w)
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

func (n soleNoBatch) UnmapSingleSole(addr Addr, size int, dir Direction, h Sole) error {
	return n.s.UnmapSingleSole(addr, size, dir, h)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
