package dma

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testMapper is what every mapper under test offers besides Mapper.
type testMapper interface {
	Mapper
	Faults() uint64
	LiveCount() int
	Live() []Mapping
}

// impls runs f once per mapper implementation (the cryptotest.TestAllImplementations pattern).
func impls(t *testing.T, f func(t *testing.T, m testMapper)) {
	t.Helper()
	t.Run("impl=direct", func(t *testing.T) { f(t, NewDirect()) })
	t.Run("impl=iommu", func(t *testing.T) {
		m, err := NewIOMMU(IOMMUConfig{})
		require.NoError(t, err)
		f(t, m)
	})
	t.Run("impl=iommu64k", func(t *testing.T) {
		m, err := NewIOMMU(IOMMUConfig{PageSize: 64 << 10, IOVABits: 40})
		require.NoError(t, err)
		f(t, m)
	})
	t.Run("impl=iommu256", func(t *testing.T) { // granules smaller than a page
		m, err := NewIOMMU(IOMMUConfig{PageSize: 256, IOVABits: 36})
		require.NoError(t, err)
		f(t, m)
	})
}

// shortRounds returns n, or under -short n/4 on an IOMMU whose granules are smaller than a page
// (impls' iommu256). There a mapping of a few pages is tens of granules, each found free, listed
// and unlisted on its own (the page lists), which made that mapper's share of the stress tests
// most of the dma package's -race -short -cpu=1,2,4 time (97 s of 200 in TestTranslateRemapRace,
// TestTranslateRemapRaceSole and TestSharedBufConcurrentMapUnmap). The other mappers run every
// round under -short, and every mapper every round without it.
func shortRounds(m testMapper, n int) int {
	if im, ok := m.(*IOMMU); ok && testing.Short() && im.PageSize() < PageSize {
		return n / 4
	}
	return n
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func newRegion(t testing.TB, n int) *Region {
	t.Helper()
	r, err := AllocPages(n)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// requireFault checks err is a *Fault for addr with the reason.
func requireFault(t *testing.T, err error, addr Addr, reason FaultReason) {
	t.Helper()
	require.ErrorIs(t, err, ErrFault)
	var f *Fault
	require.ErrorAs(t, err, &f)
	assert.Equal(t, addr, f.Addr)
	assert.Equal(t, reason, f.Reason)
	assert.Contains(t, f.Error(), fmt.Sprintf("%#x", uint64(addr)))
	assert.Contains(t, f.Error(), reason)
}

func TestRoundTripSingle(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		for _, n := range []int{1, 3, 100, PageSize - 1, PageSize, 3*PageSize + 17, 200 << 10} {
			buf := pattern(n, byte(n))
			a, err := m.MapSingle(buf, ToDevice)
			require.NoError(t, err)
			require.NotZero(t, a)
			got, err := m.Translate(a, n, ToDevice)
			require.NoError(t, err)
			require.Equal(t, buf, got)
			require.Same(t, &buf[0], &got[0], "Translate aliases the mapped memory")
			require.Equal(t, n, cap(got), "no access past the range through cap")
			if n > 2 {
				mid, err := m.Translate(a+1, n-2, ToDevice)
				require.NoError(t, err)
				require.Same(t, &buf[1], &mid[0])
				require.Equal(t, n-2, cap(mid))
			}
			require.NoError(t, m.SyncForDevice(a, n, ToDevice))
			require.NoError(t, m.SyncForCPU(a, n, ToDevice))
			require.Equal(t, 1, m.LiveCount())
			require.NoError(t, m.UnmapSingle(a, n, ToDevice))
			require.Zero(t, m.LiveCount())
		}
		require.Zero(t, m.Faults())
	})
}

func TestRoundTripPage(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		r := newRegion(t, 4)
		p, err := r.Page(2)
		require.NoError(t, err)
		copy(p.Bytes(), pattern(PageSize, 9))
		for _, c := range []struct{ off, size int }{{0, PageSize}, {0, 1}, {PageSize - 1, 1}, {100, 1000}} {
			a, err := m.MapPage(p, c.off, c.size, FromDevice)
			require.NoError(t, err)
			got, err := m.Translate(a, c.size, FromDevice)
			require.NoError(t, err)
			require.Same(t, &p.Bytes()[c.off], &got[0])
			copy(got, pattern(c.size, 1)) // the device writes
			require.Equal(t, pattern(c.size, 1), p.Bytes()[c.off:c.off+c.size])
			require.NoError(t, m.SyncForCPU(a, c.size, FromDevice))
			require.Equal(t, []Mapping{{Addr: a, Size: c.size, Dir: FromDevice, Kind: KindPage}}, m.Live())
			require.NoError(t, m.UnmapPage(a, c.size, FromDevice))
		}
		require.Zero(t, m.LiveCount())
	})
}

func TestRoundTripSG(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		r := newRegion(t, 1)
		sg := []SG{{Buf: pattern(10, 1)}, {Buf: r.Bytes()[8:2000]}, {Buf: pattern(5000, 3)}}
		n, err := m.MapSG(sg, Bidirectional)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		for _, e := range sg {
			require.Equal(t, len(e.Buf), e.Len)
			got, err := m.Translate(e.Addr, e.Len, ToDevice)
			require.NoError(t, err)
			require.Same(t, &e.Buf[0], &got[0])
			_, err = m.Translate(e.Addr, e.Len, FromDevice)
			require.NoError(t, err)
		}
		require.Equal(t, 3, m.LiveCount())
		for _, l := range m.Live() {
			require.Equal(t, KindSG, l.Kind)
		}
		require.NoError(t, m.UnmapSG(sg, Bidirectional))
		require.Zero(t, m.LiveCount())
		require.ErrorIs(t, m.UnmapSG(sg, Bidirectional), ErrNotMapped)

		// A bad entry in the middle leaves nothing mapped.
		bad := []SG{{Buf: pattern(10, 1)}, {Buf: nil}, {Buf: pattern(10, 2)}}
		_, err = m.MapSG(bad, ToDevice)
		require.ErrorIs(t, err, ErrInvalid)
		require.Zero(t, m.LiveCount())
		require.Zero(t, bad[0].Addr)
	})
}

