package alloc_test

import (
	"strings"
	"testing"

	"github.com/gosdma/gosdma/alloc"
)

// A megabyte object: 2^28 of them (2^48 bytes) are past what the runtime can allocate at once.
type hugeObj [1 << 20]byte

// TestSizePastOneAllocation (review rv3-alloc): a size whose objects do not fit one allocation is
// refused with an error naming it. NewList and the Slab's first Get used to panic in the runtime
// ("allocation size out of range"); on 32-bit platforms NewList(math.MaxInt) did so too, failing
// TestBadInputsAllocators there.
func TestSizePastOneAllocation(t *testing.T) {
	const n = 1 << 28
	l, err := alloc.NewList[hugeObj](n, nil)
	if l != nil || err == nil || !strings.Contains(err.Error(), "268435456") {
		t.Errorf("NewList(2^28 objects of 1 MiB): %v, %v; want an error naming the size", l, err)
	}
	s, err := alloc.NewSlab(alloc.SlabConfig[hugeObj]{ObjectsPerSlab: n})
	if s != nil || err == nil || !strings.Contains(err.Error(), "268435456") {
		t.Errorf("NewSlab(ObjectsPerSlab 2^28 of 1 MiB): %v; want an error naming the size", err)
	}
	// A size that fits is still taken.
	small, err := alloc.NewList[hugeObj](2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.Get(); err != nil {
		t.Fatal(err)
	}
}
