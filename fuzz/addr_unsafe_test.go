package fuzz

import "unsafe"

// addrOf returns the CPU address of b's first byte, to check that a descriptor's memory does not
// cross a page boundary. The value is never turned back into a pointer.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
