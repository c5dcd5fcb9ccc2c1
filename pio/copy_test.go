package pio

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// Every implementation leaves the model's image in the send buffer and the sink receives the
// data padded to dwords: whole packets, segmented copies cut anywhere, starts near the wrap.
func TestCopyDifferential(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		const credits = 16
		rng := rand.New(rand.NewPCG(1, 2))
		sink := &captureSink{}
		sc := newManual(t, credits, sink)
		sizes := []int{0, 1, 3, 4, 7, 8, 9, 15, 16, 55, 56, 57, 63, 64, 65, 119, 120, 121, 200, 255, 256, 500, 1000}
		for _, n := range sizes {
			for _, startBlock := range []int{0, credits - 1, credits - 2, 5} {
				// Move the next allocation to startBlock.
				cur := int(sc.fillWrap)
				advance(t, sc, (startBlock-cur+credits)%credits)
				sink.take()
				data := make([]byte, n)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				var cuts []int
				for range rng.IntN(5) {
					cuts = append(cuts, rng.IntN(n+1))
				}
				start, pbc := sendSegs(t, sc, data, sortedInts(cuts), nil)
				if start != startBlock*BlockSize {
					t.Fatalf("start %d, want block %d", start, startBlock)
				}
				checkImage(t, sc, start, modelImage(pbc, modelWire(data)))
				sc.Process()
				got := sink.take()
				if len(got) != 1 || !bytes.Equal(got[0], modelWire(data)) {
					t.Fatalf("size %d start block %d cuts %v: sink got %d packets %x, want %x", n, startBlock, cuts, len(got), got, modelWire(data))
				}
			}
		}
	})
}

func sortedInts(a []int) []int {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
	return a
}

// Copy (pio_copy) and the segmented copy leave the same image.
func TestCopyMatchesSegmented(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, n := range []int{0, 4, 8, 12, 52, 56, 60, 64, 124, 128, 1020} {
			data := bytes.Repeat([]byte{0xa5, 0x5a, 0x3c, 0xc3}, n/4)
			sink := &captureSink{}
			sc := newManual(t, 20, sink)
			advance(t, sc, 19) // the packet wraps
			sink.take()
			dw := 2 + n/4
			b, err := sc.BufferAlloc(dw, nil)
			if err != nil {
				t.Fatal(err)
			}
			start := int(b.start)
			pbc := CreatePBC(0, 0, 0, uint32(dw))
			if err := b.Copy(pbc, data); err != nil {
				t.Fatal(err)
			}
			checkImage(t, sc, start, modelImage(pbc, data))
			sc.Process()
			if got := sink.take(); len(got) != 1 || !bytes.Equal(got[0], data) {
				t.Fatalf("n=%d: sink %x", n, got)
			}
		}
	})
}

