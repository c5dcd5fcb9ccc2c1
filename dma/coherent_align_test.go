package dma

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// kernelOrder is the alignment the DMA API promises dma_alloc_coherent's CPU and bus addresses:
// PAGE_SIZE << get_order(size), computed here by doubling.
func kernelOrder(size int) uint64 {
	a := uint64(PageSize)
	for a < uint64(size) {
		a *= 2
	}
	return a
}

// requireNoCrossing checks that [a, a+size) crosses no 2^k boundary for any 2^k >= size (k from 12
// to 21): what the alignment is for (a chunk of up to 64 KiB never crosses 64 KiB).
func requireNoCrossing(t *testing.T, what string, a uint64, size int) {
	t.Helper()
	for k := 12; k <= 21; k++ {
		if size <= 1<<k {
			require.Equal(t, a>>k, (a+uint64(size)-1)>>k, "%s %#x (+%d) crosses a %d boundary", what, a, size, 1<<k)
		}
	}
}

// coherentSizes are the sizes TestAllocCoherentAlignModel allocates: 1 byte to 1 MiB, every power
// of two from a page and one either side of it, and random ones between.
func coherentSizes(r *rand.Rand) []int {
	sizes := []int{1, 2, 100, PageSize - 1, PageSize}
	for s := 2 * PageSize; s <= 1<<20; s *= 2 {
		sizes = append(sizes, s/2+1, s-1, s)
	}
	for range 24 {
		sizes = append(sizes, 1+r.IntN(1<<(1+r.IntN(20))))
	}
	r.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })
	return sizes
}

// TestAllocCoherentAlignModel allocates coherent memory of many sizes (1 byte .. 1 MiB) from every
// mapper, with registrations and other mappings made and undone around it, and checks each against
// the kernel's rule (DMA-API: both addresses "aligned to the smallest PAGE_SIZE order which is
// greater than or equal to the requested size"): CPU and bus address aligned to kernelOrder(size),
// no 2^k boundary crossed for 2^k >= size, zeroed memory of the size asked translating to its own
// bytes, a region of only the pages the size needs; and that FreeCoherent releases everything: the
// region closed with no pin and out of the registry, the bus address faulting, LiveCount back to
// the other mappings, the table empty at the end.
func TestAllocCoherentAlignModel(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		r := rand.New(rand.NewPCG(7, 12))
		type other struct {
			a   Addr
			b   []byte
			reg *Registration
		}
		var others []other
		mapOther := func() {
			b := make([]byte, 1+r.IntN(3*PageSize))
			if r.IntN(3) == 0 {
				reg, err := m.(Registrar).Register(b, ToDevice)
				require.NoError(t, err)
				others = append(others, other{a: reg.Addr(), b: b, reg: reg})
				return
			}
			a, err := m.MapSingle(b, ToDevice)
			require.NoError(t, err)
			others = append(others, other{a: a, b: b})
		}
		unmapOther := func() {
			i := r.IntN(len(others))
			o := others[i]
			if o.reg != nil {
				require.NoError(t, m.(Registrar).Deregister(context.Background(), o.reg))
			} else {
				require.NoError(t, m.UnmapSingle(o.a, len(o.b), ToDevice))
			}
			others[i] = others[len(others)-1]
			others = others[:len(others)-1]
		}
		var live []*Coherent
		free := func(i int) {
			co := live[i]
			reg := co.region
			require.NoError(t, m.FreeCoherent(co))
			require.True(t, reg.Closed())
			require.Equal(t, regionClosed, reg.state.Load(), "no pin left on the region")
			require.Nil(t, regionOf(reg.base), "the region is out of the registry")
			_, err := m.Translate(co.Addr(), 1, ToDevice)
			require.ErrorIs(t, err, ErrFault, "bus address after FreeCoherent")
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		for _, size := range coherentSizes(r) {
			for range r.IntN(3) {
				mapOther()
			}
			if len(others) > 0 && r.IntN(2) == 0 {
				unmapOther()
			}
			co, err := m.AllocCoherent(size)
			require.NoError(t, err, "size %d", size)
			want := kernelOrder(size)
			b := co.Bytes()
			cpu, bus := uint64(sliceAddr(b)), uint64(co.Addr())
			where := fmt.Sprintf("size %d: cpu %#x bus %#x, want aligned to %d", size, cpu, bus, want)
			require.Len(t, b, size, where)
			require.Zero(t, cpu%want, where)
			require.Zero(t, bus%want, where)
			requireNoCrossing(t, "cpu", cpu, size)
			requireNoCrossing(t, "bus", bus, size)
			require.Equal(t, (size+PageSize-1)/PageSize, co.region.NumPages(), "%s: only the pages needed stay", where)
			require.Equal(t, uintptr(cpu), co.region.base, where)
			require.Equal(t, uint64(1), co.region.state.Load(), "%s: one pin, the coherent mapping's", where)
			require.Zero(t, b[0]|b[size-1], where)
			b[0], b[size-1] = 0xa5, 0x5a
			got, err := m.Translate(co.Addr(), size, Bidirectional)
			require.NoError(t, err, where)
			require.Equal(t, sliceAddr(b), sliceAddr(got), where)
			live = append(live, co)
			require.Equal(t, len(live)+len(others), m.LiveCount(), where)
			if r.IntN(3) == 0 {
				free(r.IntN(len(live)))
			}
		}
		for len(live) > 0 {
			free(len(live) - 1)
		}
		require.Equal(t, len(others), m.LiveCount())
		for len(others) > 0 {
			unmapOther()
		}
		require.Zero(t, m.LiveCount())
		requireTableEmpty(t, m)
	})
}

