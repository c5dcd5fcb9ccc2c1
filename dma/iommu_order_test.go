package dma

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// entryOf returns the index position of the live index entry mapping exactly addr, or -1.
func entryOf(tab *table, addr Addr) int {
	for i := range tab.ents {
		e := &tab.ents[i]
		if e.meta.Load()&metaState == metaLive && Addr(e.addr.Load()) == addr {
			return i
		}
	}
	return -1
}

// iommuInUse is the number of index entries the IOMMU's granule-order sets use (set).
func iommuInUse(tab *table) uint64 { return nStripes << (tab.setBits + 1) }

// TestIOMMUIndexGranuleOrder: the IOMMU's index is in granule order (index.go): with nothing else
// live, the mapping of granule g is in entry g (modulo the entries in use), so a run of fresh
// granules fills consecutive entries, two per cache line. Unmapping keeps the fresh-IOVA promise:
// the old addresses fault, and the next maps get granules never handed out before.
func TestIOMMUIndexGranuleOrder(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	tab := &m.tab
	require.Zero(t, uintptr(unsafePointer(&tab.ents[0]))%64, "the index starts on a cache line: entries 2k and 2k+1 share one")
	const n = 40
	backing := make([]byte, n*PageSize)
	var addrs []Addr
	seen := map[uint64]bool{}
	for i := range n {
		b := backing[i*PageSize+64 : i*PageSize+64+300]
		b[0] = byte(i + 1)
		a, err := m.MapSingle(b, ToDevice)
		require.NoError(t, err)
		g := uint64(a) >> m.shift
		require.False(t, seen[g], "granule %d handed out twice", g)
		seen[g] = true
		require.Equal(t, int(g%iommuInUse(tab)), entryOf(tab, a), "granule %d's mapping is not in its own entry", g)
		addrs = append(addrs, a)
	}
	for i, a := range addrs {
		got, err := m.Translate(a, 300, ToDevice)
		require.NoError(t, err)
		require.Equal(t, byte(i+1), got[0])
		require.NoError(t, m.UnmapSingle(a, 300, ToDevice))
	}
	for _, a := range addrs {
		_, err := m.Translate(a, 300, ToDevice)
		requireFault(t, err, a, ReasonNotMapped)
	}
	for i := range n {
		b := backing[i*PageSize : i*PageSize+100]
		a, err := m.MapSingle(b, ToDevice)
		require.NoError(t, err)
		require.False(t, seen[uint64(a)>>m.shift], "granule %d reused before the space wrapped", uint64(a)>>m.shift)
		require.NoError(t, m.UnmapSingle(a, 100, ToDevice))
	}
	requireTableEmpty(t, m)
}

// mapUntil maps b on m until the mapping's granule is congruent to want modulo mod, unmapping the
// others, and returns its address.
func mapUntil(t *testing.T, m *IOMMU, b []byte, want, mod uint64) Addr {
	t.Helper()
	for range 1 << 20 {
		a, err := m.MapSingle(b, ToDevice)
		require.NoError(t, err)
		if (uint64(a)>>m.shift)%mod == want%mod {
			return a
		}
		require.NoError(t, m.UnmapSingle(a, len(b), ToDevice))
	}
	t.Fatalf("no granule congruent to %d mod %d", want, mod)
	return 0
}

