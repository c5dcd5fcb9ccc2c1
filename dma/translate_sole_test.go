package dma

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTranslateSoleAgrees: TranslateSole answers exactly as Translate does, whatever its hint:
// the right handle (the bytes, with no allocation), a range other than the mapping's (a part of
// it, one byte past it), another direction, the handle of another mapping, a stale generation, a
// handle naming no entry, 0, a range of the mapping's length at another address, a mapping revoked by a public unmap, and one unmapped by its owner.
func TestTranslateSoleAgrees(t *testing.T) {
	soleImpls(t, func(t *testing.T, m testMapper) {
		st, ok := m.(SoleTranslator)
		require.True(t, ok, "%T is a SoleTranslator", m)
		sm := m.(SoleMapper)
		bufs := [][]byte{make([]byte, 256), make([]byte, 40), make([]byte, 3*PageSize+100)}
		type mapping struct {
			addr Addr
			n    int
			h    Sole
		}
		var ms []mapping
		for _, b := range bufs {
			addr, h := soleMap(t, sm, b)
			ms = append(ms, mapping{addr, len(b), h})
		}
		same := func(what string, addr Addr, size int, access Direction, h Sole) {
			t.Helper()
			want, werr := m.Translate(addr, size, access)
			got, gerr := st.TranslateSole(addr, size, access, h)
			require.Equal(t, werr == nil, gerr == nil, "%s: errors %v and %v", what, werr, gerr)
			if werr != nil {
				var wf, gf *Fault
				require.True(t, errors.As(werr, &wf) && errors.As(gerr, &gf), what)
				require.Equal(t, *wf, *gf, what)
				return
			}
			require.Equal(t, len(want), len(got), what)
			require.Equal(t, cap(want), cap(got), what)
			require.Same(t, &want[0], &got[0], what)
		}
		for i, x := range ms {
			other := ms[(i+1)%len(ms)].h
			same("right handle", x.addr, x.n, ToDevice, x.h)
			same("a part", x.addr, x.n-1, ToDevice, x.h)
			same("a later part", x.addr+1, x.n-1, ToDevice, x.h)
			same("past the end", x.addr, x.n+1, ToDevice, x.h)
			same("shifted up", x.addr+1, x.n, ToDevice, x.h)
			same("shifted down", x.addr-1, x.n, ToDevice, x.h)
			same("other direction", x.addr, x.n, FromDevice, x.h)
			same("another's handle", x.addr, x.n, ToDevice, other)
			same("stale generation", x.addr, x.n, ToDevice, x.h+1<<soleBits)
			same("no entry", x.addr, x.n, ToDevice, x.h|(1<<soleBits-1))
			same("handle 0", x.addr, x.n, ToDevice, 0)
			same("bad length", x.addr, 0, ToDevice, x.h)
		}
		x := ms[0]
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := st.TranslateSole(x.addr, x.n, ToDevice, x.h); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs)

		// A public unmap revokes the first mapping: gone for both; its owner's unmap frees it.
		require.NoError(t, m.UnmapSingle(x.addr, x.n, ToDevice))
		same("revoked", x.addr, x.n, ToDevice, x.h)
		require.ErrorIs(t, sm.UnmapSingleSole(x.addr, x.n, ToDevice, x.h), ErrNotMapped)
		same("revoked, freed", x.addr, x.n, ToDevice, x.h)
		// The second unmapped by its owner, then mapped again: the old handle is stale.
		y := ms[1]
		require.NoError(t, sm.UnmapSingleSole(y.addr, y.n, ToDevice, y.h))
		same("unmapped", y.addr, y.n, ToDevice, y.h)
		addr, h := soleMap(t, sm, bufs[1])
		same("old handle of a mapping made again", addr, y.n, ToDevice, y.h)
		same("new handle", addr, y.n, ToDevice, h)
		require.NoError(t, sm.UnmapSingleSole(addr, y.n, ToDevice, h))
		require.NoError(t, sm.UnmapSingleSole(ms[2].addr, ms[2].n, ToDevice, ms[2].h))
		require.Zero(t, m.LiveCount())
	})
}

