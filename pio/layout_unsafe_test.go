package pio

import (
	"testing"
	"unsafe"
)

// The shadow ring has one slot per cache line, and the allocator's, the releaser's, the wait
// list's and the chip's fields are at least a line apart, so no two groups share a line wherever
// the struct lands (hfi1: ____cacheline_aligned_in_smp on alloc_lock, release_lock, piowait).
func TestLayoutCacheLines(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the padding is computed for 64-bit pointers")
	}
	if s := unsafe.Sizeof(Buf{}); s != 64 {
		t.Errorf("Buf is %d bytes, want one 64-byte line", s)
	}
	var sc SendContext
	groups := []struct {
		name       string
		first, end uintptr // [first, end) of the group
	}{
		{"read-only", 0, unsafe.Offsetof(sc.chipG) + unsafe.Sizeof(sc.chipG)},
		{"alloc", unsafe.Offsetof(sc.allocMu), unsafe.Offsetof(sc.inFlight) + 8},
		{"release", unsafe.Offsetof(sc.releaseMu), unsafe.Offsetof(sc.releaseSeq) + 4},
		{"wait", unsafe.Offsetof(sc.waitMu), unsafe.Offsetof(sc.waitCount) + 4},
		{"chip", unsafe.Offsetof(sc.hwMu), unsafe.Sizeof(sc)},
	}
	for i := 1; i < len(groups); i++ {
		if gap := int(groups[i].first) - int(groups[i-1].end); gap < 64 {
			t.Errorf("%s fields start %d bytes after the %s fields end: they may share a line",
				groups[i].name, gap, groups[i-1].name)
		}
	}
}
