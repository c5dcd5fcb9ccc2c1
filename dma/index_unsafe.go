package dma

import "unsafe"

// bytesAt returns the n bytes at offset off from p, with no capacity beyond them: the reader's
// slice of a mapping. p is the first byte of a mapping that lookup validated (index.go) and
// [off, off+n) lies inside it, so the slice never reaches memory outside what was mapped.
func bytesAt(p *byte, off, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(p), off)), n)
}

// entryIndex returns the number of entry e of t's index (e is one of t.ents).
func (t *table) entryIndex(e *entry) uint64 {
	return uint64((uintptr(unsafe.Pointer(e)) - uintptr(unsafe.Pointer(&t.ents[0]))) / unsafe.Sizeof(entry{}))
}