// TestPoolAlignModel checks Pool against dma_pool_create's promises on every mapper, for sizes
// and aligns from 1 byte to 64 KiB (aligns beyond a page included, which dma_pool_create takes),
// with other mappings made between the allocations: every block's CPU and bus address aligned to
// align, blocks of a chunk lying size rounded up to align apart, no block crossing a page (blocks
// of up to a page) or a boundary of the power of two covering it (larger ones), no two blocks
// overlapping, and Free plus Destroy releasing every chunk.
func TestPoolAlignModel(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		type other struct {
			a Addr
			n int
		}
		var others []other
		for _, c := range []struct{ size, align int }{
			{1, 0}, {3, 2}, {48, 16}, {100, 64}, {64, 64}, {1000, 512}, {PageSize, PageSize},
			{PageSize + 1, 8}, {100, 2 * PageSize}, {3 * PageSize, 16 * PageSize}, {64 << 10, 64 << 10}, {5000, 1 << 16},
		} {
			p, err := NewPool(m, "align", c.size, c.align)
			require.NoError(t, err, "%+v", c)
			align := max(c.align, 1)
			step := (c.size + align - 1) / align * align
			limit := uint64(PageSize) // no block of up to a page crosses one
			if step > PageSize {
				limit = kernelOrder(step)
			}
			n := 2*max(1, PageSize/step) + 1 // into a third chunk
			var blocks []Block
			seen := map[uint64]bool{}
			for i := range n {
				b, err := p.Alloc()
				require.NoError(t, err, "%+v", c)
				cpu, bus := uint64(sliceAddr(b.Bytes)), uint64(b.Addr)
				where := fmt.Sprintf("%+v block %d: cpu %#x bus %#x", c, i, cpu, bus)
				require.Len(t, b.Bytes, c.size, where)
				require.Zero(t, cpu%uint64(align), where)
				require.Zero(t, bus%uint64(align), where)
				for _, a := range []uint64{cpu, bus} {
					require.Equal(t, a/limit, (a+uint64(c.size)-1)/limit, "%s: crosses a %d boundary", where, limit)
				}
				// Blocks step bytes long that do not overlap start step apart at least.
				require.False(t, seen[bus/uint64(step)], "%s: overlaps another block", where)
				seen[bus/uint64(step)] = true
				got, err := m.Translate(b.Addr, c.size, Bidirectional)
				require.NoError(t, err, where)
				require.Equal(t, sliceAddr(b.Bytes), sliceAddr(got), where)
				blocks = append(blocks, b)
				o := other{n: 1 + i%3*PageSize} // another mapping between the blocks
				o.a, err = m.MapSingle(make([]byte, o.n), ToDevice)
				require.NoError(t, err)
				others = append(others, o)
			}
			for i := 1; i < len(blocks); i++ { // within a chunk the blocks are step apart
				if blocks[i].ref.chunk == blocks[i-1].ref.chunk {
					d := int64(blocks[i].Addr) - int64(blocks[i-1].Addr)
					require.Equal(t, int64(step), d, "%+v: blocks %d and %d of a chunk", c, i-1, i)
				}
			}
			for _, b := range blocks {
				require.NoError(t, p.Free(b))
			}
			require.NoError(t, p.Destroy())
			require.Equal(t, len(others), m.LiveCount(), "%+v: Destroy freed every chunk", c)
		}
		for _, o := range others {
			require.NoError(t, m.UnmapSingle(o.a, o.n, ToDevice))
		}
		require.Zero(t, m.LiveCount())
		requireTableEmpty(t, m)
	})
}

// TestAllocCoherentAlignBeyondSpace asks an IOMMU of a 1 MiB IOVA space (granule 0 reserved) for
// coherent memory whose aligned run cannot fit though the space has the granules: 512 KiB + 1
// byte wants 129 granules of 4 KiB (of 256, all free) aligned to 1 MiB, which only granule 0
// offers. The answer is ErrMapping that names the alignment (not a bare "no 129 free granules of
// 256" for an empty space), at once, with nothing left mapped; a 512 KiB one still fits.
func TestAllocCoherentAlignBeyondSpace(t *testing.T) {
	for _, granule := range []int{256, PageSize, 64 << 10} {
		m, err := NewIOMMU(IOMMUConfig{PageSize: granule, IOVABits: 20})
		require.NoError(t, err)
		for _, size := range []int{1<<19 + 1, 1 << 20, 3 << 20} {
			_, err := m.AllocCoherent(size)
			require.ErrorIs(t, err, ErrMapping, "granule %d size %d", granule, size)
			if size < 1<<20 {
				require.ErrorContains(t, err, fmt.Sprintf("aligned to %d granules", (1<<20)/granule), "granule %d size %d", granule, size)
			}
		}
		require.Zero(t, m.LiveCount())
		co, err := m.AllocCoherent(1 << 19)
		require.NoError(t, err, "granule %d", granule)
		require.Equal(t, Addr(1<<19), co.Addr())
		require.NoError(t, m.FreeCoherent(co))
		require.Zero(t, m.LiveCount())
	}
}
