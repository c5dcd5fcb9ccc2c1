package dma

import "unsafe"

// sliceAddr returns the address of b's first element (the CPU virtual address a kernel driver
// would hand to dma_map_single). The Go heap does not move objects, so the address is stable for
// as long as b is reachable; callers keep b reachable while the address is in use.
func sliceAddr(b []byte) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}
