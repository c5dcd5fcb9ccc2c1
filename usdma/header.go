package usdma

import (
	"encoding/binary"
	"fmt"
)

// HeaderSize is the size of a packet header template (sizeof(struct hfi1_pkt_header)): PBC 8,
// LRH 8, BTH 12, KDETH 36 bytes. It is also the size of an AHG entry.
const HeaderSize = 64

// Byte offsets of the header's parts, and the dword indices the AHG updates address
// (set_txreq_header_ahg: PBC dword 0, LRH.PktLen dword 3, BTH.PSN dword 6, KDETH.Offset dword 15).
const (
	offPBC      = 0  // __le16 pbc[4]
	offLRH      = 8  // __be16 lrh[4]
	offBTH      = 16 // __be32 bth[3]
	offKDETH    = 28 // struct hfi1_kdeth_header: __le32 ver_tid_offset, __le16 jkey, hcrc, __le32 swdata[7]
	offJKey     = 32
	offSwdata   = 36
	offKOffset  = offSwdata + 6*4 // swdata[6]: the eager offset (req->koffset)
	dwPBC       = offPBC / 4
	dwLRHLen    = (offLRH + 4) / 4 // lrh[2] (PktLen) and lrh[3] (SLID)
	dwBTHPSN    = (offBTH + 8) / 4 // bth[2]
	dwKOffset   = offKOffset / 4
	lrhToICRC   = HeaderSize - 8 + 4 // get_lrh_len: (sizeof(hdr) - sizeof(pbc)) + 4-byte ICRC
	pbcLenMask  = 0xfff              // PBC.LengthDWs, pbc[0] 11:0
	psnMask     = 0xffffff           // BTH.PSN without HFI1_CAP_EXTENDED_PSN
	psnMaskExt  = 0x7fffffff         // with it
	bthAckReq   = 1 << 31            // BTH.A
	lnhMask     = 0x3                // LRH.LNH, lrh[0] 1:0
	lnhGRH      = 0x3                // HFI1_LRH_GRH
	opcodeCheck = 0xc0               // USER_OPCODE_CHECK_VAL and _MASK: PSM opcodes are 0xC0..0xFF
)

// Header is a packet header in the layout of struct hfi1_pkt_header, byte for byte as the uapi
// declares it: PBC as little-endian 16-bit words, LRH as big-endian 16-bit words, BTH as
// big-endian 32-bit words, KDETH as little-endian words. It is the header template of a
// request and the header each packet carries on the wire. The accessors read and write the
// fields the packet queue uses; other bytes are the caller's.
type Header [HeaderSize]byte

func (h *Header) pbc(i int) uint16       { return binary.LittleEndian.Uint16(h[offPBC+2*i:]) }
func (h *Header) setPBC(i int, v uint16) { binary.LittleEndian.PutUint16(h[offPBC+2*i:], v) }
func (h *Header) lrh(i int) uint16       { return binary.BigEndian.Uint16(h[offLRH+2*i:]) }
func (h *Header) setLRH(i int, v uint16) { binary.BigEndian.PutUint16(h[offLRH+2*i:], v) }
func (h *Header) bth(i int) uint32       { return binary.BigEndian.Uint32(h[offBTH+4*i:]) }
func (h *Header) setBTH(i int, v uint32) { binary.BigEndian.PutUint32(h[offBTH+4*i:], v) }

// PBCLenDWs returns PBC.LengthDWs (pbc[0] 11:0): the packet's length in dwords, PBC included,
// ICRC excluded.
func (h *Header) PBCLenDWs() int { return int(h.pbc(0) & pbcLenMask) }

// VL returns PBC.VL (pbc[0] 15:12), the virtual lane the packet is sent on.
func (h *Header) VL() int { return int(h.pbc(0) >> 12) }

// SC returns the service class: LRH.SC (lrh[0] 15:12) with PBC.SC4 (pbc[1] bit 14) as bit 4.
func (h *Header) SC() int { return int(h.lrh(0)>>12) | int(h.pbc(1)>>14&1)<<4 }

// LNH returns LRH.LNH (lrh[0] 1:0), the next-header code (3 is a GRH, which is refused).
func (h *Header) LNH() int { return int(h.lrh(0) & lnhMask) }

// DLID returns LRH.DLID (lrh[1]).
func (h *Header) DLID() uint16 { return h.lrh(1) }

// PktLen returns LRH.PktLen (lrh[2] 11:0) in dwords: the packet from the LRH on, ICRC included.
func (h *Header) PktLen() int { return int(h.lrh(2) & 0xfff) }

// SLID returns LRH.SLID (lrh[3]).
func (h *Header) SLID() uint16 { return h.lrh(3) }

