package pio

import "unsafe"

// bufAlign is the send buffer's alignment: a block, so that every block is one cache line and the
// assembly's 32-byte VMOVNTDQ stores are aligned (the chip's send buffer is block-aligned MMIO).
const bufAlign = BlockSize

// alignedBuf returns n bytes starting at a 64-byte-aligned address; the slice keeps the whole
// allocation alive.
func alignedBuf(n int) []byte {
	b := make([]byte, n+bufAlign)
	off := (bufAlign - int(uintptr(unsafe.Pointer(&b[0]))%bufAlign)) % bufAlign
	return b[off : off+n : off+n]
}

// bufAddr is the address of b's first byte, for the alignment test.
func bufAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
