package dma

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression tests for a shared buffer mapped by several packets in flight with Direct: the map
// call read the record's bus address after publishing the record. Direct's mappings of the same
// buffer are identical, so any unmap of that buffer may claim any of them, including the one
// just published; a concurrent unmap (the completion side) could claim and recycle it before the
// map returned, and MapSingle returned 0 (the recycled record) or the address of whatever buffer
// the pooled record was handed to next. The engine then halted on a descriptor with bus address 0.

// TestDirectSharedBufUnmapRacesMap is the deterministic form: the testPublished hook runs exactly
// in the window between publication and the map's return, and there unmaps two earlier identical
// mappings (what a completion goroutine may do) and maps another buffer (which may reuse the
// recycled record).
func TestDirectSharedBufUnmapRacesMap(t *testing.T) {
	d := NewDirect()
	buf := pattern(2048, 3)
	other := pattern(2048, 5)
	want := Addr(sliceAddr(buf))
	for range 2 { // two packets in flight with the same buffer
		a, err := d.MapSingle(buf, ToDevice)
		require.NoError(t, err)
		require.Equal(t, want, a)
	}

	var otherAddr Addr
	liveInWindow := -1
	d.core.tab.testPublished = func() {
		d.core.tab.testPublished = nil // once: the calls below are the "other goroutine"
		// The two earlier packets complete: two unmaps of the identical mapping.
		assert.NoError(t, d.UnmapSingle(want, len(buf), ToDevice))
		assert.NoError(t, d.UnmapSingle(want, len(buf), ToDevice))
		liveInWindow = d.LiveCount()
		// Another map, which may get the recycled record.
		otherAddr, _ = d.MapSingle(other, ToDevice)
	}
	a, err := d.MapSingle(buf, ToDevice)
	require.NoError(t, err)
	require.Equal(t, want, a, "MapSingle must return the buffer's own address (bus address = virtual address)")
	require.Equal(t, Addr(sliceAddr(other)), otherAddr)
	require.Equal(t, 1, liveInWindow, "the mapping being made is live (counted) once published")
	require.Equal(t, 2, d.LiveCount())

	got, err := d.Translate(a, len(buf), ToDevice)
	require.NoError(t, err)
	require.Equal(t, buf, got)
	require.NoError(t, d.UnmapSingle(a, len(buf), ToDevice))
	require.NoError(t, d.UnmapSingle(otherAddr, len(other), ToDevice))
	require.Zero(t, d.LiveCount())
	require.Empty(t, d.Live())
}

// TestSharedBufConcurrentMapUnmap is the stress form, shaped like the send path: one goroutine
// maps pieces of one buffer for every packet, another unmaps them as packets complete, with up to
// depth packets in flight. Every returned address must be the right one and translate to the
// right bytes while mapped, and once all is unmapped the page table must hold nothing. The
// multipage shape has pieces that span pages and overlap each other.
func TestSharedBufConcurrentMapUnmap(t *testing.T) {
	packets := 20000 // a fixed amount of work, not a duration: the same test on a slow machine
	if testing.Short() {
		packets = 3000
	}
	big := make([]byte, 5*PageSize)
	shapes := []struct {
		name   string
		pieces [][]byte
	}{
		{"halves", func() [][]byte { b := pattern(4096, 9); return [][]byte{b[:2048], b[2048:]} }()},
		{"multipage", [][]byte{big[100 : 100+2*PageSize+50], big[PageSize+7 : 4*PageSize+500], big[3:]}},
	}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			impls(t, func(t *testing.T, m testMapper) {
				n := shortRounds(m, packets)
				t.Run("map=public", func(t *testing.T) { sharedBufStress(t, m, sh.pieces, n, false) })
				t.Run("map=sole", func(t *testing.T) { sharedBufStress(t, m, sh.pieces, n, true) })
			})
		})
	}
}