// TestIOMMUIndexDisplaced: a long-lived mapping in granule g's entry moves the mapping of a later
// granule congruent to g to the far entry of its set (half the index away), while the granule
// after it keeps its own entry; a run of long-lived mappings in consecutive granules fills no set;
// with both entries of g's set long-lived, the congruent granule's mapping goes to the page
// lists. Each translates to its own bytes, unmaps once, and faults after its unmap.
func TestIOMMUIndexDisplaced(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	tab := &m.tab
	tab.useSets(0) // 128 entries in use: granules come round quickly
	mod := iommuInUse(tab)
	bufs := make([][]byte, 6)
	for i := range bufs {
		bufs[i] = make([]byte, 64)
		for j := range bufs[i] {
			bufs[i][j] = byte(10 + i)
		}
	}
	a0, err := m.MapSingle(bufs[0], ToDevice) // long-lived, in entry g0
	require.NoError(t, err)
	g0 := uint64(a0) >> m.shift
	e0 := int(g0 % mod)
	require.Equal(t, e0, entryOf(tab, a0))
	far := (e0 + int(mod/2)) % int(mod)

	a1 := mapUntil(t, m, bufs[1], g0, mod) // congruent to g0: the far entry
	require.Equal(t, far, entryOf(tab, a1))
	a2 := mapUntil(t, m, bufs[2], g0+1, mod) // the next granule: its own entry
	require.Equal(t, (e0+1)%int(mod), entryOf(tab, a2))
	require.NoError(t, m.UnmapSingle(a1, 64, ToDevice))
	// Entries g0 and g0+1 long-lived (a run of long-lived mappings): granules that come round to
	// them take their far entries, no page list.
	for i, want := range []uint64{g0, g0 + 1} {
		a := mapUntil(t, m, bufs[5], want, mod)
		require.Equal(t, (int(want%mod)+int(mod/2))%int(mod), entryOf(tab, a), "granule %d", i)
		require.NoError(t, m.UnmapSingle(a, 64, ToDevice))
	}
	require.NoError(t, m.UnmapSingle(a2, 64, ToDevice))

	// Entry g0 and its far entry both long-lived: the next congruent granule's set is full.
	a3 := mapUntil(t, m, bufs[3], g0+mod/2, mod) // its own entry is g0's far one
	require.Equal(t, far, entryOf(tab, a3))
	a4 := mapUntil(t, m, bufs[4], g0, mod)
	require.Equal(t, -1, entryOf(tab, a4), "a full set's mapping is not in the index")
	require.Equal(t, int64(1), tab.stripe(uint64(a4)>>m.shift).pairs.Load(), "it is on the page lists")
	require.Equal(t, 3, m.LiveCount())

	live := map[Addr]int{a0: 0, a3: 3, a4: 4}
	for a, i := range live {
		b, err := m.Translate(a, 64, ToDevice)
		require.NoError(t, err)
		require.Equal(t, bufs[i], b)
	}
	for a := range live {
		require.NoError(t, m.UnmapSingle(a, 64, ToDevice))
		_, err := m.Translate(a, 64, ToDevice)
		requireFault(t, err, a, ReasonNotMapped)
		require.ErrorIs(t, m.UnmapSingle(a, 64, ToDevice), ErrNotMapped)
	}
	for _, a := range []Addr{a1, a2} {
		_, err = m.Translate(a, 64, ToDevice)
		requireFault(t, err, a, ReasonNotMapped)
	}
	require.Zero(t, m.LiveCount())
	requireTableEmpty(t, m)
}

// TestIOMMUConcurrentFreshIOVAs: goroutines on every P map their own buffers at once (each P
// from its magazine, refilled under the allocator's mutex): no granule is handed out twice among
// the live mappings, each translates to its own bytes, and after all are unmapped every old
// address faults and a second round gets none of the first round's granules (fresh until the
// space wraps). Run under -race with -cpu=1,2,4.
func TestIOMMUConcurrentFreshIOVAs(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	const workers = 4
	per := 3 * magGranules
	if testing.Short() {
		per = magGranules + 7
	}
	type mapped struct {
		a    Addr
		size int
		fill byte
	}
	round := func() [][]mapped {
		out := make([][]mapped, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range per {
					b := make([]byte, 48+i%200)
					fill := byte(w*61 + i%50 + 1)
					for j := range b {
						b[j] = fill
					}
					a, err := m.MapSingle(b, ToDevice)
					if err != nil {
						t.Error(err)
						return
					}
					out[w] = append(out[w], mapped{a, len(b), fill})
				}
			})
		}
		wg.Wait()
		return out
	}
	first := round()
	owner := map[uint64]bool{}
	for _, ms := range first {
		for _, x := range ms {
			g := uint64(x.a) >> m.shift
			require.False(t, owner[g], "granule %d handed out to two live mappings", g)
			owner[g] = true
			b, err := m.Translate(x.a, 48, ToDevice)
			require.NoError(t, err)
			for _, c := range b {
				require.Equal(t, x.fill, c)
			}
		}
	}
	require.Len(t, owner, workers*per)
	for _, ms := range first {
		for _, x := range ms {
			require.NoError(t, m.UnmapSingle(x.a, x.size, ToDevice))
		}
	}
	for _, ms := range first {
		for _, x := range ms {
			_, err := m.Translate(x.a, x.size, ToDevice)
			requireFault(t, err, x.a, ReasonNotMapped)
		}
	}
	for _, ms := range round() {
		for _, x := range ms {
			g := uint64(x.a) >> m.shift
			require.False(t, owner[g], "granule %d of the first round handed out again before the wrap", g)
			require.NoError(t, m.UnmapSingle(x.a, x.size, ToDevice))
		}
	}
	require.Zero(t, m.LiveCount())
	requireTableEmpty(t, m)
}
