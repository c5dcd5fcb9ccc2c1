package dma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRegionOfSpan: the registry answers every address: a region's first and last byte are its
// own, Go heap memory (outside the regions' span, or in a gap between regions) has none, and a
// released region drops out of the snapshot and of its span.
func TestRegionOfSpan(t *testing.T) {
	var rs []*Region
	for range 3 {
		r, err := AllocPages(2)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	heap := make([]byte, 64)
	require.Nil(t, regionOf(sliceAddr(heap)))
	for _, r := range rs {
		require.Same(t, r, regionOf(r.base))
		require.Same(t, r, regionOf(r.base+uintptr(len(r.mem))-1))
		if next := regionOf(r.base + uintptr(len(r.mem))); next != nil {
			require.NotSame(t, r, next)
		}
	}
	// Released in the middle first: a gap inside the span.
	for _, i := range []int{1, 0, 2} {
		base := rs[i].base
		require.NoError(t, rs[i].Close())
		require.Nil(t, regionOf(base), "released")
		for j, r := range rs {
			if !r.Closed() {
				require.Same(t, r, regionOf(r.base), "region %d after releasing %d", j, i)
			}
		}
	}
	require.Nil(t, regionOf(sliceAddr(heap)))
}