func TestRoundTripCoherent(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		for _, n := range []int{4, PageSize, PageSize + 1} {
			c, err := m.AllocCoherent(n)
			require.NoError(t, err)
			require.Equal(t, n, c.Size())
			require.Equal(t, make([]byte, n), c.Bytes(), "zeroed")
			require.Zero(t, sliceAddr(c.Bytes())%PageSize, "page-aligned")
			got, err := m.Translate(c.Addr(), n, FromDevice)
			require.NoError(t, err)
			got[n-1] = 0xAB
			require.Equal(t, byte(0xAB), c.Bytes()[n-1])
			_, err = m.Translate(c.Addr(), n, ToDevice)
			require.NoError(t, err)
			require.Equal(t, []Mapping{{Addr: c.Addr(), Size: n, Dir: Bidirectional, Kind: KindCoherent}}, m.Live())
			require.ErrorIs(t, m.UnmapSingle(c.Addr(), n, Bidirectional), ErrNotMapped, "coherent memory is freed with FreeCoherent")
			require.NoError(t, m.FreeCoherent(c))
			require.Nil(t, c.Bytes())
			require.ErrorIs(t, m.FreeCoherent(c), ErrClosed)
			_, err = m.Translate(c.Addr(), n, ToDevice)
			requireFault(t, err, c.Addr(), ReasonNotMapped)
		}
		other := NewDirect()
		c, err := other.AllocCoherent(8)
		require.NoError(t, err)
		require.ErrorIs(t, m.FreeCoherent(c), ErrNotMapped)
		require.ErrorIs(t, m.FreeCoherent(nil), ErrInvalid)
		require.NoError(t, other.FreeCoherent(c))
		_, err = m.AllocCoherent(0)
		require.ErrorIs(t, err, ErrInvalid)
		require.Zero(t, m.LiveCount())
	})
}

func TestFaults(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		buf := pattern(256, 5)
		a, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		faults := m.Faults()
		check := func(addr Addr, size int, access Direction, reason FaultReason) {
			t.Helper()
			b, err := m.Translate(addr, size, access)
			require.Nil(t, b)
			requireFault(t, err, addr, reason)
			faults++
			require.Equal(t, faults, m.Faults())
		}
		check(a+256, 1, ToDevice, ReasonNotMapped)     // just past the end
		check(a-1, 2, ToDevice, ReasonNotMapped)       // starts before
		check(a+200, 57, ToDevice, ReasonPartlyMapped) // runs past the end
		check(a, 257, ToDevice, ReasonPartlyMapped)    // one byte too many
		check(a, 16, FromDevice, ReasonDirection)      // the device may not write
		check(a, 16, Bidirectional, ReasonDirection)   // nor read and write
		check(a, 0, ToDevice, ReasonBadLength)         // empty
		check(a, -1, ToDevice, ReasonBadLength)        // negative
		check(^Addr(0)-3, 8, ToDevice, badTop(m))      // wraps around
		check(a, 16, Direction(7), ReasonBadAccess)    // not a direction
		check(0, 1, ToDevice, ReasonNotMapped)         // address zero

		// Two adjacent mappings: a range spanning both is refused.
		b2 := make([]byte, 512)
		x, err := m.MapSingle(b2[:256], ToDevice)
		require.NoError(t, err)
		y, err := m.MapSingle(b2[256:], ToDevice)
		require.NoError(t, err)
		if y == x+256 { // contiguous in bus space (always for Direct)
			check(x+200, 100, ToDevice, ReasonPartlyMapped)
		}
		require.NoError(t, m.UnmapSingle(x, 256, ToDevice))
		require.NoError(t, m.UnmapSingle(y, 256, ToDevice))

		// After unmap: faults.
		require.NoError(t, m.UnmapSingle(a, 256, ToDevice))
		check(a, 1, ToDevice, ReasonNotMapped)
		check(a+100, 10, ToDevice, ReasonNotMapped)
		runtime.KeepAlive(buf)
		runtime.KeepAlive(b2)
	})
}

// badTop is the reason for a range at the very top of the 64-bit space.
func badTop(m testMapper) FaultReason {
	if _, ok := m.(*IOMMU); ok {
		return ReasonOutside
	}
	return ReasonBadLength
}

func TestIOMMUOutside(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{IOVABits: 32})
	require.NoError(t, err)
	_, err = m.Translate(1<<32, 4, ToDevice)
	requireFault(t, err, 1<<32, ReasonOutside)
	require.EqualValues(t, 1, m.Faults())
}

func TestOutOfRegion(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		r := newRegion(t, 2)
		p, err := r.Page(0)
		require.NoError(t, err)
		for _, c := range []struct{ off, size int }{{0, 0}, {-1, 10}, {PageSize - 10, 11}, {PageSize, 1}, {0, PageSize + 1}, {1, -5}} {
			_, err := m.MapPage(p, c.off, c.size, ToDevice)
			require.ErrorIs(t, err, ErrInvalid, "off %d size %d", c.off, c.size)
		}
		_, err = m.MapPage(Page{}, 0, 1, ToDevice)
		require.ErrorIs(t, err, ErrInvalid)
		_, err = r.Page(2)
		require.ErrorIs(t, err, ErrInvalid)
		_, err = r.Page(-1)
		require.ErrorIs(t, err, ErrInvalid)

		// A page mapped by itself does not give access to its neighbour, even though the
		// neighbour is in the same region.
		a, err := m.MapPage(p, PageSize-8, 8, ToDevice)
		require.NoError(t, err)
		_, err = m.Translate(a, 9, ToDevice)
		requireFault(t, err, a, ReasonPartlyMapped)
		_, err = m.Translate(a+8, 8, ToDevice)
		require.ErrorIs(t, err, ErrFault)
		require.NoError(t, m.UnmapPage(a, 8, ToDevice))
		require.Zero(t, m.LiveCount())
	})
}

