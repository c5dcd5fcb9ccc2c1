package dma

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/pcpu"
)

// oneMagazineIOMMU returns an IOMMU on a process of one P (restored at the test's end), so that
// a test's warm-up and its maps share one magazine; it skips under purego (no per-P magazines).
func oneMagazineIOMMU(t *testing.T) *IOMMU {
	t.Helper()
	if !pcpu.Enabled {
		t.Skip("purego: no per-P magazines")
	}
	t.Cleanup(func(n int) func() { return func() { runtime.GOMAXPROCS(n) } }(runtime.GOMAXPROCS(1)))
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	return m
}

// TestIOMMUMagazineNoMutex: once its P's magazine holds granules, a map and unmap of a one-granule
// buffer and of a three-granule one complete while another goroutine holds the IOVA allocator's
// mutex: the steady state takes no mutex (alloc_iova_fast's per-CPU magazine hit).
func TestIOMMUMagazineNoMutex(t *testing.T) {
	m := oneMagazineIOMMU(t)
	require.Len(t, m.mags, 1)
	small, large := make([]byte, 200), make([]byte, 3*PageSize-100)
	a, err := m.MapSingle(small, ToDevice) // reserves the P's first run
	require.NoError(t, err)
	require.NoError(t, m.UnmapSingle(a, len(small), ToDevice))
	requireNoMutexWait(t, m, "a map from a filled magazine", func() error {
		for range 10 {
			for _, b := range [][]byte{small, large} {
				if err := mapTranslateUnmap(m, b); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// mapTranslateUnmap maps b on m, translates the mapping and unmaps it.
func mapTranslateUnmap(m *IOMMU, b []byte) error {
	a, err := m.MapSingle(b, ToDevice)
	if err != nil {
		return err
	}
	if _, err := m.Translate(a, len(b), ToDevice); err != nil {
		return err
	}
	return m.UnmapSingle(a, len(b), ToDevice)
}

// requireNoMutexWait runs f on another goroutine while holding m's IOVA allocator mutex and
// requires that it completes without error (what, for the failure); then no mapping is live.
func requireNoMutexWait(t *testing.T, m *IOMMU, what string, f func() error) {
	t.Helper()
	m.mu.Lock()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute): // generous: only the allocator's mutex can stall it
		t.Fatal(what + " waited for the allocator's mutex")
	}
	m.mu.Unlock()
	require.Zero(t, m.LiveCount())
}

// TestIOMMUMagazineWrap: with magazines, a freed IOVA is still not handed out again before the
// cursor wraps, and after the wrap the allocator and the magazines (of the new epoch) skip
// granules that long-lived mappings hold.
func TestIOMMUMagazineWrap(t *testing.T) {
	m, err := NewIOMMU(IOMMUConfig{IOVABits: 12 + 20}) // 2^20 granules: magazines on (unless purego)
	require.NoError(t, err)
	keep := make([][]byte, 4)
	kept := map[uint64]bool{}
	var keepAddr []Addr
	for i := range keep {
		keep[i] = make([]byte, 100)
		keep[i][0] = byte(i + 1)
		a, err := m.MapSingle(keep[i], ToDevice)
		require.NoError(t, err)
		kept[uint64(a)>>m.shift] = true
		keepAddr = append(keepAddr, a)
	}
	m.mu.Lock()
	m.cursor = m.spacePages - 3*magGranules // near the top: the maps below wrap it
	m.mu.Unlock()
	seen := map[uint64]bool{}
	buf := make([]byte, 100)
	wrapped := false
	for i := 0; i < 20*magGranules; i++ {
		a, err := m.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		g := uint64(a) >> m.shift
		require.False(t, kept[g], "granule %d of a live mapping handed out again", g)
		if m.epoch.Load() == 0 {
			require.False(t, seen[g], "granule %d reused before the wrap", g)
		} else {
			wrapped = true
		}
		seen[g] = true
		require.NoError(t, m.UnmapSingle(a, len(buf), ToDevice))
	}
	require.True(t, wrapped, "the cursor wrapped")
	for i, a := range keepAddr {
		b, err := m.Translate(a, 100, ToDevice)
		require.NoError(t, err)
		require.Equal(t, byte(i+1), b[0])
		require.NoError(t, m.UnmapSingle(a, 100, ToDevice))
	}
	require.Zero(t, m.LiveCount())
}

// TestIOMMUMagazinePayloadNoMutex: a kvaddr payload of up to 16 KiB at any offset (16380 bytes
// starting 100 bytes into a page: five granules) is mapped from its P's magazine too: once the
// magazine holds granules, maps and unmaps of it complete while another goroutine holds the IOVA
// allocator's mutex.
func TestIOMMUMagazinePayloadNoMutex(t *testing.T) {
	m := oneMagazineIOMMU(t)
	payload := make([]byte, 5*PageSize)[100 : 100+16380 : 100+16380]
	a, err := m.MapSingle(payload[:1], ToDevice) // reserves the P's first run
	require.NoError(t, err)
	require.NoError(t, m.UnmapSingle(a, 1, ToDevice))
	requireNoMutexWait(t, m, "a map of a five-granule payload from a filled magazine", func() error {
		for range (magGranules - 1) / magMax { // what the rest of the run holds
			if err := mapTranslateUnmap(m, payload); err != nil {
				return err
			}
		}
		return nil
	})
}
