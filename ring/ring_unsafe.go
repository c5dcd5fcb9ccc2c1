package ring

import (
	"unsafe"

	"github.com/gosdma/gosdma/desc"
)

// slotAlign is the alignment of the slot array: a cache line, so that each 16-byte slot lies in
// one line (and is 16-byte aligned for the assembly's VMOVDQA stores), like the kernel's
// dma_alloc_coherent descq.
const slotAlign = 64

// alignedSlots returns size descriptors starting at a 64-byte-aligned address. It allocates
// slotAlign bytes of slack and slices at the first aligned descriptor; the slice keeps the whole
// allocation alive.
func alignedSlots(size int) []desc.Desc {
	const slack = slotAlign / desc.Size
	buf := make([]desc.Desc, size+slack)
	addr := uintptr(unsafe.Pointer(&buf[0]))
	// Go allocates desc.Desc arrays at least 8-byte aligned and a multiple of 16 bytes in
	// size; the offset is a whole number of descriptors when the base is 16-byte aligned,
	// which the size classes used for these arrays (>= 1 KiB) guarantee.
	off := (slotAlign - int(addr%slotAlign)) % slotAlign
	if off%desc.Size != 0 {
		panic("ring: slot array not 16-byte aligned")
	}
	s := buf[off/desc.Size:]
	return s[:size:size]
}

// slotsAddr returns the address of the first slot, for the alignment test.
func slotsAddr(r *Ring) uintptr { return uintptr(unsafe.Pointer(&r.slots[0])) }
