package pio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// A literal model of hfi1's pio_copy.c (pio_copy, seg_pio_copy_start, seg_pio_copy_mid with its
// from_align dance, mid_copy_mix, mid_copy_straight, seg_pio_copy_end, merge_write8,
// read_low_bytes, read_extra_bytes, carry_write8) on a model of the chip's send buffer mapping:
// addresses from base_addr, the start-of-packet alias SOP_DISTANCE above them, writeq recording
// every store. The model's own invariants (every store a whole, aligned quadword inside the
// packet's blocks, each of those blocks' quadwords stored exactly once, the first block through
// the SOP alias and no other) hold the model to what the kernel's comments promise; the tests
// then hold Copy, CopyStart, CopyMid and CopyEnd to it: the same carry, carry bytes and
// quadwords written after each piece, the same bytes in the send buffer, what the sink receives.

// The kernel's constants are its own (pio.h, pio_copy.c, hfi.h), not the package's, so that the
// model does not follow a change of those.
const (
	kBaseAddr         = 1 << 24           // sc->base_addr: block (and page) aligned
	kSOPDistance      = 1 << 32           // SOP_DISTANCE (TXE_PIO_SIZE / 2): above every buffer address
	kPIOBlockSize     = 64                // PIO_BLOCK_SIZE
	kPIOBlockQWs      = kPIOBlockSize / 8 // PIO_BLOCK_QWS
	kBlockMask        = kPIOBlockSize - 1 // PIO_BLOCK_MASK
	kBlockDWords      = kPIOBlockSize / 4 // BLOCK_DWORDS
	kPBCLengthDWsMask = 0xfff             // PBC_LENGTH_DWS_MASK (PBC_LENGTH_DWS_SHIFT 0)
)

// kDwordsToBlocks is dwords_to_blocks: DIV_ROUND_UP(x, BLOCK_DWORDS).
func kDwordsToBlocks(dw uint64) uint64 { return (dw + kBlockDWords - 1) / kBlockDWords }

// kPBCLength is the PBC's PbcLengthDWs field.
func kPBCLength(pbc uint64) uint64 { return pbc & kPBCLengthDWsMask }

// kMMIO is a context's send buffer as the CPU sees it through its two mappings.
type kMMIO struct {
	t      testing.TB
	size   uint64 // sc->size
	mem    []byte
	stores []int  // per quadword: how many writeq reached it
	sop    []bool // per quadword: written through the SOP alias
}

func newKMMIO(t testing.TB, credits int) *kMMIO {
	n := credits * kPIOBlockSize
	return &kMMIO{t: t, size: uint64(n), mem: make([]byte, n), stores: make([]int, n/8), sop: make([]bool, n/8)}
}

// writeq is the chip's view of one 8-byte MMIO store.
func (m *kMMIO) writeq(v, dest uint64) {
	sop := dest >= kBaseAddr+kSOPDistance
	if sop {
		dest -= kSOPDistance
	}
	if dest < kBaseAddr || dest-kBaseAddr+8 > m.size || dest%8 != 0 {
		m.t.Fatalf("kernel model: writeq at %#x outside the send buffer [%#x, %#x) or unaligned", dest, kBaseAddr, kBaseAddr+m.size)
	}
	off := dest - kBaseAddr
	binary.LittleEndian.PutUint64(m.mem[off:], v)
	m.stores[off/8]++
	m.sop[off/8] = sop
}

// kSrc is a source buffer at a model address: src[i] is at base+i.
type kSrc struct {
	b    []byte
	base uint64
}

func (s kSrc) u64(from uint64) uint64 { return binary.LittleEndian.Uint64(s.b[from-s.base:]) }
func (s kSrc) u32(from uint64) uint32 { return binary.LittleEndian.Uint32(s.b[from-s.base:]) }
func (s kSrc) at(from uint64) byte    { return s.b[from-s.base] }

// kPioBuf is struct pio_buf: the fields the copy uses.
type kPioBuf struct {
	m          *kMMIO
	start, end uint64 // buffer start address, context end address
	qwWritten  uint16
	carry      uint64 // union mix carry
	carryBytes uint8
}

// newKPioBuf is sc_buffer_alloc's "finish filling in the buffer outside the lock".
func newKPioBuf(m *kMMIO, fillWrap uint64) *kPioBuf {
	return &kPioBuf{m: m, start: kBaseAddr + fillWrap*kPIOBlockSize, end: kBaseAddr + m.size}
}