func TestInvalidAndUnmapErrors(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		_, err := m.MapSingle(nil, ToDevice)
		require.ErrorIs(t, err, ErrInvalid)
		_, err = m.MapSingle([]byte{}, ToDevice)
		require.ErrorIs(t, err, ErrInvalid)
		_, err = m.MapSingle(make([]byte, 8), Direction(3))
		require.ErrorIs(t, err, ErrInvalid)
		_, err = m.MapSG(nil, ToDevice)
		require.ErrorIs(t, err, ErrInvalid)

		buf := make([]byte, 64)
		a, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		require.ErrorIs(t, m.UnmapSingle(a, 63, ToDevice), ErrNotMapped, "wrong size")
		require.ErrorIs(t, m.UnmapSingle(a, 64, FromDevice), ErrNotMapped, "wrong direction")
		require.ErrorIs(t, m.UnmapPage(a, 64, ToDevice), ErrNotMapped, "wrong function")
		require.ErrorIs(t, m.UnmapSingle(a+1, 63, ToDevice), ErrNotMapped, "not the start")
		require.ErrorIs(t, m.SyncForCPU(a, 64, FromDevice), ErrNotMapped, "sync against the direction")
		require.ErrorIs(t, m.SyncForDevice(a, 65, ToDevice), ErrNotMapped, "sync past the end")
		require.ErrorIs(t, m.SyncForDevice(a, 64, Bidirectional), ErrNotMapped, "bidirectional sync of a to-device mapping")
		require.ErrorIs(t, m.SyncForCPU(a, 64, Direction(9)), ErrInvalid, "not a direction")
		require.ErrorIs(t, m.SyncForDevice(a, 0, ToDevice), ErrNotMapped, "empty")

		// A bidirectional mapping may be synced in any direction (dma-debug's check_sync).
		bi, err := m.MapSingle(buf, Bidirectional)
		require.NoError(t, err)
		for _, d := range []Direction{ToDevice, FromDevice, Bidirectional} {
			require.NoError(t, m.SyncForCPU(bi, 64, d), "%v", d)
			require.NoError(t, m.SyncForDevice(bi+1, 63, d), "%v", d)
		}
		require.NoError(t, m.UnmapSingle(bi, 64, Bidirectional))
		require.Equal(t, 1, m.LiveCount(), "failed unmaps change nothing")
		_, err = m.Translate(a, 64, ToDevice)
		require.NoError(t, err)
		require.NoError(t, m.UnmapSingle(a, 64, ToDevice))
		require.ErrorIs(t, m.UnmapSingle(a, 64, ToDevice), ErrNotMapped, "double unmap")
		require.ErrorIs(t, m.SyncForCPU(a, 64, ToDevice), ErrNotMapped)
	})
}

func TestDirectOverlap(t *testing.T) {
	m := NewDirect()
	buf := pattern(100, 1)
	a1, err := m.MapSingle(buf, ToDevice)
	require.NoError(t, err)
	a2, err := m.MapSingle(buf, ToDevice)
	require.NoError(t, err)
	a3, err := m.MapSingle(buf[10:20], FromDevice)
	require.NoError(t, err)
	require.Equal(t, a1, a2)
	require.Equal(t, a1+10, a3)
	require.Equal(t, 3, m.LiveCount())
	_, err = m.Translate(a1+10, 10, FromDevice) // only the inner mapping allows writes
	require.NoError(t, err)
	_, err = m.Translate(a1+10, 11, FromDevice)
	require.ErrorIs(t, err, ErrFault)

	require.NoError(t, m.UnmapSingle(a1, 100, ToDevice))
	got, err := m.Translate(a1, 100, ToDevice)
	require.NoError(t, err, "the second mapping of the same buffer is still live")
	require.Equal(t, buf, got)
	require.NoError(t, m.UnmapSingle(a2, 100, ToDevice))
	_, err = m.Translate(a1, 100, ToDevice)
	require.ErrorIs(t, err, ErrFault)
	require.NoError(t, m.UnmapSingle(a3, 10, FromDevice))
	require.Zero(t, m.LiveCount())
}

func TestDirectIdentity(t *testing.T) {
	m := NewDirect()
	buf := make([]byte, 10)
	a, err := m.MapSingle(buf, ToDevice)
	require.NoError(t, err)
	require.Equal(t, Addr(sliceAddr(buf)), a, "InfiniPath: bus address = virtual address")
	require.NoError(t, m.UnmapSingle(a, 10, ToDevice))
}

func TestIOMMUConfig(t *testing.T) {
	for _, cfg := range []IOMMUConfig{
		{PageSize: 3000}, {PageSize: 128}, {PageSize: -4096}, {IOVABits: 12}, {IOVABits: 64},
		{IOVABits: -1}, {FailNth: -1}, {FailFraction: 1.5}, {FailFraction: -0.1},
	} {
		_, err := NewIOMMU(cfg)
		require.ErrorIs(t, err, ErrInvalid, "%+v", cfg)
	}
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	require.Equal(t, 4096, m.PageSize())
}