// Opcode returns BTH.OpCode (bth[0] 31:24).
func (h *Header) Opcode() uint8 { return uint8(h.bth(0) >> 24) }

// PKey returns BTH.P_Key (bth[0] 15:0).
func (h *Header) PKey() uint16 { return uint16(h.bth(0)) }

// DestQP returns BTH.DestQP (bth[1] 23:0).
func (h *Header) DestQP() uint32 { return h.bth(1) & 0xffffff }

// PSN returns BTH.PSN (bth[2] 30:0; the packet queue masks it to 24 bits unless extended PSNs
// are on).
func (h *Header) PSN() uint32 { return h.bth(2) &^ bthAckReq }

// AckReq reports BTH.A (bth[2] bit 31), set on a request's last packet.
func (h *Header) AckReq() bool { return h.bth(2)&bthAckReq != 0 }

// JKey returns KDETH.J_KEY.
func (h *Header) JKey() uint16 { return binary.LittleEndian.Uint16(h[offJKey:]) }

// Offset returns KDETH swdata[6], the eager offset: the byte offset of the packet's payload
// in the message (req->koffset).
func (h *Header) Offset() uint32 { return binary.LittleEndian.Uint32(h[offKOffset:]) }

func (h *Header) setOffset(v uint32) { binary.LittleEndian.PutUint32(h[offKOffset:], v) }

// Template describes a request's header template. Header builds the bytes.
type Template struct {
	VL     uint8  // PBC.VL; LRH.SC is the same value (the queue maps SC n to VL n)
	DLID   uint16 // LRH.DLID
	SLID   uint16 // LRH.SLID
	Opcode uint8  // BTH.OpCode; must be a PSM opcode, 0xC0..0xFF
	PKey   uint16 // BTH.P_Key
	DestQP uint32 // BTH.DestQP (24 bits)
	PSN    uint32 // BTH.PSN of the first packet
	JKey   uint16 // KDETH.J_KEY
	Offset uint32 // KDETH swdata[6]: the eager offset of the first packet
}

// MaxFirstLen is the largest payload Template.Header takes for a first packet: the header and
// the payload padded to a dword within MAX_SDMA_PKT_SIZE, which also keeps PBC.LengthDWs within
// its 12 bits.
const MaxFirstLen = (MaxSDMAPktSize - HeaderSize) &^ 3

// Header returns the template's header for a first packet of firstLen payload bytes: the
// lengths (PBC.LengthDWs, LRH.PktLen) are those of that packet, as PSM fills them in, and
// LRH.LNH is 2 (BTH follows).
//
// A firstLen outside 0..MaxFirstLen has no such header (its lengths do not fit their fields):
// Header returns a zero Header and an error matching ErrInvalid that names the length.
func (t Template) Header(firstLen int) (Header, error) {
	if firstLen < 0 || firstLen > MaxFirstLen {
		return Header{}, fmt.Errorf("usdma: Template.Header: first packet length %d out of 0..%d: %w", firstLen, MaxFirstLen, ErrInvalid)
	}
	return t.header(firstLen), nil
}

// header is Header without the length's check: Message's lengths out of range come from a
// fragment size that Submit refuses.
func (t Template) header(firstLen int) Header {
	var h Header
	lrhLen := lrhLen(padLen(firstLen))
	h.setPBC(0, uint16(t.VL&0xf)<<12|lrhToPBC(lrhLen))
	h.setLRH(0, uint16(t.VL&0xf)<<12|0x2)
	h.setLRH(1, t.DLID)
	h.setLRH(2, uint16(lrhLen>>2))
	h.setLRH(3, t.SLID)
	h.setBTH(0, uint32(t.Opcode)<<24|uint32(t.PKey))
	h.setBTH(1, t.DestQP&0xffffff)
	h.setBTH(2, t.PSN&psnMaskExt)
	binary.LittleEndian.PutUint16(h[offJKey:], t.JKey)
	h.setOffset(t.Offset)
	return h
}

// padLen rounds n up to whole dwords (hfi1: pad_len).
func padLen(n int) int { return (n + 3) &^ 3 }

// lrhLen is LRH.PktLen in bytes for a payload of n (already padded) bytes (hfi1: get_lrh_len).
func lrhLen(n int) int { return lrhToICRC + n }

// lrhToPBC converts an LRH length in bytes to PBC.LengthDWs (hfi1: LRH2PBC).
func lrhToPBC(lrh int) uint16 { return uint16((lrh>>2)+1) & pbcLenMask }

// pbcToLRH converts PBC.LengthDWs to an LRH length in bytes (hfi1: PBC2LRH).
func pbcToLRH(pbc uint16) int { return int(pbc&pbcLenMask)<<2 - 4 }