// pioCopy is pio_copy: count dwords from an 8-byte aligned from.
func (p *kPioBuf) pioCopy(pbc uint64, s kSrc, from uint64, count int) {
	m := p.m
	dest := p.start + kSOPDistance
	send := dest + kPIOBlockSize
	m.writeq(pbc, dest)
	dest += 8
	dend := dest + uint64(count>>1)*8
	if dend < send {
		for dest < dend {
			m.writeq(s.u64(from), dest)
			from += 8
			dest += 8
		}
	} else {
		for dest < send {
			m.writeq(s.u64(from), dest)
			from += 8
			dest += 8
		}
		dest -= kSOPDistance
		dend -= kSOPDistance
		if p.end <= dend {
			for dest < p.end {
				m.writeq(s.u64(from), dest)
				from += 8
				dest += 8
			}
			dest -= m.size
			dend -= m.size
		}
		for dest < dend {
			m.writeq(s.u64(from), dest)
			from += 8
			dest += 8
		}
	}
	if count&1 != 0 { // the dangling u32, in the low half of a zeroed union mix
		m.writeq(uint64(s.u32(from)), dest)
		dest += 8
	}
	for dest&kBlockMask != 0 {
		m.writeq(0, dest)
		dest += 8
	}
}

// jcopy into carry's bytes from index at.
func (p *kPioBuf) jcopy(at uint8, s kSrc, from uint64, n uint64) {
	for i := range n {
		shift := 8 * (uint64(at) + i)
		p.carry = p.carry&^(0xff<<shift) | uint64(s.at(from+i))<<shift
	}
}

func (p *kPioBuf) readLowBytes(s kSrc, from uint64, n uint64) {
	p.carry = 0
	p.jcopy(0, s, from, n)
	p.carryBytes = uint8(n)
}

func (p *kPioBuf) readExtraBytes(s kSrc, from uint64, n uint64) {
	p.jcopy(p.carryBytes, s, from, n)
	p.carryBytes += uint8(n)
}

func (p *kPioBuf) mergeWrite8(dest uint64, s kSrc, from uint64) {
	nw := s.u64(from)
	temp := p.carry | nw<<(8*uint64(p.carryBytes))
	p.m.writeq(temp, dest)
	p.carry = nw >> (8 * (8 - uint64(p.carryBytes)))
}

// segStart is seg_pio_copy_start.
func (p *kPioBuf) segStart(pbc uint64, s kSrc, from uint64, nbytes uint64) {
	m := p.m
	dest := p.start + kSOPDistance
	send := dest + kPIOBlockSize
	m.writeq(pbc, dest)
	dest += 8
	dend := dest + (nbytes>>3)*8
	if dend < send {
		for dest < dend {
			m.writeq(s.u64(from), dest)
			from += 8
			dest += 8
		}
	} else {
		for dest < send {
			m.writeq(s.u64(from), dest)
			from += 8
			dest += 8
		}
		dest -= kSOPDistance
		dend -= kSOPDistance
		if p.end <= dend {
			for dest < p.end {
				m.writeq(s.u64(from), dest)
				from += 8
				dest += 8
			}
			dest -= m.size
			dend -= m.size
		}
		for dest < dend {
			m.writeq(s.u64(from), dest)
			from += 8
			dest += 8
		}
	}
	p.readLowBytes(s, from, nbytes&7)
	p.qwWritten = uint16(1 + nbytes>>3)
}

// midCopy is mid_copy_mix (mix) or mid_copy_straight.
func (p *kPioBuf) midCopy(mix bool, s kSrc, from uint64, nbytes uint64) {
	m := p.m
	write := func(dest, from uint64) {
		if mix {
			p.mergeWrite8(dest, s, from)
		} else {
			m.writeq(s.u64(from), dest)
		}
	}
	dest := p.start + uint64(p.qwWritten)*8
	qwToWrite := nbytes >> 3
	bytesLeft := nbytes & 7
	dend := dest + qwToWrite*8
	if p.qwWritten < kPIOBlockQWs {
		send := p.start + kPIOBlockSize
		xend := min(send, dend)
		dest += kSOPDistance
		xend += kSOPDistance
		for dest < xend {
			write(dest, from)
			from += 8
			dest += 8
		}
		dest -= kSOPDistance
	}
	if p.end <= dend {
		for dest < p.end {
			write(dest, from)
			from += 8
			dest += 8
		}
		dest -= m.size
		dend -= m.size
	}
	for dest < dend {
		write(dest, from)
		from += 8
		dest += 8
	}
	p.qwWritten += uint16(qwToWrite)
	if !mix {
		p.readLowBytes(s, from, nbytes&7)
		return
	}
	if uint64(p.carryBytes)+bytesLeft >= 8 {
		nread := 8 - uint64(p.carryBytes)
		p.readExtraBytes(s, from, nread)
		if dest >= p.end {
			dest -= m.size
		} else if p.qwWritten < kPIOBlockQWs {
			dest += kSOPDistance
		}
		m.writeq(p.carry, dest) // carry8_write8
		p.qwWritten++
		bytesLeft -= nread
		from += nread
		p.readLowBytes(s, from, bytesLeft)
	} else {
		p.readExtraBytes(s, from, bytesLeft)
	}
}