func TestIOMMUAddresses(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{PageSize: 64 << 10})
	require.NoError(t, err)
	r := newRegion(t, 20)
	seen := map[Addr]bool{}
	for i := range 20 {
		p, _ := r.Page(i)
		a, err := m.MapPage(p, 8, 100, ToDevice)
		require.NoError(t, err)
		require.Less(t, uint64(a), uint64(1)<<48)
		require.Equal(t, uint64(sliceAddr(p.Bytes()[8:]))%(64<<10), uint64(a)%(64<<10), "offset in granule kept")
		require.False(t, seen[a>>16], "one mapping per granule")
		seen[a>>16] = true
	}
	for _, l := range m.Live() {
		require.NoError(t, m.UnmapPage(l.Addr, l.Size, l.Dir))
	}
	require.Zero(t, m.LiveCount())
}

// TestIOMMUSmallGranuleCoherent: with granules smaller than a page, coherent memory still gets a
// page-aligned bus address (dma_alloc_coherent), so pool blocks aligned up to PageSize are aligned
// on the bus too; and an aligned run that does not fit is ErrMapping.
func TestIOMMUSmallGranuleCoherent(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{PageSize: 256, IOVABits: 13}) // 32 granules, 2 pages
	require.NoError(t, err)
	a, err := m.MapSingle(make([]byte, 300), ToDevice) // moves the cursor off a page boundary
	require.NoError(t, err)
	c, err := m.AllocCoherent(100)
	require.NoError(t, err)
	require.EqualValues(t, PageSize, c.Addr(), "granule 0 is never used: the first page-aligned run is page 1")
	_, err = m.AllocCoherent(1)
	require.ErrorIs(t, err, ErrMapping, "no second page-aligned run")
	b, err := m.MapSingle(make([]byte, 10), ToDevice) // an unaligned mapping still fits
	require.NoError(t, err)
	require.NoError(t, m.FreeCoherent(c))
	require.NoError(t, m.UnmapSingle(a, 300, ToDevice))
	require.NoError(t, m.UnmapSingle(b, 10, ToDevice))

	m, err = NewIOMMU(IOMMUConfig{PageSize: 256})
	require.NoError(t, err)
	for _, align := range []int{512, PageSize} {
		_, err = m.MapSingle(make([]byte, 1), ToDevice)
		require.NoError(t, err)
		p, err := NewPool(m, "aligned", 100, align)
		require.NoError(t, err)
		for range 2*PageSize/align + 1 { // into a second chunk
			blk, err := p.Alloc()
			require.NoError(t, err)
			require.Zero(t, uint64(blk.Addr)%uint64(align), "bus address %#x aligned to %d", blk.Addr, align)
			require.Zero(t, sliceAddr(blk.Bytes)%uintptr(align))
		}
	}
}

func TestIOMMUNoReuseAfterUnmap(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	buf := pattern(64, 1)
	a, err := m.MapSingle(buf, ToDevice)
	require.NoError(t, err)
	require.NoError(t, m.UnmapSingle(a, 64, ToDevice))
	b, err := m.MapSingle(buf, ToDevice)
	require.NoError(t, err)
	require.NotEqual(t, a>>12, b>>12, "a freed IOVA is not handed out again at once")
	_, err = m.Translate(a, 64, ToDevice)
	requireFault(t, err, a, ReasonNotMapped)
	require.NoError(t, m.UnmapSingle(b, 64, ToDevice))
}

func TestIOMMUExhaustion(t *testing.T) {
	// 16 granules of 4 KiB; granule 0 is never used, so 15 one-page mappings fit.
	m, err := NewIOMMU(IOMMUConfig{IOVABits: 16})
	require.NoError(t, err)
	r := newRegion(t, 16)
	var addrs []Addr
	for i := range 15 {
		p, _ := r.Page(i)
		a, err := m.MapPage(p, 0, PageSize, ToDevice)
		require.NoError(t, err, "map %d", i)
		addrs = append(addrs, a)
	}
	p15, _ := r.Page(15)
	_, err = m.MapPage(p15, 0, 1, ToDevice)
	require.ErrorIs(t, err, ErrMapping)
	_, err = m.MapSingle(make([]byte, 1), ToDevice)
	require.ErrorIs(t, err, ErrMapping)
	_, err = m.AllocCoherent(1)
	require.ErrorIs(t, err, ErrMapping)
	_, err = m.MapSG([]SG{{Buf: make([]byte, 1)}}, ToDevice)
	require.ErrorIs(t, err, ErrMapping)
	require.Equal(t, 15, m.LiveCount(), "failed maps leave nothing behind")

	// Free two non-adjacent granules: a two-granule mapping still does not fit; one-granule ones do.
	require.NoError(t, m.UnmapPage(addrs[3], PageSize, ToDevice))
	require.NoError(t, m.UnmapPage(addrs[9], PageSize, ToDevice))
	_, err = m.MapSingle(r.Bytes()[PageSize:3*PageSize], ToDevice)
	require.ErrorIs(t, err, ErrMapping)
	a, err := m.MapPage(p15, 0, PageSize, ToDevice)
	require.NoError(t, err)
	require.Contains(t, []Addr{addrs[3], addrs[9]}, a)
	for _, l := range m.Live() {
		require.NoError(t, m.UnmapPage(l.Addr, l.Size, l.Dir))
	}
	// The whole space but granule 0 in one mapping.
	big := make([]byte, 15*PageSize)
	_, err = m.MapSingle(big, ToDevice) // a heap buffer may straddle 16 granules
	if err == nil {
		require.NoError(t, m.UnmapSingle(m.Live()[0].Addr, len(big), ToDevice))
	}
	a, err = m.MapSingle(r.Bytes()[:15*PageSize], ToDevice)
	require.NoError(t, err)
	require.EqualValues(t, PageSize, a)
	require.NoError(t, m.UnmapSingle(a, 15*PageSize, ToDevice))
	_, err = m.MapSingle(r.Bytes(), ToDevice)
	require.ErrorIs(t, err, ErrMapping, "larger than the space")
	require.Zero(t, m.LiveCount())
}

