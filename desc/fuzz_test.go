package desc

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDescRoundTrip encodes random field values with the setters and checks, against a model that
// places each field by hand, that the words are exact and every getter reads its value back;
// out-of-range values must be refused and leave the descriptor unchanged.
func FuzzDescRoundTrip(f *testing.F) {
	f.Add(uint64(0), 0, 0, 0, 0, 0, uint32(0), false, false, false, false, uint64(0), uint64(0))
	f.Add(uint64(1)<<48-1, 16383, 7, 31, 15, 3, uint32(0xffffffff), true, true, true, true, uint64(0), uint64(0))
	f.Add(uint64(1)<<48, 16384, 8, 32, 16, 4, uint32(1), true, false, true, false, ^uint64(0), ^uint64(0))
	f.Add(uint64(0x1000), -1, -1, -1, -1, -1, uint32(7), false, true, false, true, uint64(0x5555), ^uint64(0)>>1)
	f.Fuzz(func(t *testing.T, addr uint64, n, mode, idx, dws, gen int, upd uint32, first, last, intr, h2h bool, qw0, qw1 uint64) {
		// The descriptor starts with arbitrary words, so every setter must clear its field
		// before it places the new value (and touch no other bit).
		d := Desc{Qw0: qw0, Qw1: qw1}
		want := d
		inRange := func(v, max int) bool { return v >= 0 && v <= max }

		before := d
		if err := d.SetAddr(addr); addr <= 0xffff_ffff_ffff {
			require.NoError(t, err)
			want.Qw0 = want.Qw0&^(uint64(1)<<48-1) | addr
		} else {
			require.ErrorIs(t, err, ErrRange)
			require.Equal(t, before, d)
		}
		before = d
		if err := d.SetLen(n); inRange(n, 16383) {
			require.NoError(t, err)
			want.Qw0 = want.Qw0&^(uint64(0x3fff)<<48) | uint64(n)<<48
		} else {
			require.ErrorIs(t, err, ErrRange)
			require.Equal(t, before, d)
		}
		before = d
		if err := d.SetHeaderMode(HeaderMode(mode)); inRange(int(uint8(mode)), 7) {
			require.NoError(t, err)
			want.Qw1 = want.Qw1&^(uint64(7)<<13) | uint64(uint8(mode))<<13
		} else {
			require.ErrorIs(t, err, ErrRange)
			require.Equal(t, before, d)
		}
		before = d
		if err := d.SetHeaderIndex(idx); inRange(idx, 31) {
			require.NoError(t, err)
			want.Qw1 = want.Qw1&^(uint64(31)<<8) | uint64(idx)<<8
		} else {
			require.ErrorIs(t, err, ErrRange)
			require.Equal(t, before, d)
		}
		before = d
		if err := d.SetHeaderDWs(dws); inRange(dws, 16) { // 16: the 64-byte header, stored as 0
			require.NoError(t, err)
			want.Qw1 = want.Qw1&^(uint64(15)<<4) | uint64(dws%16)<<4
		} else {
			require.ErrorIs(t, err, ErrRange)
			require.Equal(t, before, d)
		}
		before = d
		if err := d.SetGeneration(Generation(gen)); inRange(int(uint8(gen)), 3) {
			require.NoError(t, err)
			want.Qw1 = want.Qw1&^(uint64(3)<<2) | uint64(uint8(gen))<<2
		} else {
			require.ErrorIs(t, err, ErrRange)
			require.Equal(t, before, d)
		}
		d.SetUpdate1(upd)
		want.Qw1 = want.Qw1&^(uint64(0xffffffff)<<32) | uint64(upd)<<32
		d.SetFirst(first)
		d.SetLast(last)
		d.SetIntReq(intr)
		d.SetHeadToHost(h2h)
		bit := func(w *uint64, b uint, on bool) {
			*w &^= 1 << b
			if on {
				*w |= 1 << b
			}
		}
		bit(&want.Qw0, 63, first)
		bit(&want.Qw0, 62, last)
		bit(&want.Qw1, 1, intr)
		bit(&want.Qw1, 0, h2h)
		require.Equal(t, want, d)

		// Decode with the getters and compare with the model's fields.
		require.Equal(t, want.Qw0&(1<<48-1), d.Addr())
		require.Equal(t, int(want.Qw0>>48&0x3fff), d.Len())
		require.Equal(t, HeaderMode(want.Qw1>>13&7), d.HeaderMode())
		require.Equal(t, int(want.Qw1>>8&31), d.HeaderIndex())
		require.Equal(t, int(want.Qw1>>4&15), d.HeaderDWs())
		require.Equal(t, Generation(want.Qw1>>2&3), d.Generation())
		require.Equal(t, upd, d.Update1())
		require.Equal(t, first, d.First())
		require.Equal(t, last, d.Last())
		require.Equal(t, intr, d.IntReq())
		require.Equal(t, h2h, d.HeadToHost())

		// Re-encoding the decoded fields gives the same words (bits 16..31 of qw1 belong to
		// no field: they are carried over).
		r := Desc{Qw1: qw1 & 0xffff0000}
		require.NoError(t, r.SetAddr(d.Addr()))
		require.NoError(t, r.SetLen(d.Len()))
		require.NoError(t, r.SetHeaderMode(d.HeaderMode()))
		require.NoError(t, r.SetHeaderIndex(d.HeaderIndex()))
		require.NoError(t, r.SetHeaderDWs(d.HeaderDWs()))
		require.NoError(t, r.SetGeneration(d.Generation()))
		r.SetUpdate1(d.Update1())
		r.SetFirst(d.First())
		r.SetLast(d.Last())
		r.SetIntReq(d.IntReq())
		r.SetHeadToHost(d.HeadToHost())
		require.Equal(t, d, r)

		// Make: the address, the length and the mapping type in the generation bits, all else
		// clear; any field out of range refuses it with a zero descriptor.
		md, err := Make(addr, n, MapType(gen))
		if addr <= 0xffff_ffff_ffff && inRange(n, 16383) && inRange(int(uint8(gen)), 3) {
			require.NoError(t, err)
			require.Equal(t, Desc{Qw0: addr | uint64(n)<<48, Qw1: uint64(uint8(gen)) << 2}, md)
			require.Equal(t, MapType(uint8(gen)), md.MapType())
		} else {
			require.ErrorIs(t, err, ErrRange)
			require.Zero(t, md)
		}

		// WithGeneration: only bits 3:2 change, to gen&3, unchecked.
		g := d.WithGeneration(Generation(gen))
		require.Equal(t, Desc{Qw0: d.Qw0, Qw1: d.Qw1&^(3<<2) | uint64(uint8(gen)&3)<<2}, g)
	})
}