// TestTranslateSoleTornRead is TestTranslateTornRead for TranslateSole: between its loads of the
// entry's words (testMidRead), the owner unmaps the sole mapping and another buffer of the same
// length is mapped (in the same set). TranslateSole must notice (the entry's word moved) and
// answer as Translate: not mapped. A mutant without the second load of the word returns bytes.
func TestTranslateSoleTornRead(t *testing.T) {
	soleImpls(t, func(t *testing.T, m testMapper) {
		tab := tableOf(t, m)
		tab.useSets(0) // one set per stripe
		sm, st := m.(SoleMapper), m.(SoleTranslator)
		backing := make([]byte, PageSize)
		old, other := backing[64:128:128], backing[256:320:320]
		for i := range old {
			old[i], other[i] = 1, 2
		}
		a, h := soleMap(t, sm, old)
		var otherAddr Addr
		var otherH Sole
		var err error
		fired := false
		tab.testMidRead = func() {
			if fired {
				return
			}
			fired = true
			assert.NoError(t, sm.UnmapSingleSole(a, len(old), ToDevice, h))
			otherAddr, otherH, err = sm.MapSingleSole(other, ToDevice)
			assert.NoError(t, err)
		}
		b, err := st.TranslateSole(a, len(old), ToDevice, h)
		require.True(t, fired)
		requireFault(t, err, a, ReasonNotMapped)
		require.Nil(t, b)
		tab.testMidRead = nil
		b, err = st.TranslateSole(otherAddr, len(other), ToDevice, otherH)
		require.NoError(t, err)
		require.Equal(t, other, b)
		require.NoError(t, sm.UnmapSingleSole(otherAddr, len(other), ToDevice, otherH))
		requireTableEmpty(t, m)
	})
}

// soleImpls runs f on the mappers whose sole maps get handles: Direct, and the IOMMU with an IOVA
// space large enough for per-P magazines (a map off them gets handle 0).
func soleImpls(t *testing.T, f func(t *testing.T, m testMapper)) {
	t.Helper()
	t.Run("impl=direct", func(t *testing.T) { f(t, NewDirect()) })
	t.Run("impl=iommu-magazines", func(t *testing.T) {
		m, err := NewIOMMU(IOMMUConfig{IOVABits: 12 + 20})
		require.NoError(t, err)
		f(t, m)
	})
}

// soleMap maps buf with MapSingleSole until the map gets a handle (the IOMMU's first maps on a P
// fill its magazine on the general path, handle 0), undoing the maps without one.
func soleMap(t *testing.T, sm SoleMapper, buf []byte) (Addr, Sole) {
	t.Helper()
	for range 8 {
		a, h, err := sm.MapSingleSole(buf, ToDevice)
		require.NoError(t, err)
		if h != 0 {
			return a, h
		}
		require.NoError(t, sm.UnmapSingleSole(a, len(buf), ToDevice, 0))
	}
	if _, iommu := sm.(*IOMMU); iommu {
		// The IOMMU's fast map (the only one that hands out handles) pins the goroutine to its
		// P, which the purego build does not.
		t.Skipf("no handle for a map of %d bytes in 8 tries: no IOMMU fast map on this build", len(buf))
	}
	t.Fatalf("no handle for a map of %d bytes in 8 tries", len(buf))
	return 0, 0
}

// badDirs are Direction values that are not valid: the two direction bits' fourth value, and
// values with bits above them, which would land in an index word's kind and size fields if packed
// unchecked (metaFieldsOf): 8|ToDevice packs as a ToDevice mapping's word, 8..24 as a
// Bidirectional one's, 32|d as one of another size.
var badDirs = []Direction{3, 4, 8 | ToDevice, 8 | FromDevice, 8, 16, 16 | ToDevice, 24, 24 | ToDevice, 32 | ToDevice, 64 | Bidirectional, 255}