// segMid is seg_pio_copy_mid.
func (p *kPioBuf) segMid(s kSrc, from uint64, nbytes uint64) {
	fromAlign := from & 7
	if uint64(p.carryBytes)+nbytes < 8 {
		p.readExtraBytes(s, from, nbytes)
		return
	}
	if fromAlign != 0 {
		toAlign := 8 - fromAlign
		if uint64(p.carryBytes)+toAlign < 8 {
			p.readExtraBytes(s, from, toAlign)
			from += toAlign
			nbytes -= toAlign
		} else {
			toFill := 8 - uint64(p.carryBytes)
			extra := toAlign - toFill
			p.readExtraBytes(s, from, toFill)
			from += toFill
			nbytes -= toFill
			extra = min(extra, nbytes)
			dest := p.start + uint64(p.qwWritten)*8
			if dest >= p.end {
				dest -= p.m.size
			} else if p.qwWritten < kPIOBlockQWs {
				dest += kSOPDistance
			}
			p.m.writeq(p.carry, dest)
			p.qwWritten++
			p.readLowBytes(s, from, extra)
			from += extra
			nbytes -= extra
			if nbytes == 0 {
				return
			}
		}
	}
	p.midCopy(p.carryBytes != 0, s, from, nbytes)
}

// segEnd is seg_pio_copy_end.
func (p *kPioBuf) segEnd() {
	dest := p.start + uint64(p.qwWritten)*8
	if dest >= p.end {
		dest -= p.m.size
	} else if p.qwWritten < kPIOBlockQWs {
		dest += kSOPDistance
	}
	if p.carryBytes != 0 {
		p.m.writeq(p.carry, dest)
		dest += 8
	}
	for dest&kBlockMask != 0 {
		p.m.writeq(0, dest)
		dest += 8
	}
}

// checkStores asserts the model's invariants for a packet of blocks at byte offset start: each
// quadword of its blocks stored exactly once, the first block's through the SOP alias and no
// other, nothing else stored.
func (m *kMMIO) checkStores(start, blocks int) {
	m.t.Helper()
	n := len(m.stores)
	in := make([]bool, n)
	for q := range blocks * kPIOBlockQWs {
		in[(start/8+q)%n] = true
	}
	for q := range n {
		want := 0
		if in[q] {
			want = 1
		}
		if m.stores[q] != want {
			m.t.Fatalf("kernel model: quadword %d (packet at %d, %d blocks) stored %d times", q, start, blocks, m.stores[q])
		}
		first := in[q] && (q*8-start+int(m.size))%int(m.size) < kPIOBlockSize
		if in[q] && m.sop[q] != first {
			m.t.Fatalf("kernel model: quadword %d (packet at %d): SOP alias %v, first block %v", q, start, m.sop[q], first)
		}
	}
}

// kWire is what the chip sends of the packet at byte offset start: LengthDWs×4 − 8 bytes after
// the PBC, wrapping at the end of the buffer.
func (m *kMMIO) kWire(start int) []byte {
	n := int(kPBCLength(binary.LittleEndian.Uint64(m.mem[start:])))*4 - 8
	out := make([]byte, n)
	for i := range out {
		out[i] = m.mem[(start+8+i)%int(m.size)]
	}
	return out
}

// kdiffCopyCase is one packet: data cut into pieces (segmented) or whole dwords (pio_copy), at
// a start block, each piece's source at an address with the given misalignment.
type kdiffCopyCase struct {
	credits, startBlock int
	data                []byte
	cuts                []int // piece boundaries (segmented); nil and whole: pio_copy
	whole               bool
	align               []uint64 // per piece: source address mod 8 (pio_copy: 0)
}

