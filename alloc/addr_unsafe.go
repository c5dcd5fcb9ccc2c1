package alloc

import "unsafe"

// This file and cells_unsafe.go (cells at a stride chosen at run time) hold the package's only
// address arithmetic: here, object addresses as integers, to tell an allocator's own objects by
// range. No integer is ever turned back into a pointer; a candidate cell is found by indexing the
// allocator's own cells and compared with the pointer the caller gave.

// addrOf returns p's address. The allocators only compare it with ranges of memory they hold
// (which the garbage collector does not move), so it needs no pinning.
func addrOf[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

// rangeOf returns the address range [base, end) of s's backing array.
func rangeOf[E any](s []E) (base, end uintptr) {
	if len(s) == 0 {
		return 0, 0
	}
	base = uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return base, base + uintptr(len(s))*unsafe.Sizeof(s[0])
}

// poolCellSize is the stride of a Pool chunk.
func poolCellSize[T any]() uintptr {
	var c *poolCell[T]
	return unsafe.Sizeof(*c)
}