// sharedBufStress runs TestSharedBufConcurrentMapUnmap's send path on m, the mappings made by
// MapSingle, or if sole by MapSingleSole (on Direct, up to depth identical mappings of each piece,
// two in the index with a handle each, the others on the page lists with handle 0) and undone
// with their handles, one by one or in a batch.
func sharedBufStress(t *testing.T, m testMapper, pieces [][]byte, packets int, sole bool) {
	const depth = 64
	type packet struct {
		addrs []Addr
		soles []Sole
	}
	inflight := make(chan packet, depth)
	var wg sync.WaitGroup
	wg.Go(func() { // the completion side
		var us []Unmap
		for p := range inflight {
			if sole && len(p.addrs)%2 == 1 { // the batch path, as package sdma's completion
				us = us[:0]
				for i, a := range p.addrs {
					us = append(us, Unmap{Addr: a, Size: len(pieces[i]), Dir: ToDevice, Kind: KindSingle, Sole: p.soles[i]})
				}
				assert.NoError(t, m.(BatchUnmapper).UnmapBatch(us))
				continue
			}
			for i, a := range p.addrs {
				assert.NoError(t, unmapTest(m, a, len(pieces[i]), p.soles[i], sole))
			}
		}
	})
	closed := false
	defer func() { // also on a failed require: stop the completion side
		if !closed {
			close(inflight)
			wg.Wait()
		}
	}()
	_, direct := m.(*Direct)
	for n := 0; n < packets && !t.Failed(); n++ {
		p := packet{make([]Addr, len(pieces)), make([]Sole, len(pieces))}
		for i, h := range pieces {
			a, so, err := mapTest(m, h, sole)
			require.NoError(t, err)
			p.soles[i] = so
			if direct {
				require.Equal(t, Addr(sliceAddr(h)), a, "packet %d piece %d", n, i)
			}
			got, err := m.Translate(a, len(h), ToDevice) // the device reads it
			require.NoError(t, err, "packet %d piece %d", n, i)
			require.Equal(t, &h[0], &got[0], "packet %d piece %d: bytes of another buffer", n, i)
			p.addrs[i] = a
		}
		inflight <- p
	}
	close(inflight)
	closed = true
	wg.Wait()
	require.Zero(t, m.LiveCount())
	require.Empty(t, m.Live())
	requireTableEmpty(t, m)
}

// requireTableEmpty checks that no page of the mapper's table lists a record: a record left on
// some page after its unmap is a stale pointer into the record pool.
func requireTableEmpty(t *testing.T, m testMapper) {
	t.Helper()
	var tab *table
	switch m := m.(type) {
	case *Direct:
		tab = &m.tab
	case *IOMMU:
		tab = &m.tab
	default:
		t.Fatalf("unknown mapper %T", m)
	}
	if n := tab.indexCount(); n != 0 {
		t.Errorf("%d index entries live after every unmap", n)
	}
	for i := range tab.ents {
		if st := tab.ents[i].meta.Load() & metaState; st != metaFree {
			t.Errorf("index entry %d in state %d (not free) after every unmap", i, st)
		}
	}
	for i := range tab.stripes {
		s := &tab.stripes[i]
		s.mu.Lock()
		for pg, pl := range s.m { // a page may keep an empty list (maxEmpty): no record is the test
			if len(pl.recs) != 0 {
				t.Errorf("page %#x still lists %d records after every unmap", pg, len(pl.recs))
			}
		}
		if s.live != 0 {
			t.Errorf("stripe %d counts %d live records after every unmap", i, s.live)
		}
		if n := s.pairs.Load(); n != 0 {
			t.Errorf("stripe %d counts %d records on page lists after every unmap", i, n)
		}
		s.mu.Unlock()
	}
}

// TestTranslateNoGlobalLock: Translate takes only the read lock of its page's stripe. While a
// writer holds another stripe's lock (a map or unmap in progress there) and, for the IOMMU, the
// IOVA allocator's mutex, a translation of a page in a different stripe still completes.
func TestTranslateNoGlobalLock(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		var tab *table
		var alloc *sync.Mutex
		switch m := m.(type) {
		case *Direct:
			tab = &m.tab
		case *IOMMU:
			tab, alloc = &m.tab, &m.mu
		}
		first := func(a Addr) *stripe { return tab.stripe(uint64(a) >> tab.shift) }
		held, err := m.MapSingle(make([]byte, 64), ToDevice)
		require.NoError(t, err)
		var other Addr
		var bufs [][]byte
		for i := 0; other == 0; i++ {
			require.Less(t, i, 1000, "every page hashes to one stripe")
			b := make([]byte, 64)
			a, err := m.MapSingle(b, ToDevice)
			require.NoError(t, err)
			bufs = append(bufs, b)
			if first(a) != first(held) {
				other = a
			}
		}
		first(held).mu.Lock()
		if alloc != nil {
			alloc.Lock()
		}
		done := make(chan error, 1)
		go func() {
			_, err := m.Translate(other, 64, ToDevice)
			done <- err
		}()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute): // generous: only a lock shared with the writer can stall it
			t.Fatal("Translate of a page in another stripe waited for a writer's lock")
		}
		if alloc != nil {
			alloc.Unlock()
		}
		first(held).mu.Unlock()
		runtime.KeepAlive(bufs)
	})
}
