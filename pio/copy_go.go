package pio

import "encoding/binary"

// writeQWsGo writes len(src)/8 quadwords of src to dst with one 8-byte store each (the kernel's
// writeq loop), a block at a time. It does not use copy: memmove may write a range with
// overlapping or narrower stores, which write-combining MMIO must not see.
func writeQWsGo(dst, src []byte) {
	n := len(src) &^ 7
	dst = dst[:n]
	src = src[:n]
	for len(src) >= BlockSize {
		d, s := dst[:BlockSize:BlockSize], src[:BlockSize:BlockSize]
		binary.LittleEndian.PutUint64(d[0:], binary.LittleEndian.Uint64(s[0:]))
		binary.LittleEndian.PutUint64(d[8:], binary.LittleEndian.Uint64(s[8:]))
		binary.LittleEndian.PutUint64(d[16:], binary.LittleEndian.Uint64(s[16:]))
		binary.LittleEndian.PutUint64(d[24:], binary.LittleEndian.Uint64(s[24:]))
		binary.LittleEndian.PutUint64(d[32:], binary.LittleEndian.Uint64(s[32:]))
		binary.LittleEndian.PutUint64(d[40:], binary.LittleEndian.Uint64(s[40:]))
		binary.LittleEndian.PutUint64(d[48:], binary.LittleEndian.Uint64(s[48:]))
		binary.LittleEndian.PutUint64(d[56:], binary.LittleEndian.Uint64(s[56:]))
		dst, src = dst[BlockSize:], src[BlockSize:]
	}
	for len(src) >= 8 {
		binary.LittleEndian.PutUint64(dst, binary.LittleEndian.Uint64(src))
		dst, src = dst[8:], src[8:]
	}
}
