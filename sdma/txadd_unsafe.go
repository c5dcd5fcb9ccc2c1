package sdma

import "unsafe"

// addrOf returns the address of b's first byte, for splitting b at page boundaries (AddBytes).
// Only the address's value is used: it is never turned back into a pointer.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// regKey is tx's key for a registration's use counters: its address, so that txreqs of
// different senders mostly count on different cache lines. Only the value is used.
func regKey(tx *TxReq) uintptr { return uintptr(unsafe.Pointer(tx)) >> 6 }
