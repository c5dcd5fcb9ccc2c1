package pio

import "encoding/binary"

// The copy into the send buffer (hfi1: pio_copy.c). The chip's send buffer is write-combining
// MMIO that takes whole 8-byte stores: every write here is a whole quadword, every packet fills
// whole 64-byte blocks (the tail of the last block is zeroed), the first block holds the PBC, and
// a packet wraps from the end of the buffer to its start only at a block boundary (allocation
// hands out whole blocks). The quadword runs go through writeQWs, the per-arch seam: ordinary
// stores in assembly on amd64 by default (non-temporal ones as a choice, see Implementations),
// 8-byte stores in Go elsewhere.
//
// The kernel writes the first block through a second, start-of-packet alias of the buffer
// (SOP_DISTANCE) so the chip learns where a packet starts; the model knows it from the shadow
// ring and has one mapping only.
//
// The kernel's seg_pio_copy_mid goes to some length (mid_copy_mix, the "to_align" dance) to read
// its source with aligned 8-byte loads. Go's loads from a []byte are unaligned-safe on every
// architecture it supports, so CopyMid only completes the pending carry quadword from the front
// of the new piece and copies the rest straight: the output is the same, byte for byte.

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// off is the send buffer offset of quadword q of b.
func (b *Buf) off(q uint32) int {
	o := int(b.start) + int(q)*8
	if o >= b.sc.size {
		o -= b.sc.size
	}
	return o
}

// putQWs writes len(src)/8 whole quadwords at the write position, wrapping at the buffer's end.
func (b *Buf) putQWs(src []byte) {
	n := len(src) >> 3
	if n == 0 {
		return
	}
	sc := b.sc
	o := b.off(b.qwWritten)
	first := min(n, (sc.size-o)>>3)
	writeQWs(sc.buf[o:o+first*8], src[:first*8])
	if first < n {
		writeQWs(sc.buf[:(n-first)*8], src[first*8:n*8])
	}
	b.qwWritten += uint32(n)
}

// putQW writes one quadword at the write position with one ordinary 8-byte store, as the
// kernel's writeq does (on the chip's write-combining mapping an ordinary store combines too; the
// non-temporal hint only matters for the bulk runs, and an assembly call per quadword would cost
// more than the store).
func (b *Buf) putQW(v uint64) {
	o := b.off(b.qwWritten)
	binary.LittleEndian.PutUint64(b.sc.buf[o:o+8], v)
	b.qwWritten++
}

// padBlock zero-fills the rest of the current block (no wrap: blocks do not straddle the end).
func (b *Buf) padBlock() {
	for b.qwWritten%blockQWs != 0 {
		b.putQW(0)
	}
}

// lowBytes reads up to 7 bytes little-endian (read_low_bytes / jcopy).
func lowBytes(p []byte) uint64 {
	var v uint64
	for i := len(p) - 1; i >= 0; i-- {
		v = v<<8 | uint64(p[i])
	}
	return v
}

// room reports whether q more quadwords fit in the allocated blocks.
func (b *Buf) room(q int) bool { return int(b.qwWritten)+q <= int(b.blocks)*blockQWs }

func (b *Buf) checkStart(op string) error {
	if b.state.Load() != bufAllocated || b.qwWritten != 0 {
		return errf(op, ErrState, "buffer not freshly allocated")
	}
	return nil
}

// Copy writes a whole packet: the PBC, then src, which holds whole dwords (len(src) a multiple
// of 4), then zeros to the end of the block, and hands the blocks to the chip (hfi1: pio_copy).
// The PBC's length is the chip's business: one that does not match the blocks, or a src that
// leaves allocated blocks unwritten (only the block the copy ends in is padded), halts the
// context (CausePBCLength), as a bad PBC halts the real chip. A src that is not whole dwords or does not
// fit the allocated blocks is an error (ErrInvalid, ErrMsgSize) that writes nothing; the buffer
// is still the caller's to fill.
func (b *Buf) Copy(pbc PBC, src []byte) error {
	if err := b.checkStart("Copy"); err != nil {
		return err
	}
	if len(src)%4 != 0 {
		return errf("Copy", ErrInvalid, itoa(len(src))+" bytes is not whole dwords")
	}
	if !b.room(1 + (len(src)+7)/8) {
		return errf("Copy", ErrMsgSize, itoa(len(src))+" bytes do not fit "+itoa(int(b.blocks))+" blocks")
	}
	b.putQW(uint64(pbc))
	whole := len(src) &^ 7
	b.putQWs(src[:whole])
	if whole != len(src) { // the dangling dword
		b.putQW(uint64(binary.LittleEndian.Uint32(src[whole:])))
	}
	b.end()
	return nil
}