func TestIOMMUFailNth(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{FailNth: 3})
	require.NoError(t, err)
	var errs []bool
	for range 6 {
		a, err := m.MapSingle(make([]byte, 8), ToDevice)
		errs = append(errs, err != nil)
		if err != nil {
			require.ErrorIs(t, err, ErrMapping)
		} else {
			require.NoError(t, m.UnmapSingle(a, 8, ToDevice))
		}
	}
	require.Equal(t, []bool{false, false, true, false, false, false}, errs)
	require.EqualValues(t, 1, m.Injected())
}

func TestIOMMUFailFraction(t *testing.T) {
	run := func(seed int64) []bool {
		m, err := NewIOMMU(IOMMUConfig{FailFraction: 0.25, Seed: seed})
		require.NoError(t, err)
		var out []bool
		for range 400 {
			c, err := m.AllocCoherent(1)
			out = append(out, err != nil)
			if err == nil {
				require.NoError(t, m.FreeCoherent(c))
			} else {
				require.ErrorIs(t, err, ErrMapping)
			}
		}
		require.Zero(t, m.LiveCount())
		return out
	}
	a, b, c := run(1), run(1), run(2)
	require.Equal(t, a, b, "same seed, same failures")
	require.NotEqual(t, a, c)
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	require.InDelta(t, 100, n, 40)
}

func TestLeakReport(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		r := newRegion(t, 1)
		p, _ := r.Page(0)
		buf := make([]byte, 3*PageSize)
		a1, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		a2, err := m.MapPage(p, 16, 32, FromDevice)
		require.NoError(t, err)
		c, err := m.AllocCoherent(4)
		require.NoError(t, err)
		sg := []SG{{Buf: make([]byte, 7)}}
		_, err = m.MapSG(sg, Bidirectional)
		require.NoError(t, err)
		want := []Mapping{
			{a1, 3 * PageSize, ToDevice, KindSingle},
			{a2, 32, FromDevice, KindPage},
			{c.Addr(), 4, Bidirectional, KindCoherent},
			{sg[0].Addr, 7, Bidirectional, KindSG},
		}
		require.ElementsMatch(t, want, m.Live())
		require.Equal(t, 4, m.LiveCount())
		live := m.Live()
		for i := 1; i < len(live); i++ {
			require.Less(t, live[i-1].Addr, live[i].Addr, "sorted")
		}
		require.Contains(t, want[1].String(), "page [0x")
		require.NoError(t, m.UnmapSingle(a1, 3*PageSize, ToDevice))
		require.NoError(t, m.UnmapPage(a2, 32, FromDevice))
		require.NoError(t, m.FreeCoherent(c))
		require.NoError(t, m.UnmapSG(sg, Bidirectional))
		require.Empty(t, m.Live())
	})
}

func TestRegion(t *testing.T) {
	_, err := AllocPages(0)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = AllocPages(-1)
	require.ErrorIs(t, err, ErrInvalid)

	r, err := AllocPages(3)
	require.NoError(t, err)
	require.Equal(t, 3, r.NumPages())
	require.Len(t, r.Bytes(), 3*PageSize)
	require.Zero(t, sliceAddr(r.Bytes())%PageSize)
	require.Equal(t, make([]byte, 3*PageSize), r.Bytes())
	p, err := r.Page(1)
	require.NoError(t, err)
	require.True(t, p.Valid())
	require.Equal(t, 1, p.Index())
	require.Same(t, r, p.Region())
	require.Len(t, p.Bytes(), PageSize)
	require.Equal(t, PageSize, cap(p.Bytes()))
	require.Same(t, &r.Bytes()[PageSize], &p.Bytes()[0])
	require.False(t, Page{}.Valid())
	require.Nil(t, Page{}.Bytes())

	require.NoError(t, r.Close())
	require.True(t, r.Closed())
	require.ErrorIs(t, r.Close(), ErrClosed)
	require.False(t, p.Valid())
	require.Nil(t, p.Bytes())
	require.Nil(t, r.Bytes())
	_, err = r.Page(0)
	require.ErrorIs(t, err, ErrClosed)
	impls(t, func(t *testing.T, m testMapper) {
		_, err := m.MapPage(p, 0, 1, ToDevice)
		require.ErrorIs(t, err, ErrClosed)
		require.Zero(t, m.LiveCount())
	})
}

// TestRegionCloseWhileMapped: closing a region a device can still read is reported, and the memory
// stays until the last unmap, so the device side never touches released memory.
func TestRegionCloseWhileMapped(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		r, err := AllocPages(2)
		require.NoError(t, err)
		b := r.Bytes()
		copy(b, pattern(2*PageSize, 4))
		p, _ := r.Page(1)
		a1, err := m.MapPage(p, 0, 64, ToDevice)
		require.NoError(t, err)
		a2, err := m.MapSingle(b[10:20], ToDevice) // region memory through MapSingle pins too
		require.NoError(t, err)
		err = r.Close()
		require.ErrorIs(t, err, ErrBusy)
		require.Contains(t, err.Error(), "2 live mappings")
		got, err := m.Translate(a1, 64, ToDevice)
		require.NoError(t, err, "still readable by the device")
		require.Equal(t, pattern(2*PageSize, 4)[PageSize:PageSize+64], got)
		_, err = m.MapSingle(b[:8], ToDevice)
		require.ErrorIs(t, err, ErrClosed, "no new mappings of a closed region")
		_, err = m.MapPage(p, 0, 8, ToDevice)
		require.ErrorIs(t, err, ErrClosed)
		require.NoError(t, m.UnmapPage(a1, 64, ToDevice))
		require.NotNil(t, regionOf(sliceAddr(b)))
		require.NoError(t, m.UnmapSingle(a2, 10, ToDevice)) // the last pin: released here
		require.Nil(t, regionOf(sliceAddr(b)))
		_, err = m.Translate(a1, 64, ToDevice)
		require.ErrorIs(t, err, ErrFault)
	})
}

