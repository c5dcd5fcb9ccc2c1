package usdma

import "unsafe"

// addrOf returns the address of buf's first byte: the key of the pin cache, as the kernel keys
// mmu_rb nodes by the iovec's user address.
func addrOf(buf []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(buf))) }
