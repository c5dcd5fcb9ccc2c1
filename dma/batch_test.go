package dma

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnmapBatch: a batch of single, page, sg and multi-page mappings, several on one page, is
// undone in one call; each address faults afterwards, pinned regions are released, and an entry
// that was not mapped is reported by its index while every other entry is still undone.
func TestUnmapBatch(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		reg := newRegion(t, 8)
		heap := pattern(3*PageSize, 1)
		var us []Unmap
		for i := range 6 { // six small buffers in one page: one stripe
			b := heap[i*64 : i*64+40]
			a, err := m.MapSingle(b, ToDevice)
			require.NoError(t, err)
			us = append(us, Unmap{Addr: a, Size: len(b), Dir: ToDevice, Kind: KindSingle})
		}
		a, err := m.MapSingle(heap[100:100+2*PageSize], ToDevice) // several pages
		require.NoError(t, err)
		us = append(us, Unmap{Addr: a, Size: 2 * PageSize, Dir: ToDevice, Kind: KindSingle})
		for i := range 3 {
			p, err := reg.Page(i)
			require.NoError(t, err)
			a, err := m.MapPage(p, 8, 100, ToDevice)
			require.NoError(t, err)
			us = append(us, Unmap{Addr: a, Size: 100, Dir: ToDevice, Kind: KindPage})
		}
		sg := []SG{{Buf: reg.Bytes()[5*PageSize : 5*PageSize+3*PageSize-1]}}
		_, err = m.MapSG(sg, Bidirectional)
		require.NoError(t, err)
		us = append(us, Unmap{Addr: sg[0].Addr, Size: sg[0].Len, Dir: Bidirectional, Kind: KindSG})
		require.Equal(t, len(us), m.LiveCount())

		want := append([]Unmap(nil), us...)
		bad := len(us) / 2
		us = append(us[:bad], append([]Unmap{{Addr: us[0].Addr, Size: 39, Dir: ToDevice, Kind: KindSingle}}, us[bad:]...)...)
		err = m.(BatchUnmapper).UnmapBatch(us)
		require.ErrorIs(t, err, ErrNotMapped)
		assert.Contains(t, err.Error(), "+39)", "names the entry that was not mapped")
		assert.Zero(t, m.LiveCount())
		for _, u := range want {
			_, err := m.Translate(u.Addr, 1, ToDevice)
			assert.ErrorIs(t, err, ErrFault, "%#x still reachable", uint64(u.Addr))
		}
		require.NoError(t, reg.Close(), "no pin left on the region")
		require.ErrorIs(t, m.(BatchUnmapper).UnmapBatch(want[:1]), ErrNotMapped, "a second unmap")
	})
}

// TestUnmapBatchLong: a batch longer than one chunk (maxBatch) is undone whole.
func TestUnmapBatchLong(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		buf := make([]byte, 3*maxBatch*16)
		var us []Unmap
		for i := 0; i < len(buf); i += 16 {
			a, err := m.MapSingle(buf[i:i+16], ToDevice)
			require.NoError(t, err)
			us = append(us, Unmap{Addr: a, Size: 16, Dir: ToDevice, Kind: KindSingle})
		}
		require.NoError(t, m.(BatchUnmapper).UnmapBatch(us))
		assert.Zero(t, m.LiveCount())
	})
}

// TestUnmapAllWrappers: UnmapAll goes through the wrappers, which count every entry as its own
// unmap call, and through a mapper that has no batch call.
func TestUnmapAllWrappers(t *testing.T) {
	d := NewDirect()
	c := NewCounting(d)
	buf := make([]byte, 256)
	var us []Unmap
	for i := range 4 {
		a, err := c.MapSingle(buf[i*64:i*64+64], ToDevice)
		require.NoError(t, err)
		us = append(us, Unmap{Addr: a, Size: 64, Dir: ToDevice, Kind: KindSingle})
	}
	require.NoError(t, UnmapAll(NewFaultInjector(c), us))
	assert.Equal(t, 4, c.Counts().UnmapSingle)
	assert.Zero(t, d.LiveCount())

	a, err := d.MapSingle(buf, ToDevice)
	require.NoError(t, err)
	require.NoError(t, UnmapAll(noBatch{d}, []Unmap{{Addr: a, Size: len(buf), Dir: ToDevice, Kind: KindSingle}}))
	assert.Zero(t, d.LiveCount())
	assert.ErrorIs(t, UnmapAll(noBatch{d}, []Unmap{{Addr: a, Size: len(buf), Dir: ToDevice, Kind: KindSingle}}), ErrNotMapped)
}

// noBatch hides a mapper's UnmapBatch.
type noBatch struct{ Mapper }

// TestUnmapBatchConcurrent: goroutines map buffers on shared pages and undo them in batches while
// others translate; every mapping is undone exactly once and nothing stays live.
func TestUnmapBatchConcurrent(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		const workers, per = 4, 16
		iters := 300
		if testing.Short() {
			iters = 60
		}
		bufs := make([]byte, workers*per*48) // the workers' buffers interleave on the same pages
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				us := make([]Unmap, 0, per)
				for range iters {
					us = us[:0]
					for k := range per {
						off := (k*workers + w) * 48
						a, err := m.MapSingle(bufs[off:off+48], ToDevice)
						if !assert.NoError(t, err) {
							return
						}
						us = append(us, Unmap{Addr: a, Size: 48, Dir: ToDevice, Kind: KindSingle})
					}
					for k, u := range us { // each translates to its own buffer
						b, err := m.Translate(u.Addr, u.Size, ToDevice)
						if assert.NoError(t, err) {
							assert.Equal(t, sliceAddr(bufs[(k*workers+w)*48:]), sliceAddr(b))
						}
					}
					if !assert.NoError(t, m.(BatchUnmapper).UnmapBatch(us)) {
						return
					}
				}
			})
		}
		wg.Wait()
		assert.Zero(t, m.LiveCount())
	})
}