func TestPool(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		p, err := NewPool(m, "hdr", 40, 64)
		require.NoError(t, err)
		var blocks []Block
		seen := map[Addr]bool{}
		for i := range 150 { // more than one chunk (64 blocks per page)
			b, err := p.Alloc()
			require.NoError(t, err)
			require.Len(t, b.Bytes, 40)
			require.Equal(t, 40, cap(b.Bytes))
			require.Zero(t, uint64(b.Addr)%64, "bus address aligned")
			require.Zero(t, sliceAddr(b.Bytes)%64, "CPU address aligned")
			require.False(t, seen[b.Addr])
			seen[b.Addr] = true
			copy(b.Bytes, pattern(40, byte(i)))
			blocks = append(blocks, b)
		}
		require.Equal(t, 150, p.InUse())
		require.Equal(t, 3, m.LiveCount(), "three coherent chunks")
		for i, b := range blocks {
			got, err := m.Translate(b.Addr, 40, ToDevice)
			require.NoError(t, err)
			require.Equal(t, pattern(40, byte(i)), got)
		}
		require.NoError(t, p.Free(blocks[0]))
		require.ErrorIs(t, p.Free(blocks[0]), ErrNotOwned, "double free")
		b, err := p.Alloc()
		require.NoError(t, err)
		require.Equal(t, blocks[0].Addr, b.Addr, "LIFO reuse")
		blocks[0] = b

		other, err := NewPool(m, "other", 40, 64)
		require.NoError(t, err)
		ob, err := other.Alloc()
		require.NoError(t, err)
		require.ErrorIs(t, p.Free(ob), ErrNotOwned, "foreign block")
		require.ErrorIs(t, p.Free(Block{}), ErrNotOwned)
		forged := blocks[1]
		forged.Addr++
		require.ErrorIs(t, p.Free(forged), ErrNotOwned)
		require.NoError(t, other.Free(ob))
		require.NoError(t, other.Destroy())

		// Destroy with blocks out: reported; their chunks stay mapped until freed.
		for _, b := range blocks[:140] {
			require.NoError(t, p.Free(b))
		}
		err = p.Destroy()
		require.ErrorIs(t, err, ErrBusy)
		require.Contains(t, err.Error(), "10 blocks")
		require.ErrorIs(t, p.Destroy(), ErrClosed)
		_, err = p.Alloc()
		require.ErrorIs(t, err, ErrClosed)
		require.Equal(t, 1, m.LiveCount(), "only the busy chunk is still mapped")
		_, err = m.Translate(blocks[149].Addr, 40, ToDevice)
		require.NoError(t, err)
		for _, b := range blocks[140:] {
			require.NoError(t, p.Free(b))
		}
		require.Zero(t, p.InUse())
		require.Zero(t, m.LiveCount())
	})
}

func TestPoolInvalid(t *testing.T) {
	m := NewDirect()
	for _, c := range []struct{ size, align int }{{0, 8}, {-1, 8}, {8, 3}, {8, -8}, {1<<30 + 1, 8}} {
		_, err := NewPool(m, "x", c.size, c.align)
		require.ErrorIs(t, err, ErrInvalid, "%+v", c)
	}
	if big := uint64(1) << 31; big <= uint64(^uint(0)>>1) { // an align beyond 1 GiB, where an int holds it
		_, err := NewPool(m, "x", 8, int(big))
		require.ErrorIs(t, err, ErrInvalid)
	}
	_, err := NewPool(nil, "x", 8, 8)
	require.ErrorIs(t, err, ErrInvalid)
	p, err := NewPool(m, "big", 3*PageSize, 0) // blocks bigger than a page: one per chunk
	require.NoError(t, err)
	b, err := p.Alloc()
	require.NoError(t, err)
	require.Len(t, b.Bytes, 3*PageSize)
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Destroy())
	require.Zero(t, m.LiveCount())

	fi := NewFaultInjector(m)
	fi.FailAll(true)
	p, err = NewPool(fi, "fail", 8, 8)
	require.NoError(t, err)
	_, err = p.Alloc()
	require.ErrorIs(t, err, ErrMapping)
	require.NoError(t, p.Destroy())
}

func TestPoolConcurrent(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	p, err := NewPool(m, "c", 24, 8)
	require.NoError(t, err)
	iters := 2000
	if testing.Short() {
		iters = 300
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			var mine []Block
			for i := range iters {
				b, err := p.Alloc()
				if !assert.NoError(t, err) {
					return
				}
				b.Bytes[0], b.Bytes[23] = byte(w), byte(i)
				mine = append(mine, b)
				if len(mine) > 8 {
					x := mine[0]
					mine = mine[1:]
					got, err := m.Translate(x.Addr, 24, ToDevice)
					assert.NoError(t, err)
					assert.Equal(t, byte(w), got[0])
					assert.NoError(t, p.Free(x))
				}
			}
			for _, x := range mine {
				assert.NoError(t, p.Free(x))
			}
		})
	}
	wg.Wait()
	require.Zero(t, p.InUse())
	require.NoError(t, p.Destroy())
	require.Zero(t, m.LiveCount())
}

