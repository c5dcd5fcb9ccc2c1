package dma

import (
	"testing"
	"unsafe"
)

// requireEntryInvariants checks the facts Direct's fast map relies on instead of loading an
// entry's addr and region (direct_fast.go) in every entry of tab's index, at rest: a free entry
// holds no region; on Direct, an entry that holds a buffer holds its first byte's address as addr.
func requireEntryInvariants(t *testing.T, tab *table) {
	t.Helper()
	for i := range tab.ents {
		e := &tab.ents[i]
		m := e.meta.Load()
		if m&metaState == metaFree && e.region.Load() != nil {
			t.Fatalf("entry %d: free with a region", i)
		}
		if p := e.ptr.Load(); tab.keyShift == 0 && p != nil && e.addr.Load() != uint64(uintptr(unsafe.Pointer(p))) {
			t.Fatalf("entry %d (meta %#x): addr %#x, ptr %p", i, m, e.addr.Load(), p)
		}
	}
}

// TestBytesAt: bytesAt's slice is the n bytes at p+off, with capacity n.
func TestBytesAt(t *testing.T) {
	buf := make([]byte, 3*PageSize)
	for _, c := range []struct{ off, n int }{{0, 1}, {0, len(buf)}, {5, 100}, {PageSize - 1, PageSize + 2}, {len(buf) - 1, 1}} {
		b := bytesAt(&buf[0], c.off, c.n)
		if len(b) != c.n || cap(b) != c.n || unsafe.SliceData(b) != &buf[c.off] {
			t.Fatalf("bytesAt(%d, %d): len %d cap %d at %p, want %p", c.off, c.n, len(b), cap(b), unsafe.SliceData(b), &buf[c.off])
		}
	}
}
