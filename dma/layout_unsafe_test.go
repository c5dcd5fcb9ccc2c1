package dma

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestStripeLayout: each stripe's lock word is at least a cache line away from the next stripe's,
// so translations of pages in different stripes do not contend on one line.
func TestStripeLayout(t *testing.T) {
	var tab table
	a := uintptr(unsafe.Pointer(&tab.stripes[0].mu))
	b := uintptr(unsafe.Pointer(&tab.stripes[1].mu))
	require.GreaterOrEqual(t, b-a, uintptr(64))
}

// unsafePointer exposes unsafe.Pointer to layout tests in files without unsafe.
func unsafePointer[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

// TestMapperHotLine: every word of a Direct or an IOMMU that the per-packet fast paths read
// (direct_fast.go, iommu_fast.go, sole_translate.go) lies on the mapper's head lines: core's
// first cache line (the registrations' snapshot and the table's head), and for the IOMMU its own
// first line before it. A packet's map, translation and unmap then touch one line of a Direct
// (two of an IOMMU) besides their index entry's, which the copy of a large packet does not evict
// per packet as it did the four lines these words were spread over.
func TestMapperHotLine(t *testing.T) {
	d := NewDirect()
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	base := func(p unsafe.Pointer) uintptr { return uintptr(p) }
	// The mappers are large objects, page-aligned by the allocator: their head lines are lines.
	require.Zero(t, base(unsafe.Pointer(d))%64, "Direct not line-aligned")
	require.Zero(t, base(unsafe.Pointer(m))%64, "IOMMU not line-aligned")

	onLine := func(what string, line uintptr, words map[string]unsafe.Pointer) {
		for name, p := range words {
			off := base(p) - line
			require.Less(t, off, uintptr(64), "%s: %s at offset %d of its head line", what, name, int64(off))
		}
	}
	coreWords := func(c *core) map[string]unsafe.Pointer {
		return map[string]unsafe.Pointer{
			"set":           unsafe.Pointer(&c.set),
			"ents":          unsafe.Pointer(&c.tab.ents),
			"setHalf":       unsafe.Pointer(&c.tab.setHalf),
			"setMask":       unsafe.Pointer(&c.tab.setMask),
			"setSel":        unsafe.Pointer(&c.tab.setSel),
			"testMidRead":   unsafe.Pointer(&c.tab.testMidRead),
			"testPublished": unsafe.Pointer(&c.tab.testPublished),
			"spillOnly":     unsafe.Pointer(&c.tab.spillOnly),
			"owned":         unsafe.Pointer(&c.tab.owned),
		}
	}
	require.Zero(t, base(unsafe.Pointer(&d.core))%64, "Direct's core not on a line boundary")
	onLine("Direct", base(unsafe.Pointer(&d.core)), coreWords(&d.core))
	require.Zero(t, base(unsafe.Pointer(&m.core))%64, "IOMMU's core not on a line boundary")
	onLine("IOMMU core", base(unsafe.Pointer(&m.core)), coreWords(&m.core))
	onLine("IOMMU", base(unsafe.Pointer(m)), map[string]unsafe.Pointer{
		"mags":       unsafe.Pointer(&m.mags),
		"shift":      unsafe.Pointer(&m.shift),
		"bits":       unsafe.Pointer(&m.bits),
		"spacePages": unsafe.Pointer(&m.spacePages),
		"inj":        unsafe.Pointer(&m.inj),
		"epoch":      unsafe.Pointer(&m.epoch),
	})
	// The IOMMU's allocator mutex, written by every refill, is off both head lines.
	require.GreaterOrEqual(t, base(unsafe.Pointer(&m.mu))-base(unsafe.Pointer(&m.core)), uintptr(64))
}