func TestCounting(t *testing.T) {
	impls(t, func(t *testing.T, inner testMapper) {
		m := NewCounting(inner)
		require.Same(t, Mapper(inner), m.Unwrap())
		buf := make([]byte, 32)
		a, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		_, err = m.Translate(a, 32, ToDevice)
		require.NoError(t, err)
		_, err = m.Translate(a, 33, ToDevice)
		require.ErrorIs(t, err, ErrFault)
		require.NoError(t, m.SyncForCPU(a, 32, ToDevice))
		require.NoError(t, m.SyncForDevice(a, 32, ToDevice))
		require.NoError(t, m.UnmapSingle(a, 32, ToDevice))
		require.ErrorIs(t, m.UnmapSingle(a, 32, ToDevice), ErrNotMapped)
		r := newRegion(t, 1)
		pg, _ := r.Page(0)
		a, err = m.MapPage(pg, 0, 8, ToDevice)
		require.NoError(t, err)
		require.NoError(t, m.UnmapPage(a, 8, ToDevice))
		sg := []SG{{Buf: buf}}
		_, err = m.MapSG(sg, ToDevice)
		require.NoError(t, err)
		require.NoError(t, m.UnmapSG(sg, ToDevice))
		c, err := m.AllocCoherent(4)
		require.NoError(t, err)
		require.NoError(t, m.FreeCoherent(c))
		require.Equal(t, Counts{
			MapSingle: 1, UnmapSingle: 2, MapPage: 1, UnmapPage: 1, MapSG: 1, UnmapSG: 1,
			SyncForCPU: 1, SyncForDevice: 1, AllocCoherent: 1, FreeCoherent: 1, Translate: 2, Errors: 2,
		}, m.Counts())
		require.EqualValues(t, 1, m.Faults())
		require.Zero(t, inner.LiveCount())
	})
}

func TestFaultInjector(t *testing.T) {
	impls(t, func(t *testing.T, inner testMapper) {
		m := NewFaultInjector(inner)
		require.Same(t, Mapper(inner), m.Unwrap())
		r := newRegion(t, 1)
		pg, _ := r.Page(0)
		buf := make([]byte, 16)
		ops := []func() error{
			func() error { _, err := m.MapSingle(buf, ToDevice); return err },
			func() error { _, err := m.MapPage(pg, 0, 16, ToDevice); return err },
			func() error { _, err := m.MapSG([]SG{{Buf: buf}}, ToDevice); return err },
			func() error { _, err := m.AllocCoherent(16); return err },
		}
		m.FailAll(true)
		for _, op := range ops {
			require.ErrorIs(t, op(), ErrMapping)
		}
		m.FailAll(false)
		require.EqualValues(t, 4, m.Injected())
		require.Zero(t, inner.LiveCount())

		m.FailNth(2)
		a, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		_, err = m.MapSingle(buf, ToDevice)
		require.ErrorIs(t, err, ErrMapping)
		b, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		require.NoError(t, m.UnmapSingle(a, 16, ToDevice))
		require.NoError(t, m.UnmapSingle(b, 16, ToDevice))

		m.FailFraction(0.5, 7)
		fails := 0
		for range 200 {
			a, err := m.MapSingle(buf, ToDevice)
			if err != nil {
				fails++
				continue
			}
			require.NoError(t, m.SyncForDevice(a, 16, ToDevice))
			require.NoError(t, m.SyncForCPU(a, 16, ToDevice))
			require.NoError(t, m.UnmapSingle(a, 16, ToDevice))
		}
		require.InDelta(t, 100, fails, 35)
		m.FailFraction(0, 0)

		a, err = m.MapPage(pg, 0, 16, ToDevice)
		require.NoError(t, err)
		m.FailTranslate(true)
		_, err = m.Translate(a, 16, ToDevice)
		requireFault(t, err, a, ReasonInjected)
		m.FailTranslate(false)
		_, err = m.Translate(a, 16, ToDevice)
		require.NoError(t, err)
		_, err = m.Translate(a, 17, ToDevice)
		require.ErrorIs(t, err, ErrFault)
		require.EqualValues(t, 2, m.Faults(), "own and the wrapped mapper's")
		require.NoError(t, m.UnmapPage(a, 16, ToDevice))
		c, err := m.AllocCoherent(8)
		require.NoError(t, err)
		require.NoError(t, m.FreeCoherent(c))
		sg := []SG{{Buf: buf}}
		_, err = m.MapSG(sg, ToDevice)
		require.NoError(t, err)
		require.NoError(t, m.UnmapSG(sg, ToDevice))
		require.Zero(t, inner.LiveCount())
	})
}

// published is a mapping one worker made, visible to the checker goroutine. buf keeps the memory
// reachable (so Direct addresses are never reused while a stale entry can be read) and is never
// written after mapping, so the checker may read it without synchronisation beyond the mutex.
type published struct {
	addr Addr
	buf  []byte
	dir  Direction
}

