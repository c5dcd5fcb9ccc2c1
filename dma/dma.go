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
//
// A Mapper must not panic in its unmaps (UnmapSingle, UnmapPage, UnmapSG, and a SoleMapper's or
// BatchUnmapper's) nor in Translate: package sdma calls them in an engine's hardware and
// completion passes, and does not recover a panic there. On the engine's own goroutine it ends
// the program; on a caller's goroutine (a Process, Poll, SendWait or Close that runs the pass,
// verbs' Drain) it goes on to the caller, the txreq's completion never runs, and the engine's
// lock stays held: every later pass of that engine, and the device's Close, waits for ever. A
// panic in a map goes on to the caller of the add (TxReq.AddKVAddr, ...), which usdma's Submit
// and verbs' Send clean up after.
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
	// (dma_map_sg). On error nothing stays mapped and every entry's Addr and Len are zero.
	MapSG(sg []SG, dir Direction) (int, error)
	// UnmapSG undoes MapSG (dma_unmap_sg). Every entry is tried, as the batch's are: the error,
	// if any, matches ErrNotMapped and names the first entry that was not mapped; the others are
	// unmapped all the same (the kernel's dma_unmap_sg has no error to stop at).
	UnmapSG(sg []SG, dir Direction) error
	// SyncForCPU hands a mapped range back to the CPU (dma_sync_single_for_cpu). dir must be the
	// mapping's direction, or the mapping bidirectional; else ErrNotMapped (ErrInvalid: bad dir).
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
	ErrMapping   = errors.New("dma: mapping failed")                   // -ENOSPC from dma_map_*
	ErrNotMapped = errors.New("dma: address not mapped")               // unmap/sync of an unknown mapping
	ErrFault     = errors.New("dma: device access fault")              // Translate refused a range
	ErrInvalid   = errors.New("dma: invalid argument")                 // bad length, direction, offset
	ErrClosed    = errors.New("dma: use of closed region or pool")     // a released Region, Pool or Coherent
	ErrNotOwned  = errors.New("dma: block not owned by this pool")     // foreign or double free
	ErrBusy      = errors.New("dma: blocks still allocated from pool") // Pool.Destroy with blocks out
)

// Kind names which map call made a mapping, as reported in Mapping.Kind. An unmap must use the
// call that matches the map (dma-debug's "unmap with the wrong function" check).
type Kind string

// The kinds of mapping.
const (
	KindSingle   Kind = "single"   // MapSingle / UnmapSingle
	KindPage     Kind = "page"     // MapPage / UnmapPage
	KindSG       Kind = "sg"       // one entry of MapSG / UnmapSG
	KindCoherent Kind = "coherent" // AllocCoherent / FreeCoherent
)

// Mapping describes one live mapping in a leak report (Live).
type Mapping struct {
	Addr Addr      // bus address of the first byte
	Size int       // length in bytes
	Dir  Direction // direction it was mapped with
	Kind Kind      // KindSingle, KindPage, KindSG, KindCoherent or KindRegistered
}

// String formats m as "kind [addr,+size) dir".
func (m Mapping) String() string {
	return fmt.Sprintf("%s [%#x,+%d) %v", m.Kind, uint64(m.Addr), m.Size, m.Dir)
}

// FaultReason says why a Translate failed, as carried in Fault.Reason.
type FaultReason string

// The reasons a Translate fails.
const (
	ReasonNotMapped    FaultReason = "not mapped"                // no live mapping holds the first byte (never mapped, or unmapped)
	ReasonPartlyMapped FaultReason = "partly mapped"             // the range starts in a mapping but runs past its end
	ReasonDirection    FaultReason = "wrong direction"           // mapped, but not for this kind of access
	ReasonBadLength    FaultReason = "bad length"                // size <= 0, or addr+size wraps around
	ReasonOutside      FaultReason = "outside the IOVA space"    // above the IOMMU's IOVABits
	ReasonBadAccess    FaultReason = "bad access direction"      // access is not a valid Direction
	ReasonInjected     FaultReason = "injected by FaultInjector" // FaultInjector.FailTranslate
)

// Fault is the error of a refused device access (the IOMMU fault record). It matches ErrFault.
type Fault struct {
	Addr   Addr        // first bus address of the refused access
	Size   int         // its length
	Access Direction   // ToDevice: the device read; FromDevice: the device wrote
	Reason FaultReason // one of the Reason constants
}

// Error says which address and why.
func (f *Fault) Error() string {
	return fmt.Sprintf("dma: device fault: %v access [%#x,+%d): %s",
		f.Access, uint64(f.Addr), f.Size, f.Reason)
}

// Unwrap returns ErrFault, the sentinel every *Fault matches (errors.Is).
func (f *Fault) Unwrap() error { return ErrFault }

// faultCounter is implemented by every mapper and wrapper in this package.
type faultCounter interface{ Faults() uint64 }

// faultsOf returns m's fault count, or 0 if m does not count faults.
func faultsOf(m Mapper) uint64 {
	if fc, ok := m.(faultCounter); ok {
		return fc.Faults()
	}
	return 0
}