// FuzzAHGUpdate checks the AHG word builder against a hand-placed model and its decoder.
func FuzzAHGUpdate(f *testing.F) {
	f.Add(uint16(0xbeef), uint8(6), uint8(16), uint8(16))
	f.Add(uint16(0), uint8(15), uint8(31), uint8(1))
	f.Add(uint16(1), uint8(16), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, data uint16, dw, start, bits uint8) {
		w, err := AHGUpdate(data, dw, start, bits)
		ok := dw <= 15 && start <= 31 && bits >= 1 && bits <= 16 && int(start)+int(bits) <= 32
		if !ok {
			require.ErrorIs(t, err, ErrRange)
			require.Zero(t, w)
			return
		}
		require.NoError(t, err)
		want := uint32(1)<<31 | uint32(start)<<24 | uint32(bits%16)<<20 | uint32(dw)<<16 | uint32(data)
		require.Equal(t, want, w)
		require.Equal(t, AHGWord{Enable: true, StartBit: start, Bits: bits, DWIndex: dw, Value: data}, DecodeAHG(w))
	})
}

// FuzzDecodeAHG decodes arbitrary words (the chip's view: any 32 bits) against fields extracted
// by hand, and checks that every word whose fields AHGUpdate accepts is rebuilt from its decoding
// (the enable bit set; a length field of 0 read as 16 bits; bits 30:29 belong to no field and are
// dropped).
func FuzzDecodeAHG(f *testing.F) {
	f.Add(uint32(0))
	f.Add(uint32(0x9006beef))
	f.Add(uint32(0x7fffffff))
	f.Add(uint32(0xff0fffff))
	f.Add(uint32(0xff100028)) // bits 30:29, which belong to no field
	f.Fuzz(func(t *testing.T, w uint32) {
		got := DecodeAHG(w)
		bits := uint8(w >> 20 & 15)
		if bits == 0 {
			bits = 16
		}
		want := AHGWord{Enable: w>>31 == 1, StartBit: uint8(w >> 24 & 31), Bits: bits, DWIndex: uint8(w >> 16 & 15), Value: uint16(w)}
		require.Equal(t, want, got)
		re, err := AHGUpdate(got.Value, got.DWIndex, got.StartBit, got.Bits)
		if int(got.StartBit)+int(got.Bits) > 32 {
			require.ErrorIs(t, err, ErrRange)
			return
		}
		require.NoError(t, err)
		require.Equal(t, w&^(3<<29)|1<<31, re)
	})
}
