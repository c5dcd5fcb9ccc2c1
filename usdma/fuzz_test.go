package usdma

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/gosdma/gosdma/sdma"
)

// FuzzMessage sends one request of fuzzed shape (data length, fragment size, how the data is
// cut into vectors and where they start in memory, the template's PSN and offset, AHG on or
// off, extended PSNs) and checks every packet on the wire against a model that knows only the
// uapi layout: packet k carries bytes [off_k, off_k+len_k) of the concatenated vectors, padded to
// 4, PSN = template + k masked to 24 or 31 bits, BTH.A on the last packet only (and not on a
// lone one), offset = template offset + off_k, PBC and LRH lengths from len_k; the slot ends
// COMPLETE exactly once; with AHG on, every packet after the first is built by the engine's AHG.
func FuzzMessage(f *testing.F) {
	f.Add(uint32(16293), uint8(64), uint16(100), uint8(3), uint32(0xfffffe), uint32(0x1fff0), true, false)
	f.Add(uint32(3), uint8(1), uint16(0), uint8(1), uint32(0), uint32(0), false, false)
	f.Add(uint32(99999), uint8(0), uint16(4095), uint8(8), uint32(0x7ffffff0), uint32(1), true, true) // 1563 packets: the ring fills
	sink := &recSink{}
	dev, err := sdma.NewDevice(sdma.Config{RingSize: 1024, Sink: sink}) // its own goroutine: big requests wait for room
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = dev.Close() })
	backing := pattern(1<<20, 5)
	f.Fuzz(func(t *testing.T, n uint32, fragBlocks uint8, start uint16, nvec uint8, psn, koff uint32, ahg, ext bool) {
		size := int(n % 100000)
		if size == 0 {
			size = 1
		}
		frag := int(fragBlocks%160+1) * PIOBlockSize // 64..10240
		nv := int(nvec%MaxVectorsPerReq) + 1
		if nv > size {
			nv = size
		}
		base := int(start % 4096)
		// nv vectors of near-equal length, each starting a few bytes after the last ended.
		var vecs [][]byte
		var data []byte
		at := base
		for i := range nv {
			l := size / nv
			if i < size%nv {
				l++
			}
			vecs = append(vecs, backing[at:at+l])
			data = append(data, backing[at:at+l]...)
			at += l + 3
		}
		pq, err := New(Config{Device: dev, Slots: 1, DisableAHG: !ahg, ExtendedPSN: ext})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = pq.Close(context.Background()) }()
		ends := 0
		testHooks(pq).onEnd = func(int, CompState) { ends++ }
		tp := testTemplate
		tp.PSN, tp.Offset = psn&psnMaskExt, koff
		info, hdr := Message(0, frag, tp, vecs...)
		sink.mu.Lock()
		sink.pkts, sink.segs = nil, nil
		sink.mu.Unlock()
		if err := pq.Submit(context.Background(), info, &hdr, vecs...); err != nil {
			t.Fatal(err)
		}
		if err := waitSlot(t, pq, 0); err != nil {
			t.Fatal(err)
		}
		if e := pq.Comp(0); e.Status != Complete || ends != 1 {
			t.Fatalf("slot %+v, %d ends", e, ends)
		}
		pkts, _ := sink.packets()
		if len(pkts) != int(info.NPkts) {
			t.Fatalf("%d packets, want %d", len(pkts), info.NPkts)
		}
		// The headers below are checked whoever built them: with AHG on, a multi-packet
		// request's later packets must be the engine's AHG builds (this queue is alone on the
		// device's engines, so an entry is free), else the AHG path goes unchecked.
		st, np := pq.Stats(), uint64(info.NPkts)
		wantAHG := uint64(0)
		if ahg && np > 1 {
			wantAHG = np - 1
		}
		if st.Packets != np || st.AHGPackets != wantAHG || st.FullHeaders != np-wantAHG || st.AHGFallbacks != 0 {
			t.Fatalf("stats %+v for %d packets, AHG %v", st, np, ahg)
		}
		mask := uint32(psnMask)
		if ext {
			mask = psnMaskExt
		}
		off := 0
		for k, p := range pkts {
			l := min(frag, size-off)
			padded := (l + 3) &^ 3
			want := make([]byte, HeaderSize, HeaderSize+padded)
			copy(want, hdr[:])
			lrhDW := (HeaderSize - 8 + 4 + padded) / 4
			binary.LittleEndian.PutUint16(want[0:], uint16(lrhDW+1)) // VL 0
			binary.BigEndian.PutUint16(want[12:], uint16(lrhDW))
			if k > 0 {
				v := (tp.PSN + uint32(k)) & mask
				if k == len(pkts)-1 {
					v |= 1 << 31
				}
				binary.BigEndian.PutUint32(want[24:], v)
				binary.LittleEndian.PutUint32(want[60:], koff+uint32(off))
			}
			want = append(want, data[off:off+l]...)
			want = append(want, make([]byte, padded-l)...)
			if !bytes.Equal(p, want) {
				t.Fatalf("packet %d of %d (len %d, frag %d, ahg %v):\n got %x\nwant %x", k, len(pkts), l, frag, ahg, p[:HeaderSize], want[:HeaderSize])
			}
			off += l
		}
	})
}
