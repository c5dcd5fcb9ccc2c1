package dma

import "unsafe"

// bytesAt returns the n bytes at offset off from p, with no capacity beyond them: the reader's
// slice of a mapping. p is the first byte of a mapping that lookup validated (index.go) and
// [off, off+n) lies inside it, so the slice never reaches memory outside what was mapped.
//
// The slice's words are written through sliceHeader, not made by unsafe.Slice, whose checks (n
// not negative, p+off+n not past the end of the address space: four instructions and a panic
// call per translation) the callers' checks already imply: 0 <= off, 1 <= n and off+n at most
// the mapping's length, a live buffer's. The compiler keeps the three words in registers.
func bytesAt(p *byte, off, n int) []byte {
	var b []byte
	h := (*sliceHeader)(unsafe.Pointer(&b))
	h.data, h.len, h.cap = unsafe.Add(unsafe.Pointer(p), off), n, n
	return b
}

// sliceHeader is the layout of a slice (runtime.slice): the pointer is an unsafe.Pointer, so the
// garbage collector sees the slice's words as it does a []byte's.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// entryIndex returns the number of entry e of t's index (e is one of t.ents).
func (t *table) entryIndex(e *entry) uint64 {
	return uint64((uintptr(unsafe.Pointer(e)) - uintptr(unsafe.Pointer(&t.ents[0]))) / unsafe.Sizeof(entry{}))
}
