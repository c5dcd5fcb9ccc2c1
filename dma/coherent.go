package dma

import (
	"math/bits"
	"sync/atomic"
)

// Coherent is memory from AllocCoherent (dma_alloc_coherent): zeroed, aligned (CPU and bus
// address) to the power-of-two number of pages that covers its size (AllocCoherent), outside the
// Go heap, mapped bidirectionally from allocation to FreeCoherent. The CPU and the device may both
// touch it at any time without syncs. Its methods are safe for concurrent use.
type Coherent struct {
	owner  *core   // the mapper that allocated it; immutable
	region *Region // the pages behind it; immutable
	buf    []byte  // the Size() bytes; immutable
	addr   Addr    // bus address of buf[0]; immutable

	// freed is set once by FreeCoherent (CAS, so a double free is seen); read by Bytes.
	freed atomic.Bool
}

// Bytes returns the memory (the kernel's cpu_addr), or nil after FreeCoherent. The slice is
// valid until FreeCoherent.
func (c *Coherent) Bytes() []byte {
	if c.freed.Load() {
		return nil
	}
	return c.buf
}

// Addr returns the bus address (the kernel's *dma_handle).
func (c *Coherent) Addr() Addr { return c.addr }

// Size returns the size asked for.
func (c *Coherent) Size() int { return len(c.buf) }

// coherentAlign returns the alignment dma_alloc_coherent promises for size bytes (DMA-API: "the
// smallest PAGE_SIZE order which is greater than or equal to the requested size"): the smallest
// power of two at least size and at least PageSize, or 0 if that does not fit an int (no memory
// can be had for it).
func coherentAlign(size int) int {
	if size <= PageSize {
		return PageSize
	}
	n := bits.Len(uint(size - 1))
	if n >= bits.UintSize-1 {
		return 0
	}
	return 1 << n
}
