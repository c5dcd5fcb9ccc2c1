package sdma

import "unsafe"

// addrOf returns the address of b's first byte, for splitting b at page boundaries (AddBytes).
// Only the address's value is used: it is never turned back into a pointer.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
