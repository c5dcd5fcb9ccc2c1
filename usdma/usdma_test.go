package usdma

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/leakcheck"
	"github.com/gosdma/gosdma/sdma"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// recSink records every packet's bytes and its segment (descriptor) lengths.
type recSink struct {
	mu   sync.Mutex
	pkts [][]byte
	segs [][]int
}

func (s *recSink) Deliver(_ int, segs [][]byte) error {
	var b []byte
	var ls []int
	for _, sg := range segs {
		b = append(b, sg...)
		ls = append(ls, len(sg))
	}
	s.mu.Lock()
	s.pkts = append(s.pkts, b)
	s.segs = append(s.segs, ls)
	s.mu.Unlock()
	return nil
}

func (s *recSink) packets() ([][]byte, [][]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.pkts...), append([][]int(nil), s.segs...)
}

func testDevice(t testing.TB, cfg sdma.Config) *sdma.Device {
	t.Helper()
	dev, err := sdma.NewDevice(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	return dev
}

func testIOMMU(t testing.TB) *dma.IOMMU {
	t.Helper()
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	require.NoError(t, err)
	return m
}

func testQueue(t testing.TB, cfg Config) *PktQ {
	t.Helper()
	pq, err := New(cfg)
	require.NoError(t, err)
	closeAtEnd(t, pq)
	return pq
}

// closeAtEnd closes pq when the test ends, giving its packets 10 s to complete.
func closeAtEnd(t testing.TB, pq *PktQ) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = pq.Close(ctx)
	})
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func waitSlot(t testing.TB, pq *PktQ, slot int) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return pq.Wait(ctx, slot)
}

var testTemplate = Template{VL: 0, DLID: 0x1234, SLID: 0x0042, Opcode: 0xc1, PKey: 0xffff, DestQP: 0x80, PSN: 0xfffffe, JKey: 7, Offset: 0x1fff0}

// TestHeadersByHand sends one multi-packet request of three vectors through a capturing sink,
// with and without AHG, and checks every header field of every packet against values computed
// here by hand from the template (written with encoding/binary, not with Header's setters):
// PSN = template PSN + k wrapping at 2^24, BTH.A only on the last packet, the eager offset
// growing by each packet's payload, PBC and LRH lengths from the payload, every other byte the
// template's; and the payloads byte-identical and in order, each piece ending at a page end.
func TestHeadersByHand(t *testing.T) {
	for _, tc := range []struct {
		ahg, registered bool
	}{{true, true}, {false, true}, {true, false}, {false, false}} {
		ahg := tc.ahg
		name := map[bool]string{true: "ahg=on", false: "ahg=off"}[ahg] + map[bool]string{true: "/pin=registered", false: "/pin=mapped"}[tc.registered]
		t.Run(name, func(t *testing.T) {
			sink := &recSink{}
			var m dma.Mapper = testIOMMU(t)
			if !tc.registered {
				m = struct{ dma.Mapper }{m} // hides the Registrar: pieces are mapped per packet
			}
			dev := testDevice(t, sdma.Config{Sink: sink, Mapper: m})
			pq := testQueue(t, Config{Device: dev, DisableAHG: !ahg})
			// Vectors of odd sizes at odd page offsets, so pieces end at page ends, vector ends
			// and packet ends.
			backing := pattern(64<<10, 3)
			vecs := [][]byte{backing[100 : 100+5000], backing[20000 : 20000+8292], backing[40000 : 40000+3001]}
			var data []byte
			for _, v := range vecs {
				data = append(data, v...)
			}
			const frag = 4096
			info, hdr := Message(5, frag, testTemplate, vecs...)
			require.EqualValues(t, 4, info.NPkts) // 16293 bytes: 4096*3 + 4005
			require.NoError(t, pq.Submit(context.Background(), info, &hdr, vecs...))
			require.NoError(t, waitSlot(t, pq, 5))
			assert.Equal(t, CompEntry{Status: Complete}, pq.Comp(5))

			pkts, segs := sink.packets()
			require.Len(t, pkts, 4)
			tmpl := hdr // the template bytes
			off := 0
			for k, p := range pkts {
				n := min(frag, len(data)-off)
				padded := (n + 3) &^ 3
				require.Len(t, p, 64+padded, "packet %d length", k)
				want := make([]byte, 64)
				copy(want, tmpl[:])
				lrhDW := (56 + 4 + padded) / 4                                 // LRH..KDETH + ICRC + payload, dwords
				binary.LittleEndian.PutUint16(want[0:], 0<<12|uint16(lrhDW+1)) // PBC: VL 0, LengthDWs incl. PBC, excl. ICRC
				binary.BigEndian.PutUint16(want[12:], uint16(lrhDW))           // LRH.PktLen
				psn := (0xfffffe + uint32(k)) & 0xffffff                       // wraps after packet 1
				if k == len(pkts)-1 {
					psn |= 1 << 31
				}
				if k > 0 {
					binary.BigEndian.PutUint32(want[24:], psn)                    // BTH[2]
					binary.LittleEndian.PutUint32(want[60:], 0x1fff0+uint32(off)) // KDETH swdata[6]
				}
				assert.Equal(t, want, p[:64], "packet %d header", k)
				assert.Equal(t, data[off:off+n], p[64:64+n], "packet %d payload", k)
				assert.Equal(t, make([]byte, padded-n), p[64+n:], "packet %d pad", k)

				// Descriptors: the header (unless AHG built it), then pieces that end at page
				// ends of the vector memory, vector ends or the packet's end; then the pad.
				var wantSegs []int
				wantSegs = append(wantSegs, 64)
				for q := off; q < off+n; {
					vi, vo := locate(vecs, q)
					a := addrOf(vecs[vi]) + uintptr(vo)
					piece := min(dma.PageSize-int(a%dma.PageSize), off+n-q, len(vecs[vi])-vo)
					wantSegs = append(wantSegs, piece)
					q += piece
				}
				if padded != n {
					wantSegs = append(wantSegs, padded-n)
				}
				assert.Equal(t, wantSegs, segs[k], "packet %d segments", k)
				off += n
			}
			st := pq.Stats()
			if ahg {
				assert.EqualValues(t, 3, st.AHGPackets)
				assert.EqualValues(t, 1, st.FullHeaders)
			} else {
				assert.EqualValues(t, 0, st.AHGPackets)
				assert.EqualValues(t, 4, st.FullHeaders)
			}
			assert.Zero(t, dev.Engine(0).AHGInUse(), "the AHG entry was given back")
			if tc.registered {
				assert.Zero(t, st.Pins.Unregistered)
			} else {
				assert.EqualValues(t, 3, st.Pins.Unregistered)
			}
		})
	}
}

// locate returns the vector and offset of byte q of the concatenation.
func locate(vecs [][]byte, q int) (int, int) {
	for i, v := range vecs {
		if q < len(v) {
			return i, q
		}
		q -= len(v)
	}
	panic("past the data")
}