// CopySegs writes a packet made of several pieces: CopyStart with the first, CopyMid with each
// other, CopyEnd. An error from a piece leaves the buffer as CopyStart and CopyMid leave it.
func (b *Buf) CopySegs(pbc PBC, segs [][]byte) error {
	var first []byte
	if len(segs) > 0 {
		first, segs = segs[0], segs[1:]
	}
	if err := b.CopyStart(pbc, first); err != nil {
		return err
	}
	for _, s := range segs {
		if err := b.CopyMid(s); err != nil {
			return err
		}
	}
	return b.CopyEnd()
}

// CopyStart begins a segmented copy: the PBC, then the whole quadwords of src; its last
// len(src)%8 bytes wait in the carry (hfi1: seg_pio_copy_start). src may have any length. An
// error (ErrState, ErrMsgSize) writes nothing.
func (b *Buf) CopyStart(pbc PBC, src []byte) error {
	if err := b.checkStart("CopyStart"); err != nil {
		return err
	}
	if !b.room(1 + (len(src)+7)/8) {
		return errf("CopyStart", ErrMsgSize, itoa(len(src))+" bytes do not fit "+itoa(int(b.blocks))+" blocks")
	}
	b.putQW(uint64(pbc))
	whole := len(src) &^ 7
	b.putQWs(src[:whole])
	b.carry = lowBytes(src[whole:])
	b.carryBytes = uint32(len(src) - whole)
	return nil
}

// CopyMid appends src, of any length (hfi1: seg_pio_copy_mid): the carry is completed from its
// front and written, the rest goes out in whole quadwords and its tail waits in the carry. A
// call before CopyStart or after the end (ErrState), or one that would not fit the blocks
// (ErrMsgSize), writes nothing.
func (b *Buf) CopyMid(src []byte) error {
	if b.state.Load() != bufAllocated || b.qwWritten == 0 {
		return errf("CopyMid", ErrState, "no CopyStart, or the copy has ended")
	}
	total := int(b.carryBytes) + len(src)
	if !b.room((total + 7) / 8) {
		return errf("CopyMid", ErrMsgSize, itoa(len(src))+" more bytes do not fit "+itoa(int(b.blocks))+" blocks")
	}
	if total < 8 { // not enough to fill a quadword
		b.carry |= lowBytes(src) << (8 * b.carryBytes)
		b.carryBytes = uint32(total)
		return nil
	}
	if b.carryBytes != 0 {
		k := 8 - int(b.carryBytes)
		b.putQW(b.carry | lowBytes(src[:k])<<(8*b.carryBytes))
		src = src[k:]
	}
	whole := len(src) &^ 7
	b.putQWs(src[:whole])
	b.carry = lowBytes(src[whole:])
	b.carryBytes = uint32(len(src) - whole)
	return nil
}

// CopyEnd writes the carry, if any, zero-fills the rest of the block and hands the blocks to the
// chip (hfi1: seg_pio_copy_end). Before CopyStart or after the end it is ErrState.
func (b *Buf) CopyEnd() error {
	if b.state.Load() != bufAllocated || b.qwWritten == 0 {
		return errf("CopyEnd", ErrState, "no CopyStart, or the copy has ended")
	}
	if b.carryBytes != 0 {
		b.putQW(b.carry)
		b.carry, b.carryBytes = 0, 0
	}
	b.end()
	return nil
}

// end pads the block and publishes the buffer to the chip.
func (b *Buf) end() {
	b.padBlock()
	sc := b.sc
	// Store-release: the quadwords above (plain stores, or non-temporal stores already fenced
	// by the assembly's SFENCE) are visible to the chip before it sees the state.
	b.state.Store(bufWritten)
	sc.inFlight.Add(-1) // this_cpu_dec(*pbuf->sc->buffers_allocated)
	sc.kick()
}
