package pio

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
)

// captureSink keeps a copy of every packet.
type captureSink struct {
	mu   sync.Mutex
	pkts [][]byte
}

func (s *captureSink) Deliver(_ int, segs [][]byte) error {
	var p []byte
	for _, b := range segs {
		p = append(p, b...)
	}
	s.mu.Lock()
	s.pkts = append(s.pkts, p)
	s.mu.Unlock()
	return nil
}

func (s *captureSink) take() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pkts
	s.pkts = nil
	return p
}

// forEachImpl runs f once per copy implementation.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	for _, name := range Implementations() {
		t.Run("impl="+name, func(t *testing.T) {
			restore, err := setImplementation(name)
			if err != nil {
				t.Fatal(err)
			}
			defer restore()
			f(t)
		})
	}
}

func newManual(t testing.TB, credits int, sink Sink) *SendContext {
	t.Helper()
	sc, err := New(Config{Type: Kernel, Credits: credits, Threshold: 1, Sink: sink, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc
}

// advance sends n one-block packets and processes them, moving the next allocation n blocks on.
func advance(t testing.TB, sc *SendContext, n int) {
	t.Helper()
	for range n {
		b, err := sc.BufferAlloc(2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 2), nil); err != nil {
			t.Fatal(err)
		}
		sc.Process()
	}
}

// modelImage is the byte image a packet leaves in the send buffer: the PBC, the data, zeros to
// the end of the block.
func modelImage(pbc PBC, data []byte) []byte {
	img := binary.LittleEndian.AppendUint64(nil, uint64(pbc))
	img = append(img, data...)
	for len(img)%BlockSize != 0 {
		img = append(img, 0)
	}
	return img
}

// modelWire is what the sink receives: the data zero-padded to whole dwords.
func modelWire(data []byte) []byte {
	w := append([]byte(nil), data...)
	for len(w)%4 != 0 {
		w = append(w, 0)
	}
	return w
}

// checkImage compares the send buffer at byte offset start (wrapping) with img.
func checkImage(t testing.TB, sc *SendContext, start int, img []byte) {
	t.Helper()
	got := make([]byte, len(img))
	for i := range img {
		got[i] = sc.buf[(start+i)%sc.size]
	}
	if !bytes.Equal(got, img) {
		t.Fatalf("send buffer at %d:\n got %x\nwant %x", start, got, img)
	}
}

// sendSegs allocates and writes data cut at cuts (segmented copy), returning the start offset.
func sendSegs(t testing.TB, sc *SendContext, data []byte, cuts []int, rel Releaser) (int, PBC) {
	t.Helper()
	dw := 2 + (len(data)+3)/4
	pbc := CreatePBC(0, 0, 1, uint32(dw))
	b, err := sc.BufferAlloc(dw, rel)
	if err != nil {
		t.Fatal(err)
	}
	start := int(b.start)
	var segs [][]byte
	prev := 0
	for _, c := range cuts {
		if c > prev && c < len(data) {
			segs = append(segs, data[prev:c])
			prev = c
		}
	}
	segs = append(segs, data[prev:])
	if err := b.CopySegs(pbc, segs); err != nil {
		t.Fatal(err)
	}
	return start, pbc
}