// TestConcurrent runs mappers and unmappers against a checker that translates other workers'
// mappings. Every successful translation must return exactly the bytes mapped; a fault is
// acceptable only when the mapping may have been undone in between.
func TestConcurrent(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		workers, iters := 4, 3000
		if testing.Short() {
			workers, iters = 3, 400
		}
		var (
			mu    sync.Mutex
			slots = make([]published, workers)
			stop  = make(chan struct{})
			wg    sync.WaitGroup
			check sync.WaitGroup
		)
		r := newRegion(t, workers)
		check.Go(func() { // the checker: reads whatever is published, verifies bytes
			rng := rand.New(rand.NewPCG(1, 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				p := slots[rng.IntN(workers)]
				mu.Unlock()
				if p.buf == nil {
					continue
				}
				off := rng.IntN(len(p.buf))
				n := 1 + rng.IntN(len(p.buf)-off)
				got, err := m.Translate(p.addr+Addr(off), n, ToDevice)
				if err != nil {
					assert.ErrorIs(t, err, ErrFault)
					continue
				}
				assert.True(t, bytes.Equal(p.buf[off:off+n], got), "bytes behind %#x", p.addr)
			}
		})
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 99))
				pg, _ := r.Page(w)
				for i := range iters {
					n := 1 + rng.IntN(3*PageSize)
					buf := pattern(n, byte(w*31+i))
					dir := []Direction{ToDevice, Bidirectional}[rng.IntN(2)]
					a, err := m.MapSingle(buf, dir)
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					slots[w] = published{a, buf, dir}
					mu.Unlock()

					// A page mapping only this worker touches: the device writes, the CPU checks.
					off := rng.IntN(PageSize)
					pn := 1 + rng.IntN(PageSize-off)
					pa, err := m.MapPage(pg, off, pn, FromDevice)
					if !assert.NoError(t, err) {
						return
					}
					dev, err := m.Translate(pa, pn, FromDevice)
					if !assert.NoError(t, err) {
						return
					}
					copy(dev, buf[:min(n, pn)])
					assert.Equal(t, buf[:min(n, pn)], pg.Bytes()[off:off+min(n, pn)])
					assert.NoError(t, m.UnmapPage(pa, pn, FromDevice))

					got, err := m.Translate(a, n, ToDevice)
					assert.NoError(t, err)
					assert.True(t, bytes.Equal(buf, got))
					if rng.IntN(2) == 0 {
						mu.Lock()
						slots[w] = published{} // sometimes unpublish before unmapping
						mu.Unlock()
					}
					assert.NoError(t, m.UnmapSingle(a, n, dir))
					if _, ok := m.(*IOMMU); ok { // IOVAs are not reused at once: the old one faults
						_, err = m.Translate(a, n, ToDevice)
						assert.ErrorIs(t, err, ErrFault)
					}
				}
			})
		}
		wg.Wait()
		close(stop)
		check.Wait()
		require.Zero(t, m.LiveCount())
		require.Empty(t, m.Live())
	})
}

func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	impls(t, func(t *testing.T, m testMapper) {
		buf := make([]byte, 1500)
		r := newRegion(t, 1)
		pg, _ := r.Page(0)
		a, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			if _, err := m.Translate(a+10, 1000, ToDevice); err != nil {
				panic(err)
			}
		}), "Translate")
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			if err := m.SyncForDevice(a, 1500, ToDevice); err != nil {
				panic(err)
			}
		}), "Sync")
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			x, err := m.MapSingle(buf, ToDevice)
			if err != nil {
				panic(err)
			}
			if err := m.UnmapSingle(x, len(buf), ToDevice); err != nil {
				panic(err)
			}
		}), "MapSingle+UnmapSingle")
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			x, err := m.MapPage(pg, 100, 2000, ToDevice)
			if err != nil {
				panic(err)
			}
			if err := m.UnmapPage(x, 2000, ToDevice); err != nil {
				panic(err)
			}
		}), "MapPage+UnmapPage")
		sg := []SG{{Buf: buf[:100]}, {Buf: buf[200:]}, {Buf: pg.Bytes()[8:64]}}
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			if _, err := m.MapSG(sg, ToDevice); err != nil {
				panic(err)
			}
			if err := m.UnmapSG(sg, ToDevice); err != nil {
				panic(err)
			}
		}), "MapSG+UnmapSG")
		// Interposed mappers stay off the heap too: the wrappers add no allocation.
		wrapped := NewCounting(NewFaultInjector(m))
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			x, err := wrapped.MapSingle(buf, ToDevice)
			if err != nil {
				panic(err)
			}
			if _, err := wrapped.Translate(x+1, 100, ToDevice); err != nil {
				panic(err)
			}
			if err := wrapped.UnmapSingle(x, len(buf), ToDevice); err != nil {
				panic(err)
			}
		}), "Counting(FaultInjector(m)) map+translate+unmap")
		p, err := NewPool(m, "a", 64, 64)
		require.NoError(t, err)
		require.Zero(t, testing.AllocsPerRun(1000, func() {
			b, err := p.Alloc()
			if err != nil {
				panic(err)
			}
			if err := p.Free(b); err != nil {
				panic(err)
			}
		}), "Pool")
		require.NoError(t, p.Destroy())
		require.NoError(t, m.UnmapSingle(a, len(buf), ToDevice))
	})
}

func TestFaultError(t *testing.T) {
	f := &Fault{Addr: 0x1000, Size: 8, Access: FromDevice, Reason: ReasonDirection}
	require.Equal(t, "dma: device fault: from-device access [0x1000,+8): wrong direction", f.Error())
	require.ErrorIs(t, fmt.Errorf("wrapped: %w", f), ErrFault)
	require.False(t, errors.Is(f, ErrMapping))
}

// TestFaultInjectorFailFractionOutOfRange: a fraction outside 0..1 (or NaN) is ErrInvalid and
// changes nothing, where it used to be clamped silently (1.5 failed every call).
func TestFaultInjectorFailFractionOutOfRange(t *testing.T) {
	fi := NewFaultInjector(NewDirect())
	buf := make([]byte, 16)
	for _, bad := range []float64{1.5, -0.1, math.NaN(), math.Inf(1)} {
		err := fi.FailFraction(bad, 1)
		require.ErrorIs(t, err, ErrInvalid, "%v", bad)
		assert.Contains(t, err.Error(), "0..1")
		a, err := fi.MapSingle(buf, ToDevice)
		require.NoError(t, err, "FailFraction(%v) armed nothing", bad)
		require.NoError(t, fi.UnmapSingle(a, 16, ToDevice))
	}
	require.NoError(t, fi.FailFraction(1, 1))
	_, err := fi.MapSingle(buf, ToDevice)
	require.ErrorIs(t, err, ErrMapping)
	require.NoError(t, fi.FailFraction(0, 0), "0 disarms")
}
