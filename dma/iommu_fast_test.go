package dma

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/pcpu"
)

// magNext returns the next granule of P id's magazine.
func magNext(m *IOMMU, id int) uint64 { return m.mags[id].next.Load() }

// TestIOMMUFastMap: the IOMMU's MapSingleSole takes a warm P's magazine granules and fills the
// own entry of the first (iommu_fast.go): the bus address is the next granule with the CPU
// offset, the handle names that entry, the magazine moves by the granules touched; Translate
// answers the range and faults on the wrong direction, a longer range, an address before the
// mapping's start, above the IOVA space and after the unmap; UnmapSingleSole with a wrong length,
// direction or address changes nothing, with the handle undoes it once. Up to magMax granules
// at any offset; longer buffers take the general path. One P, so that the P is the magazine's.
func TestIOMMUFastMap(t *testing.T) {
	if !pcpu.Enabled {
		t.Skip("purego: no per-P magazines")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	require.True(t, m.tab.owned)
	backing := make([]byte, 8*PageSize)
	warm := backing[:1]
	a, h, err := m.MapSingleSole(warm, ToDevice) // the P's first map: a refill
	require.NoError(t, err)
	require.NoError(t, m.UnmapSingleSole(a, 1, ToDevice, h))
	first := int((sliceAddr(backing)+PageSize-1)&^(PageSize-1) - sliceAddr(backing)) // backing's first page boundary
	for _, c := range []struct{ off, n int }{
		{0, 1}, {100, 40}, {40, 256}, {4000, 200}, {0, PageSize}, {17, 3*PageSize + 17}, {0, 5 * PageSize}, {1, 5*PageSize - 1},
	} {
		buf := backing[first+PageSize+c.off:][:c.n]
		copy(buf, pattern(c.n, byte(c.off)))
		k := (uint64(sliceAddr(buf))&(PageSize-1)+uint64(c.n)-1)>>directShift + 1
		for magNext(m, 0)+k > m.mags[0].end.Load() { // a refill would take the map
			a, h, err := m.MapSingleSole(warm, ToDevice)
			require.NoError(t, err)
			require.NoError(t, m.UnmapSingleSole(a, 1, ToDevice, h))
		}
		next := magNext(m, 0)
		a, h, err := m.MapSingleSole(buf, ToDevice)
		require.NoError(t, err)
		require.Equal(t, Addr(next<<directShift|uint64(sliceAddr(buf))&(PageSize-1)), a, "%+v: the magazine's next granule", c)
		require.Equal(t, next+k, magNext(m, 0), "%+v: the magazine moved by the granules touched", c)
		require.Equal(t, Sole(next&m.tab.setMask+1), h&(1<<soleBits-1), "%+v: the handle names the own entry", c)
		got, err := m.Translate(a, c.n, ToDevice)
		require.NoError(t, err)
		require.Same(t, &buf[0], &got[0])
		require.Equal(t, c.n, cap(got))
		if c.n > 1 {
			got, err = m.Translate(a+1, c.n-1, ToDevice)
			require.NoError(t, err)
			require.Same(t, &buf[1], &got[0])
		}
		_, err = m.Translate(a, c.n, FromDevice)
		requireFault(t, err, a, ReasonDirection)
		_, err = m.Translate(a, c.n+1, ToDevice)
		requireFault(t, err, a, ReasonPartlyMapped)
		if a&(PageSize-1) != 0 {
			_, err = m.Translate(a-1, 1, ToDevice)
			requireFault(t, err, a-1, ReasonNotMapped)
		}
		require.ErrorIs(t, m.UnmapSingleSole(a, c.n+1, ToDevice, h), ErrNotMapped)
		require.ErrorIs(t, m.UnmapSingleSole(a, c.n, FromDevice, h), ErrNotMapped)
		require.ErrorIs(t, m.UnmapSingleSole(a+PageSize, c.n, ToDevice, h), ErrNotMapped)
		require.Equal(t, 1, m.LiveCount(), "a refused unmap undid the mapping")
		require.NoError(t, m.UnmapSingleSole(a, c.n, ToDevice, h))
		_, err = m.Translate(a, c.n, ToDevice)
		requireFault(t, err, a, ReasonNotMapped)
		require.ErrorIs(t, m.UnmapSingleSole(a, c.n, ToDevice, h), ErrNotMapped, "a double unmap")
	}
	// More than magMax granules: the general path (the cursor), the magazine untouched.
	next := magNext(m, 0)
	long := backing[first+1 : first+1+5*PageSize] // six granules
	a, h, err = m.MapSingleSole(long, ToDevice)
	require.NoError(t, err)
	require.Equal(t, next, magNext(m, 0))
	got, err := m.Translate(a, len(long), ToDevice)
	require.NoError(t, err)
	require.Same(t, &long[0], &got[0])
	require.NoError(t, m.UnmapSingleSole(a, len(long), ToDevice, h))

	_, err = m.Translate(Addr(1)<<m.bits, 1, ToDevice)
	requireFault(t, err, Addr(1)<<m.bits, ReasonOutside)
	require.ErrorIs(t, m.UnmapSingleSole(Addr(next+1000)<<directShift, 40, ToDevice, Sole(1<<soleBits|1)), ErrNotMapped, "never mapped")
	requireTableEmpty(t, m)
}

// TestIOMMUFastMapFullSet: a mapping kept alive in its own entry sends the map of the granule
// that comes round to that entry (setMask+1 granules later) to the far entry, and one kept there
// too sends the next one to the general path (the page lists, handle 0); each is translated and
// unmapped as any other.
func TestIOMMUFastMapFullSet(t *testing.T) {
	if !pcpu.Enabled {
		t.Skip("purego: no per-P magazines")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	buf := make([]byte, 64)
	churn := make([]byte, 32)
	// goTo maps and unmaps churn until the magazine's next granule is g.
	goTo := func(g uint64) {
		for magNext(m, 0) != g {
			a, h, err := m.MapSingleSole(churn, ToDevice)
			require.NoError(t, err)
			require.NoError(t, m.UnmapSingleSole(a, len(churn), ToDevice, h))
			require.LessOrEqual(t, magNext(m, 0), g)
		}
	}
	a, h, err := m.MapSingleSole(churn, ToDevice) // warm: a refill
	require.NoError(t, err)
	require.NoError(t, m.UnmapSingleSole(a, len(churn), ToDevice, h))
	type kept struct {
		a Addr
		h Sole
	}
	var keep []kept
	g := magNext(m, 0)
	own := g & m.tab.setMask
	for i, want := range []Sole{Sole(own + 1), Sole(own ^ m.tab.setHalf + 1), 0} {
		goTo(g + uint64(i)*(m.tab.setMask+1))
		a, h, err := m.MapSingleSole(buf, ToDevice)
		require.NoError(t, err)
		require.Equal(t, want, h&(1<<soleBits-1), "map %d: own entry, far entry, page lists", i)
		keep = append(keep, kept{a, h})
	}
	for _, k := range keep {
		got, err := m.Translate(k.a, len(buf), ToDevice)
		require.NoError(t, err)
		require.Same(t, &buf[0], &got[0])
	}
	require.Equal(t, 3, m.LiveCount())
	for _, k := range keep {
		require.NoError(t, m.UnmapSingleSole(k.a, len(buf), ToDevice, k.h))
		_, err := m.Translate(k.a, len(buf), ToDevice)
		requireFault(t, err, k.a, ReasonNotMapped)
	}
	requireTableEmpty(t, m)
}

// TestIOMMUFastAllocs: the fast map, translation and sole unmap of a packet's two buffers
// allocate nothing.
func TestIOMMUFastAllocs(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	page := make([]byte, PageSize)
	hdr, payload := page[:40:40], page[40:296:296]
	n := testing.AllocsPerRun(1000, func() {
		for _, b := range [][]byte{hdr, payload} {
			a, h, err := m.MapSingleSole(b, ToDevice)
			if err != nil {
				panic(err)
			}
			if _, err := m.Translate(a, len(b), ToDevice); err != nil {
				panic(err)
			}
			if err := m.UnmapSingleSole(a, len(b), ToDevice, h); err != nil {
				panic(err)
			}
		}
	})
	require.Zero(t, n)
}

// TestIOMMUFastConcurrent: goroutines on every P map their own header and payload (sole, as the
// packet path does, plus a public map now and then), translate and unmap them. Every bus address
// handed out is distinct (the IOMMU never reuses an IOVA before its space wraps: each is seen
// exactly once), every translation returns the buffer's own bytes, a stale address faults at
// once after its unmap, and the table ends empty. Run under -race with -cpu=1,2,4.
func TestIOMMUFastConcurrent(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	const workers = 4
	iters := 20000
	if testing.Short() {
		iters = 3000
	}
	addrs := make([][]Addr, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			page := make([]byte, 2*PageSize)
			bufs := [][]byte{page[w*8 : w*8+40], page[100+w : 100+w+256+PageSize*(w%2)]}
			for i := range iters {
				for j, b := range bufs {
					b[0] = byte(i + j)
					var a Addr
					var h Sole
					var err error
					sole := i%16 != 0
					if a, h, err = mapTest(m, b, sole); !assert.NoError(t, err) {
						return
					}
					addrs[w] = append(addrs[w], a)
					got, err := m.Translate(a, len(b), ToDevice)
					if !assert.NoError(t, err) || !assert.Same(t, &b[0], &got[0]) || !assert.Equal(t, byte(i+j), got[0]) {
						return
					}
					if !assert.NoError(t, unmapTest(m, a, len(b), h, sole)) {
						return
					}
					if _, err := m.Translate(a, len(b), ToDevice); !assert.ErrorIs(t, err, ErrFault) {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	seen := make(map[Addr]int)
	for w, as := range addrs {
		for _, a := range as {
			if v, dup := seen[a]; dup {
				t.Fatalf("bus address %#x handed out to worker %d and to worker %d", uint64(a), v, w)
			}
			seen[a] = w
		}
	}
	require.Len(t, seen, workers*iters*2)
	require.Zero(t, m.LiveCount())
	requireTableEmpty(t, m)
}
