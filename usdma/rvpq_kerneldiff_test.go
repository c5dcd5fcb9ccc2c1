package usdma

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// kernelEagerPackets is an independent transcription of what hfi1's user_sdma puts on the wire
// for an EAGER request (hfi1_user_sdma_process_request, user_sdma_send_pkts,
// compute_data_length, user_sdma_txadd_ahg, set_txreq_header, set_txreq_header_ahg,
// set_pkt_bth_psn): the 64-byte header of every packet and its payload, padded to a dword
// (pbc[2] zeroed unless keepRate: HFI1_CAP_STATIC_RATE_CTRL in the user capabilities). With
// ahg (npkts > 1 and an AHG entry) the header of packet k > 0 is the one the chip builds: packet
// 0's header as stored (AHG_COPY), patched by the update words. Written with encoding/binary on
// the uapi layout, not with Header's accessors.
func kernelEagerPackets(tmpl Header, data []byte, frag, npkts int, ahg, extPSN, keepRate bool) [][]byte {
	le16 := binary.LittleEndian.Uint16
	be16 := binary.BigEndian.Uint16
	be32 := binary.BigEndian.Uint32
	pad := func(n int) int { return (n + 3) &^ 3 }
	lrh2pbc := func(l int) uint16 { return uint16((l>>2)+1) & 0xfff }
	pbc2lrh := func(p uint16) int { return int(p&0xfff)<<2 - 4 }
	mask := uint32(0xffffff)
	if extPSN {
		mask = 0x7fffffff
	}
	req := tmpl
	if !keepRate {
		binary.LittleEndian.PutUint16(req[4:], 0) // req->hdr.pbc[2] = 0
	}
	koffset := binary.LittleEndian.Uint32(req[60:])
	var stored Header // the AHG entry
	var out [][]byte
	sent := 0
	for k := range npkts {
		var datalen int
		switch {
		case k == 0 && len(data) < 4:
			datalen = len(data)
		case k == 0:
			datalen = int(be16(req[12:]))<<2 - 60
		default:
			datalen = min(len(data)-sent, frag)
		}
		lrhlen := 60 + pad(datalen)
		last := k == npkts-1
		var h Header
		switch {
		case ahg && k == 0:
			h = req
			if p := le16(h[0:]); pbc2lrh(p) != lrhlen {
				binary.LittleEndian.PutUint16(h[0:], p&0xf000|lrh2pbc(lrhlen))
			}
			stored = h
		case ahg:
			h = stored
			if pbc2lrh(le16(req[0:])) != lrhlen {
				p := le16(h[0:])
				binary.LittleEndian.PutUint16(h[0:], p&^0xfff|lrh2pbc(lrhlen)) // 12 bits of dword 0
				binary.BigEndian.PutUint16(h[12:], uint16(lrhlen>>2))          // 16 bits of dword 3
			}
			psn := (be32(req[24:]) + uint32(k)) & mask
			if last {
				psn |= 1 << 31
			}
			binary.BigEndian.PutUint32(h[24:], psn)
			binary.LittleEndian.PutUint32(h[60:], koffset)
		default:
			h = req
			if p := le16(h[0:]); pbc2lrh(p) != lrhlen {
				binary.LittleEndian.PutUint16(h[0:], p&0xf000|lrh2pbc(lrhlen))
				binary.BigEndian.PutUint16(h[12:], uint16(lrhlen>>2))
				if k == 2 {
					copy(req[0:2], h[0:2])
					copy(req[12:14], h[12:14])
				}
			}
			if k > 0 {
				psn := ((be32(h[24:]) & mask) + uint32(k)) & mask
				if last {
					psn |= 1 << 31
				}
				binary.BigEndian.PutUint32(h[24:], psn)
				binary.LittleEndian.PutUint32(h[60:], koffset)
			}
		}
		p := append([]byte(nil), h[:]...)
		p = append(p, data[sent:sent+datalen]...)
		p = append(p, make([]byte, pad(datalen)-datalen)...)
		out = append(out, p)
		sent += datalen
		koffset += uint32(datalen)
	}
	return out
}

