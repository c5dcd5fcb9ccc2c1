package dma

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// nfModel is the IOVA allocator the IOMMU documents for spaces without magazines: next-fit from a
// cursor that only moves forward, wrapping to granule 1 (granule 0 is never used), a run of n
// granules starting at a multiple of align, the first one free at or after the cursor and then
// from granule 1; a full space fails.
type nfModel struct {
	used   []int // mapping id + 1 holding each granule, 0: free
	cursor uint64
}

func (m *nfModel) fits(s, n uint64) bool {
	if s == 0 || s+n > uint64(len(m.used)) {
		return false
	}
	for g := s; g < s+n; g++ {
		if m.used[g] != 0 {
			return false
		}
	}
	return true
}

// alloc returns the run next-fit picks, or false.
func (m *nfModel) alloc(n, align uint64) (uint64, bool) {
	space := uint64(len(m.used))
	up := func(c uint64) uint64 { return (c + align - 1) &^ (align - 1) }
	for s := up(m.cursor); s < space; s += align {
		if m.fits(s, n) {
			return s, true
		}
	}
	for s := up(1); s < space; s += align {
		if m.fits(s, n) {
			return s, true
		}
	}
	return 0, false
}

// nfLive is one live mapping of TestIOMMUNextFitModel.
type nfLive struct {
	a     Addr
	b     []byte
	kind  int // 0 MapSingle, 1 AllocCoherent, 2 Register, 3 MapSingleSole
	h     Sole
	co    *Coherent
	reg   *Registration
	first uint64
	n     uint64
}

// TestIOMMUNextFitModel drives IOMMUs of small spaces (no magazines, so the allocator is exact)
// with random maps of one to a dozen granules at random offsets (MapSingle and MapSingleSole),
// coherent allocations (aligned to the power-of-two number of pages covering their size: at least
// sixteen granules of 256 bytes, two or four 4 KiB ones above a page), registrations, unmaps,
// frees and deregistrations, and public unmaps of sole mappings behind their owners' backs (their
// granules stay taken until the owner's unmap, which is ErrNotMapped), and checks each against the
// model of next-fit (nfModel): the same bus address (its offset in the granule the CPU
// address's), ErrMapping exactly when the model has no room, every live mapping translating to
// its own bytes, LiveCount the mappings held, a fault right after each unmap, and the table empty
// at the end.
func TestIOMMUNextFitModel(t *testing.T) {
	for _, c := range []struct{ page, bits int }{{4096, 12 + 7}, {256, 8 + 9}, {4096, 12 + 5}} {
		t.Run(fmt.Sprintf("page=%d/granules=%d", c.page, 1<<(c.bits-bitsOf(c.page))), func(t *testing.T) {
			for seed := range uint64(20) {
				nfRun(t, c.page, c.bits, seed)
			}
		})
	}
}

func bitsOf(page int) int {
	n := 0
	for 1<<n < page {
		n++
	}
	return n
}