func (c kdiffCopyCase) pieces() [][]byte {
	var ps [][]byte
	prev := 0
	for _, x := range c.cuts {
		ps = append(ps, c.data[prev:x])
		prev = x
	}
	return append(ps, c.data[prev:])
}

func (c kdiffCopyCase) String() string {
	return fmt.Sprintf("credits %d start block %d, %d bytes, whole %v, cuts %v, align %v",
		c.credits, c.startBlock, len(c.data), c.whole, c.cuts, c.align)
}

// runKdiffCopy drives one case through pio (the implementation selected) and the kernel model,
// comparing the buffer's carry state after every piece, the send buffer's bytes (stale bytes
// elsewhere untouched) and the sink's packet.
func runKdiffCopy(t *testing.T, c kdiffCopyCase) {
	t.Helper()
	sink := &captureSink{}
	sc, err := New(Config{Type: Kernel, Credits: c.credits, Threshold: 1, Sink: sink, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	ended := false // a failure before the copy's end leaves a buffer that Close would wait for
	defer func() {
		if ended {
			sc.Close()
		}
	}()
	advance(t, sc, c.startBlock)
	sink.take()
	for i := range sc.buf { // stale bytes, as a send buffer holds
		sc.buf[i] = byte(i*13) | 0x81
	}
	m := newKMMIO(t, c.credits)
	copy(m.mem, sc.buf)
	before := bytes.Clone(sc.buf)

	dw := 2 + (len(c.data)+3)/4
	pbc := CreatePBC(0, 0, 3, uint32(dw))
	b, err := sc.BufferAlloc(dw, nil)
	if err != nil {
		t.Fatalf("%v: BufferAlloc: %v", c, err)
	}
	if int(b.start) != c.startBlock*kPIOBlockSize {
		t.Fatalf("%v: buffer at %d", c, b.start)
	}
	kp := newKPioBuf(m, uint64(c.startBlock))
	// Each piece's source at an address with its misalignment (the model's addresses; Go's
	// loads are unaligned-safe, so the Go copy reads the same bytes wherever they are).
	src := func(i int, p []byte) kSrc {
		base := uint64(1<<40) + uint64(i)<<20 + c.align[i]
		return kSrc{b: append(bytes.Clone(p), make([]byte, 8)...), base: base}
	}
	state := func(when string) {
		t.Helper()
		if b.qwWritten != uint32(kp.qwWritten) || b.carryBytes != uint32(kp.carryBytes) || b.carry != kp.carry {
			t.Fatalf("%v: after %s: qw_written %d carry_bytes %d carry %#x, the kernel's %d %d %#x",
				c, when, b.qwWritten, b.carryBytes, b.carry, kp.qwWritten, kp.carryBytes, kp.carry)
		}
	}
	if c.whole {
		s := src(0, c.data)
		kp.pioCopy(uint64(pbc), s, s.base, len(c.data)/4)
		if err := b.Copy(pbc, c.data); err != nil {
			t.Fatalf("%v: Copy: %v", c, err)
		}
	} else {
		ps := c.pieces()
		s := src(0, ps[0])
		kp.segStart(uint64(pbc), s, s.base, uint64(len(ps[0])))
		if err := b.CopyStart(pbc, ps[0]); err != nil {
			t.Fatalf("%v: CopyStart: %v", c, err)
		}
		state("CopyStart")
		for i, p := range ps[1:] {
			s := src(i+1, p)
			kp.segMid(s, s.base, uint64(len(p)))
			if err := b.CopyMid(p); err != nil {
				t.Fatalf("%v: CopyMid %d: %v", c, i, err)
			}
			state(fmt.Sprintf("CopyMid %d (%d bytes)", i, len(p)))
		}
		kp.segEnd()
		if err := b.CopyEnd(); err != nil {
			t.Fatalf("%v: CopyEnd: %v", c, err)
		}
	}
	ended = true
	m.checkStores(c.startBlock*kPIOBlockSize, int(kDwordsToBlocks(uint64(dw))))
	if !bytes.Equal(sc.buf, m.mem) {
		for i := range sc.buf {
			if sc.buf[i] != m.mem[i] {
				t.Fatalf("%v: send buffer byte %d: %#x, the kernel's %#x (before the copy %#x)", c, i, sc.buf[i], m.mem[i], before[i])
			}
		}
	}
	want := m.kWire(c.startBlock * kPIOBlockSize)
	sc.Process()
	got := sink.take()
	if len(got) != 1 || !bytes.Equal(got[0], want) {
		t.Fatalf("%v: the chip sent %x, the kernel's buffer sends %x", c, got, want)
	}
}

// TestCopyMatchesKernelTable: the edges of the copy, by hand, against the kernel model. Data
// ending just before, at and just after the SOP block's end and the buffer's end; a packet whose
// first block is the buffer's last (the SOP block wraps the rest); odd tails of 1..7 bytes merged
// across pieces; pieces of 0 bytes; sources misaligned by every amount with carries of every
// length (seg_pio_copy_mid's to_align branches, its early return when the alignment ate the
// piece).
func TestCopyMatchesKernelTable(t *testing.T) {
	data := func(n int) []byte {
		d := make([]byte, n)
		for i := range d {
			d[i] = byte(i*37 + 11)
		}
		return d
	}
	var cases []kdiffCopyCase
	for _, credits := range []int{1, 2, 3, 5} {
		for sb := range credits {
			room := (credits-1)*kPIOBlockSize - 8 // stays within credits-1 blocks: room for advance
			if credits == 1 {
				room = kPIOBlockSize - 8
			}
			for _, n := range []int{0, 4, 8, 12, 48, 52, 56, 60, 64, 68, 112, 116, 120, 124, 128, 184} {
				if n > room {
					continue
				}
				cases = append(cases, kdiffCopyCase{credits: credits, startBlock: sb, data: data(n), whole: true, align: []uint64{0}})
			}
			for _, n := range []int{0, 1, 3, 7, 8, 9, 15, 55, 56, 57, 63, 64, 65, 119, 121} {
				if n > room {
					continue
				}
				for carry := range 8 { // first piece leaves carry bytes; then a piece at each misalignment
					if carry > n {
						continue
					}
					first := carry + ((n-carry)/2)&^7 // whole quadwords, then carry bytes
					for al := range uint64(8) {
						cuts := []int{first}
						for _, k := range []int{first + 1, first + 3, first + 9} {
							if k < n {
								cuts = append(cuts, k)
								break
							}
						}
						align := make([]uint64, len(cuts)+1)
						for i := 1; i < len(align); i++ {
							align[i] = (al + uint64(i)) % 8
						}
						cases = append(cases, kdiffCopyCase{credits: credits, startBlock: sb, data: data(n), cuts: cuts, align: align})
						cases = append(cases, kdiffCopyCase{credits: credits, startBlock: sb, data: data(n), cuts: []int{carry, carry, carry}, align: []uint64{0, al, (al + 5) % 8, al}})
					}
				}
			}
		}
	}
	impl := 0
	forEachImpl(t, func(t *testing.T) {
		defer func() { impl++ }()
		for i, c := range cases {
			if testing.Short() && (i+impl)%15 != 0 {
				continue // -race -short, qemu: every 15th (of every kind), other ones for each implementation
			}
			runKdiffCopy(t, c)
		}
	})
	t.Logf("%d cases", len(cases))
}

// TestCopyMatchesKernelRandom: seeded random packets (sizes across the buffer, 0..6 cuts
// anywhere, misaligned sources, any start block) through both, per implementation.
func TestCopyMatchesKernelRandom(t *testing.T) {
	n := 3000
	if testing.Short() { // -race -short, qemu
		n = 150
	}
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(0x70696f, 0xc09))
		for range n {
			credits := 2 + rng.IntN(12)
			c := kdiffCopyCase{credits: credits, startBlock: rng.IntN(credits)}
			size := rng.IntN((credits-1)*kPIOBlockSize - 8 + 1)
			c.data = make([]byte, size)
			for i := range c.data {
				c.data[i] = byte(rng.Uint32())
			}
			if rng.IntN(4) == 0 {
				c.whole = true
				c.data = c.data[:size&^3]
				c.align = []uint64{0}
			} else {
				var cuts []int
				for range rng.IntN(7) {
					cuts = append(cuts, rng.IntN(len(c.data)+1))
				}
				c.cuts = sortedInts(cuts)
				c.align = make([]uint64, len(c.cuts)+1)
				for i := 1; i < len(c.align); i++ {
					c.align[i] = uint64(rng.IntN(8))
				}
			}
			runKdiffCopy(t, c)
		}
	})
}