func TestCopyBadInput(t *testing.T) {
	sc := newManual(t, 4, &captureSink{})
	b, err := sc.BufferAlloc(4, nil) // one block
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 6)); !errors.Is(err, ErrInvalid) {
		t.Errorf("odd bytes: %v", err)
	}
	if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 64)); !errors.Is(err, ErrMsgSize) {
		t.Errorf("too long: %v", err)
	}
	if err := b.CopyMid([]byte{1}); !errors.Is(err, ErrState) {
		t.Errorf("mid before start: %v", err)
	}
	if err := b.CopyEnd(); !errors.Is(err, ErrState) {
		t.Errorf("end before start: %v", err)
	}
	// Nothing was written: the buffer is still the caller's, and a good copy goes out.
	if b.qwWritten != 0 {
		t.Fatalf("refused copies wrote %d quadwords", b.qwWritten)
	}
	if err := b.CopyStart(CreatePBC(0, 0, 0, 4), []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyMid(make([]byte, 60)); !errors.Is(err, ErrMsgSize) {
		t.Errorf("mid past the blocks: %v", err)
	}
	if err := b.CopyMid([]byte{4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyEnd(); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyEnd(); !errors.Is(err, ErrState) {
		t.Errorf("second end: %v", err)
	}
	if _, err := sc.BufferAlloc(1, nil); !errors.Is(err, ErrMsgSize) {
		t.Errorf("1 dword: %v", err)
	}
	if _, err := sc.BufferAlloc(4*16+1, nil); !errors.Is(err, ErrMsgSize) {
		t.Errorf("5 blocks in 4: %v", err)
	}
}

// FuzzCopySegs checks every implementation against the model on arbitrary data, cuts and
// start positions: the packet's place in the send buffer, its blocks' bytes, no byte written
// outside them, and what the sink receives.
func FuzzCopySegs(f *testing.F) {
	f.Add([]byte("hello, pio"), []byte{3, 7}, uint8(0))
	f.Add(bytes.Repeat([]byte{0xff}, 130), []byte{1, 9, 64, 65}, uint8(7))
	f.Add([]byte{}, []byte{}, uint8(3))
	f.Add(bytes.Repeat([]byte{0x5a}, 56), []byte{90, 200}, uint8(7)) // PBC and data fill the last block exactly: no pad
	f.Fuzz(func(t *testing.T, data, cutb []byte, startBlock uint8) {
		const credits = 8
		if len(data) > credits*BlockSize-16 {
			data = data[:credits*BlockSize-16]
		}
		var cuts []int
		for _, c := range cutb {
			cuts = append(cuts, int(c)*len(data)/256)
		}
		cuts = sortedInts(cuts)
		for _, name := range Implementations() {
			restore, _ := setImplementation(name)
			sink := &captureSink{}
			sc := newManual(t, credits, sink)
			advance(t, sc, int(startBlock)%credits)
			sink.take()
			for i := range sc.buf { // stale bytes, as a send buffer holds: the copy must overwrite its blocks
				sc.buf[i] = byte(i*7) | 0x80
			}
			before := bytes.Clone(sc.buf)
			start, pbc := sendSegs(t, sc, data, cuts, nil)
			// The packet starts at the block after the startBlock packets before it, and its
			// copy touches no byte outside its own blocks.
			if want := int(startBlock) % credits * BlockSize; start != want {
				t.Fatalf("impl %s: packet at %d, want %d", name, start, want)
			}
			img := modelImage(pbc, modelWire(data))
			checkImage(t, sc, start, img)
			for i := len(img); i < sc.size; i++ {
				if j := (start + i) % sc.size; sc.buf[j] != before[j] {
					t.Fatalf("impl %s: byte %d outside the packet's blocks written", name, j)
				}
			}
			sc.Process()
			if got := sink.take(); len(got) != 1 || !bytes.Equal(got[0], modelWire(data)) {
				t.Fatalf("impl %s: sink %x, want %x", name, got, modelWire(data))
			}
			restore()
			sc.Close()
		}
	})
}

// WriteQWords agrees with copy on whole quadwords and never writes past them.
func TestWriteQWordsDifferential(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		src := make([]byte, 4096+32)
		for i := range src {
			src[i] = byte(i * 7)
		}
		for _, n := range []int{8, 16, 24, 32, 40, 64, 72, 120, 128, 136, 4096} {
			for _, dOff := range []int{0, 8, 16, 24, 56} {
				for _, sOff := range []int{0, 1, 3, 8} {
					dst := alignedBuf(n + 128)
					for i := range dst {
						dst[i] = 0xee
					}
					WriteQWords(dst[dOff:], src[sOff:sOff+n+7])
					if !bytes.Equal(dst[dOff:dOff+n], src[sOff:sOff+n]) {
						t.Fatalf("n %d dOff %d sOff %d: wrong bytes", n, dOff, sOff)
					}
					for i, c := range dst {
						if (i < dOff || i >= dOff+n) && c != 0xee {
							t.Fatalf("n %d dOff %d: byte %d written", n, dOff, i)
						}
					}
				}
			}
		}
	})
}

func TestSendBufferAligned(t *testing.T) {
	sc := newManual(t, 3, nil)
	if bufAddr(sc.buf)%BlockSize != 0 {
		t.Fatalf("send buffer at %#x, not 64-byte aligned", bufAddr(sc.buf))
	}
}

func TestImplementations(t *testing.T) {
	impls := Implementations()
	if impls[len(impls)-1] != "go" {
		t.Errorf("%v", impls)
	}
	if _, err := setImplementation("nope"); !errors.Is(err, errors.ErrUnsupported) {
		t.Error(err)
	}
}