func nfRun(t *testing.T, page, iovaBits int, seed uint64) {
	m, err := NewIOMMU(IOMMUConfig{PageSize: page, IOVABits: iovaBits})
	require.NoError(t, err)
	require.Nil(t, m.mags, "a small space has no magazines")
	shift := uint(bitsOf(page))
	space := uint64(1) << (uint(iovaBits) - shift)
	model := &nfModel{used: make([]int, space), cursor: 1}
	r := rand.New(rand.NewPCG(seed, 11))
	backing := make([]byte, 16*page+PageSize)
	var live []nfLive
	var revoked []nfLive // sole mappings a public unmap revoked: their owner has not freed them yet
	free := func(x nfLive) {
		for g := x.first; g < x.first+x.n; g++ {
			model.used[g] = 0
		}
	}
	id := 0
	for step := range 400 {
		where := fmt.Sprintf("seed %d step %d", seed, step)
		if len(revoked) > 0 && r.IntN(4) == 0 { // the owner's unmap of a revoked mapping frees it
			x := revoked[0]
			revoked = revoked[1:]
			require.ErrorIs(t, m.UnmapSingleSole(x.a, len(x.b), ToDevice, x.h), ErrNotMapped, where)
			if x.h != 0 {
				free(x) // held by the revoked entry until now
			}
			continue
		}
		if len(live) > 0 && r.IntN(5) < 2 {
			i := r.IntN(len(live))
			x := live[i]
			got, err := m.Translate(x.a, len(x.b), ToDevice)
			require.NoError(t, err, where)
			require.Equal(t, sliceAddr(x.b), sliceAddr(got), where)
			switch x.kind {
			case 0:
				require.NoError(t, m.UnmapSingle(x.a, len(x.b), ToDevice), where)
			case 1:
				require.NoError(t, m.FreeCoherent(x.co), where)
			case 2:
				require.NoError(t, m.Deregister(context.Background(), x.reg), where)
			case 3:
				if r.IntN(2) == 0 {
					require.NoError(t, m.UnmapSingleSole(x.a, len(x.b), ToDevice, x.h), where)
					break
				}
				// A public unmap behind the owner's back: unmapped at once, but an index entry's
				// granules stay taken until the owner's unmap (a page-list mapping, handle 0, is
				// public and goes at once).
				require.NoError(t, m.UnmapSingle(x.a, len(x.b), ToDevice), where)
				revoked = append(revoked, x)
				if x.h != 0 {
					x.n = 0 // not freed below
				}
			}
			free(x)
			_, err = m.Translate(x.a, len(x.b), ToDevice)
			require.ErrorIs(t, err, ErrFault, where+": translate after unmap")
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			continue
		}
		x := nfLive{kind: r.IntN(4)}
		align := uint64(1)
		var size int
		switch x.kind {
		case 1:
			size = 1 + r.IntN(3*max(page, PageSize))
			// Aligned to the power-of-two number of pages covering size, in granules.
			align = max(1, uint64(coherentAlign(size))/uint64(page))
		default:
			size = 1 + r.IntN(1+r.IntN(12*page))
			off := r.IntN(page)
			if x.kind >= 2 { // registrations must not overlap: each its own buffer (so each sole one too)
				x.b = make([]byte, off+size)[off:]
			} else {
				x.b = backing[off : off+size]
			}
		}
		var n uint64
		if x.kind == 1 {
			n = (uint64(size) + uint64(page) - 1) / uint64(page) // page-aligned memory
		} else {
			o := uint64(sliceAddr(x.b)) & uint64(page-1)
			n = (o+uint64(size)-1)>>shift + 1
		}
		want, ok := model.alloc(n, align)
		switch x.kind {
		case 0:
			x.a, err = m.MapSingle(x.b, ToDevice)
		case 1:
			x.co, err = m.AllocCoherent(size)
			if err == nil {
				x.a, x.b = x.co.Addr(), x.co.Bytes()
			}
		case 2:
			x.reg, err = m.Register(x.b, ToDevice)
			if err == nil {
				x.a = x.reg.Addr()
			}
		case 3:
			x.a, x.h, err = m.MapSingleSole(x.b, ToDevice)
		}
		if !ok {
			require.ErrorIs(t, err, ErrMapping, "%s: kind %d of %d granules (align %d): the model has no room", where, x.kind, n, align)
			continue
		}
		require.NoError(t, err, "%s: kind %d of %d granules (align %d): the model puts it at %d", where, x.kind, n, align, want)
		require.Equal(t, want, uint64(x.a)>>shift, "%s: kind %d of %d granules (align %d), cursor %d", where, x.kind, n, align, model.cursor)
		require.Equal(t, uint64(sliceAddr(x.b))&uint64(page-1), uint64(x.a)&uint64(page-1), "%s: the offset in the granule is kept", where)
		id++
		x.first, x.n = want, n
		for g := want; g < want+n; g++ {
			model.used[g] = id
		}
		model.cursor = want + n
		got, err := m.Translate(x.a, len(x.b), ToDevice)
		require.NoError(t, err, where)
		require.Equal(t, sliceAddr(x.b), sliceAddr(got), where)
		live = append(live, x)
		require.Equal(t, len(live), m.LiveCount(), where)
	}
	for _, x := range live {
		var err error
		switch x.kind {
		case 0:
			err = m.UnmapSingle(x.a, len(x.b), ToDevice)
		case 1:
			err = m.FreeCoherent(x.co)
		case 2:
			err = m.Deregister(context.Background(), x.reg)
		case 3:
			err = m.UnmapSingleSole(x.a, len(x.b), ToDevice, x.h)
		}
		require.NoError(t, err)
	}
	for _, x := range revoked {
		require.ErrorIs(t, m.UnmapSingleSole(x.a, len(x.b), ToDevice, x.h), ErrNotMapped)
	}
	require.Zero(t, m.LiveCount())
	requireTableEmpty(t, m)
}