// TestKernelDiffEagerHeaders sends random EAGER requests (1..8 vectors at random offsets, random
// fragment sizes, a first packet shorter than a fragment, PSNs and eager offsets near their
// wraps, BTH.A set in the template, a PBC length that disagrees with the LRH, garbage in
// pbc[1..3]) through queues with and without AHG and extended PSNs, and compares every packet on
// the wire byte for byte with kernelEagerPackets.
func TestKernelDiffEagerHeaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(0x5d3a, 17))
	backing := pattern(1<<20, 9)
	for _, ahg := range []bool{true, false} {
		for _, ext := range []bool{false, true} {
			t.Run(fmt.Sprintf("ahg=%v/extpsn=%v", ahg, ext), func(t *testing.T) {
				sink := &recSink{}
				dev := testDevice(t, sdma.Config{Sink: sink, RingSize: 4096, Engines: 8}) // 8 VLs
				// pbc[2] kept (HFI1_CAP_STATIC_RATE_CTRL) and zeroed, each with and without AHG
				keepRate := ahg != ext
				pq := testQueue(t, Config{Device: dev, DisableAHG: !ahg, ExtendedPSN: ext, DisableStaticRate: !keepRate})
				cases := 150
				if testing.Short() {
					cases = 60
				}
				for c := range cases {
					frag := 64 * (1 + rng.IntN(64))
					nv := 1 + rng.IntN(MaxVectorsPerReq)
					vecs := make([][]byte, nv)
					n := 0
					for i := range vecs {
						l := 1 + rng.IntN(3*frag)
						if rng.IntN(8) == 0 {
							l = 1 + rng.IntN(5)
						}
						o := rng.IntN(len(backing) - l)
						vecs[i] = backing[o : o+l]
						n += l
					}
					first := min(n, frag)
					if n >= 8 && rng.IntN(3) == 0 {
						first = 4 * (1 + rng.IntN(min(n, frag)/4)) // a shorter first packet
					}
					tm := Template{VL: uint8(rng.IntN(8)), DLID: uint16(rng.Uint32()), SLID: uint16(rng.Uint32()),
						Opcode: 0xc0 | uint8(rng.IntN(64)), PKey: uint16(rng.Uint32()), DestQP: rng.Uint32(),
						PSN: rng.Uint32(), JKey: uint16(rng.Uint32()), Offset: rng.Uint32()}
					if rng.IntN(2) == 0 {
						tm.PSN = 0xffffff - uint32(rng.IntN(4))
					}
					if rng.IntN(2) == 0 {
						tm.Offset = 0xffffffff - uint32(rng.IntN(3*frag))
					}
					hdr, _ := tm.Header(first)
					if rng.IntN(4) == 0 {
						binary.BigEndian.PutUint32(hdr[24:], binary.BigEndian.Uint32(hdr[24:])|1<<31) // BTH.A in the template
					}
					if rng.IntN(4) == 0 { // a PBC length of its own, maybe a fragment's
						l := lrhLen(frag)
						if rng.IntN(2) == 0 {
							l = 60 + 4*rng.IntN(100)
						}
						binary.LittleEndian.PutUint16(hdr[0:], binary.LittleEndian.Uint16(hdr[0:])&0xf000|lrhToPBC(l))
					}
					binary.LittleEndian.PutUint16(hdr[2:], uint16(rng.Uint32())&^(1<<14)) // pbc[1], SC4 clear
					binary.LittleEndian.PutUint16(hdr[4:], uint16(rng.Uint32()))          // pbc[2]: kept or sanitised
					binary.LittleEndian.PutUint16(hdr[6:], uint16(rng.Uint32()))
					npkts := 1
					if rest := n - firstLen(&hdr, n); rest > 0 {
						npkts += (rest + frag - 1) / frag
					}
					info := ReqInfo{Ctrl: Ctrl(Eager, nv), NPkts: uint16(npkts), FragSize: uint16(frag), CompIdx: uint16(c % 64)}
					var data []byte
					for _, v := range vecs {
						data = append(data, v...)
					}
					want := kernelEagerPackets(hdr, data, frag, npkts, ahg && npkts > 1, ext, keepRate)
					sink.mu.Lock()
					sink.pkts, sink.segs = nil, nil
					sink.mu.Unlock()
					require.NoError(t, pq.Submit(context.Background(), info, &hdr, vecs...), "case %d", c)
					require.NoError(t, waitSlot(t, pq, int(info.CompIdx)), "case %d", c)
					got, _ := sink.packets()
					require.Len(t, got, len(want), "case %d: packets", c)
					for k := range want {
						require.Equal(t, want[k][:HeaderSize], got[k][:HeaderSize], "case %d (n %d, frag %d, first %d, %d vecs): packet %d of %d header", c, n, frag, first, nv, k, npkts)
						require.Equal(t, want[k], got[k], "case %d: packet %d payload", c, k)
					}
				}
			})
		}
	}
}
