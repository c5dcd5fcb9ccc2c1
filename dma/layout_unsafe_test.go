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