// TestTranslateSoleInvalidAccess: TranslateSole of an access that is not valid faults as
// Translate does, with the right handle of a live mapping (found by a review: the access's bits
// made the entry's word match).
func TestTranslateSoleInvalidAccess(t *testing.T) {
	soleImpls(t, func(t *testing.T, m testMapper) {
		st := m.(SoleTranslator)
		for _, n := range []int{255, 256} { // odd and even sizes: 32|d packs into the size field
			buf := make([]byte, n)
			addr, h := soleMap(t, m.(SoleMapper), buf)
			for _, acc := range badDirs {
				_, werr := m.Translate(addr, n, acc)
				got, gerr := st.TranslateSole(addr, n, acc, h)
				require.Error(t, werr, "Translate access %d", acc)
				require.Error(t, gerr, "TranslateSole access %d answered %d bytes where Translate faulted (%v)", acc, len(got), werr)
				var wf, gf *Fault
				require.True(t, errors.As(werr, &wf) && errors.As(gerr, &gf))
				require.Equal(t, *wf, *gf)
			}
			require.NoError(t, m.(SoleMapper).UnmapSingleSole(addr, n, ToDevice, h))
		}
	})
}

// TestUnmapInvalidDirection: an unmap with a direction that is not valid is ErrNotMapped and
// changes nothing, for every kind of mapping and unmap (single, sole, page, SG, and the sole
// unmap with a handle), whatever the invalid value's bits (found by a review: 8|ToDevice freed a
// ToDevice sole mapping, and UnmapSingle with it ended a ToDevice SG mapping). The right unmaps
// then succeed.
func TestUnmapInvalidDirection(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		sm := m.(SoleMapper)
		region, err := AllocPages(1)
		require.NoError(t, err)
		defer region.Close()
		single := make([]byte, 100)
		sole := make([]byte, 200)
		sgbuf := make([]byte, 300)
		page, err := region.Page(0)
		require.NoError(t, err)

		for _, dir := range []Direction{ToDevice, FromDevice, Bidirectional} {
			sa, err := m.MapSingle(single, dir)
			require.NoError(t, err)
			oa, h, err := sm.MapSingleSole(sole, dir)
			require.NoError(t, err)
			pa, err := m.MapPage(page, 64, 128, dir)
			require.NoError(t, err)
			sg := []SG{{Buf: sgbuf}}
			_, err = m.MapSG(sg, dir)
			require.NoError(t, err)
			live := m.LiveCount()
			for _, bad := range badDirs {
				require.ErrorIs(t, m.UnmapSingle(sa, len(single), bad), ErrNotMapped, "UnmapSingle dir %d of a %v single", bad, dir)
				require.ErrorIs(t, m.UnmapSingle(sg[0].Addr, sg[0].Len, bad), ErrNotMapped, "UnmapSingle dir %d of a %v SG entry", bad, dir)
				require.ErrorIs(t, m.UnmapSingle(oa, len(sole), bad), ErrNotMapped, "UnmapSingle dir %d of a %v sole", bad, dir)
				require.ErrorIs(t, sm.UnmapSingleSole(oa, len(sole), bad, h), ErrNotMapped, "UnmapSingleSole dir %d of a %v sole", bad, dir)
				require.ErrorIs(t, sm.UnmapSingleSole(sa, len(single), bad, 0), ErrNotMapped, "UnmapSingleSole dir %d, handle 0, of a %v single", bad, dir)
				require.ErrorIs(t, m.UnmapPage(pa, 128, bad), ErrNotMapped, "UnmapPage dir %d of a %v page", bad, dir)
				require.Error(t, m.UnmapSG(sg, bad), "UnmapSG dir %d of a %v SG", bad, dir)
				require.Equal(t, live, m.LiveCount(), "dir %d of %v: nothing changed", bad, dir)
			}
			for _, x := range []struct {
				a Addr
				n int
			}{{sa, len(single)}, {oa, len(sole)}, {pa, 128}, {sg[0].Addr, sg[0].Len}} {
				_, err := m.Translate(x.a, x.n, ToDevice)
				if dir == FromDevice {
					require.Error(t, err)
				} else {
					require.NoError(t, err, "still mapped")
				}
			}
			require.NoError(t, m.UnmapSingle(sa, len(single), dir))
			require.NoError(t, sm.UnmapSingleSole(oa, len(sole), dir, h))
			require.NoError(t, m.UnmapPage(pa, 128, dir))
			require.NoError(t, m.UnmapSG(sg, dir))
			require.Zero(t, m.LiveCount())
		}
	})
}
