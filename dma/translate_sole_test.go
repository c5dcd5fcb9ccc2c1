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
