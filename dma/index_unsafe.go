package dma

import "unsafe"

// bytesAt returns the n bytes at offset off from p, with no capacity beyond them: the reader's
// slice of a mapping. p is the first byte of a mapping that lookup validated (index.go) and
// [off, off+n) lies inside it, so the slice never reaches memory outside what was mapped.
func bytesAt(p *byte, off, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(p), off)), n)
}
