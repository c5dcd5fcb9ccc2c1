package dma

import (
	"errors"
	"fmt"
)

// Addr is a bus address: what the device is given and what it reads through Translate. It is a
// uint64, like the 2006 patch's u64 handles (dma_addr_t is 32 bits on some machines, ib_sge.addr
// is 64).
type Addr uint64

// Direction is the direction of a mapping (enum dma_data_direction).
type Direction uint8

const (
	Bidirectional Direction = 0 // DMA_BIDIRECTIONAL: the device may read and write
	ToDevice      Direction = 1 // DMA_TO_DEVICE: the device reads (every SDMA mapping)
	FromDevice    Direction = 2 // DMA_FROM_DEVICE: the device writes
)

// String names the direction as the kernel does.
func (d Direction) String() string {
	switch d {
	case Bidirectional:
		return "bidirectional"
	case ToDevice:
		return "to-device"
	case FromDevice:
		return "from-device"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// Valid reports whether d is one of the three directions.
func (d Direction) Valid() bool { return d <= FromDevice }

// Allows reports whether a mapping made with direction d permits a device access in direction
// access (ToDevice: the device reads; FromDevice: the device writes).
func (d Direction) Allows(access Direction) bool {
	return d == Bidirectional || d == access
}

// SG is one scatter-gather entry (struct scatterlist): Buf is the caller's memory; MapSG fills
// Addr and Len (ib_sg_dma_address, ib_sg_dma_len).
type SG struct {
	Buf  []byte
	Addr Addr
	Len  int
}

// Mapper is the interposable DMA mapping seam, the Go shape of struct ib_dma_mapping_ops
// (2006, "IB: Add DMA mapping functions to allow device drivers to interpose"). The CPU side maps
// and unmaps; the device side (Translate) is the only way the hardware model reaches memory.
//
// Implementations must be safe for concurrent use. Mapping failure is an error matching
// ErrMapping (the kernel's -ENOSPC), never a magic address. Unmapping something not mapped,
// with the wrong length or direction, is an error matching ErrNotMapped and changes nothing.
type Mapper interface {
	// MapSingle maps buf (dma_map_single, ib_dma_map_single). buf must not be empty.
	MapSingle(buf []byte, dir Direction) (Addr, error)
	// UnmapSingle undoes MapSingle (dma_unmap_single).
	UnmapSingle(addr Addr, size int, dir Direction) error
	// MapPage maps size bytes at offset in page p (dma_map_page). The range must lie in the page.
	MapPage(p Page, offset, size int, dir Direction) (Addr, error)
	// UnmapPage undoes MapPage (dma_unmap_page).
	UnmapPage(addr Addr, size int, dir Direction) error
	// MapSG maps each entry of sg, filling Addr and Len, and returns the number of entries mapped
	// (dma_map_sg). On error nothing stays mapped.
	MapSG(sg []SG, dir Direction) (int, error)
	// UnmapSG undoes MapSG (dma_unmap_sg).
	UnmapSG(sg []SG, dir Direction) error
	// SyncForCPU hands a mapped range back to the CPU (dma_sync_single_for_cpu).
	SyncForCPU(addr Addr, size int, dir Direction) error
	// SyncForDevice hands a mapped range to the device (dma_sync_single_for_device).
	SyncForDevice(addr Addr, size int, dir Direction) error
	// AllocCoherent allocates size bytes of zeroed memory mapped bidirectionally for as long as it
	// lives (dma_alloc_coherent).
	AllocCoherent(size int) (*Coherent, error)
	// FreeCoherent unmaps and releases coherent memory (dma_free_coherent).
	FreeCoherent(c *Coherent) error

	// Translate is the device side: it returns the bytes behind [addr, addr+size) for a device
	// access in direction access (ToDevice: the device reads them). A range that is not mapped,
	// only partly mapped, was unmapped, spans two mappings, or is used against its mapping's
	// direction is a *Fault (matching ErrFault) and is counted. The returned slice aliases the
	// mapped memory and is valid until the mapping is undone. It must not allocate.
	Translate(addr Addr, size int, access Direction) ([]byte, error)
}

// Sentinel errors of package dma.
var (
	ErrMapping   = errors.New("dma: mapping failed")                  // -ENOSPC from dma_map_*
	ErrNotMapped = errors.New("dma: address not mapped")              // unmap/sync of an unknown mapping
	ErrFault     = errors.New("dma: device access fault")             // Translate refused a range
	ErrInvalid   = errors.New("dma: invalid argument")                // bad length, direction, offset
	ErrClosed    = errors.New("dma: use of closed region or pool")    // a released Region, Pool or Coherent
	ErrNotOwned  = errors.New("dma: block not owned by this pool")    // foreign or double free
	ErrBusy      = errors.New("dma: blocks still allocated from pool") // Pool.Destroy with blocks out
)
