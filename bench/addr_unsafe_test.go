package bench

import "unsafe"

// addrOf returns the address of buf's first byte (for page-piece splitting by address).
func addrOf(buf []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(buf))) }
