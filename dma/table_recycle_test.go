package dma

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTableKeepsFewEmptyLists: after every mapping of many distinct pages is undone, Direct keeps
// at most maxEmpty empty page lists per stripe in its map (for the pages' next mappings) and the
// IOMMU none; no list holds a record and every stripe counts zero live records.
func TestTableKeepsFewEmptyLists(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		var tab *table
		switch m := m.(type) {
		case *Direct:
			tab = &m.tab
		case *IOMMU:
			tab = &m.tab
		}
		const pages = 64 * maxEmpty * 4 // many more than the stripes may keep
		big := make([]byte, pages*PageSize)
		addrs := make([]Addr, pages)
		for i := range addrs {
			a, err := m.MapSingle(big[i*PageSize:i*PageSize+64], ToDevice)
			require.NoError(t, err)
			addrs[i] = a
		}
		require.Equal(t, pages, m.LiveCount())
		for _, a := range addrs {
			require.NoError(t, m.UnmapSingle(a, 64, ToDevice))
		}
		require.Zero(t, m.LiveCount())
		_, direct := m.(*Direct)
		for i := range tab.stripes {
			s := &tab.stripes[i]
			s.mu.Lock()
			kept := 0
			for _, pl := range s.m {
				require.Empty(t, pl.recs)
				kept++
			}
			require.Equal(t, kept, s.empty, "stripe %d: empty lists counted", i)
			require.Zero(t, s.live, "stripe %d", i)
			if direct {
				require.LessOrEqual(t, kept, maxEmpty, "stripe %d", i)
			} else {
				require.Zero(t, kept, "stripe %d", i)
			}
			s.mu.Unlock()
		}
		runtime.KeepAlive(big)
	})
}

// TestTableReusesKeptList: mapping a page again after its last unmap finds its kept list (no new
// map entry), and the list is counted empty only while it is.
func TestTableReusesKeptList(t *testing.T) {
	d := NewDirect()
	d.tab.spillOnly = true // the page lists, which the index (index.go) is in front of
	buf := make([]byte, 128)
	pg := uint64(sliceAddr(buf)) >> directShift
	s := d.tab.stripe(pg)
	for range 3 {
		a, err := d.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		require.Zero(t, s.empty)
		pl := s.m[pg]
		require.NotNil(t, pl)
		require.NoError(t, d.UnmapSingle(a, len(buf), ToDevice))
		require.Same(t, pl, s.m[pg], "the emptied list stays in the map")
		require.Equal(t, 1, s.empty)
		_, err = d.Translate(a, len(buf), ToDevice)
		require.ErrorIs(t, err, ErrFault, "an empty kept list maps nothing")
	}
}

// TestTableBurstReusesRecords: a burst of more single-page mappings on one stripe's page lists
// than maxFree (many packets in flight mapping the same page), all undone, then the same burst
// again: the second and later bursts reuse the first one's records and lists and allocate
// nothing (the free lists keep up to the stripe's peak; with maxFree alone each burst allocated
// its excess again, which TestReadmeSendAllocs saw as one or two allocations per 64 packets).
func TestTableBurstReusesRecords(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are asserted without the race detector")
	}
	d := NewDirect()
	d.tab.spillOnly = true // the page lists, which the index (index.go) is in front of
	buf := make([]byte, 128)
	const burst = 3 * maxFree
	addrs := make([]Addr, burst)
	round := func() {
		for i := range addrs {
			a, err := d.MapSingle(buf, ToDevice)
			if err != nil {
				t.Fatal(err)
			}
			addrs[i] = a
		}
		for _, a := range addrs {
			if err := d.UnmapSingle(a, len(buf), ToDevice); err != nil {
				t.Fatal(err)
			}
		}
	}
	round() // the first burst allocates its records
	s := d.tab.stripe(uint64(sliceAddr(buf)) >> directShift)
	s.mu.Lock()
	peak, kept := s.peak, len(s.recs)
	s.mu.Unlock()
	require.Equal(t, burst, peak, "the stripe's high-water mark of live records")
	require.Equal(t, burst, kept, "every record of the burst is kept for the next one")
	require.Zero(t, testing.AllocsPerRun(20, round), "a repeated burst allocates")
	require.Zero(t, d.LiveCount())
	runtime.KeepAlive(buf)
}
