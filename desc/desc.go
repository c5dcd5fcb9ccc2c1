// Package desc is the 128-bit hfi1 SDMA descriptor: its bit layout, accessors and builders,
// and the AHG (automatic header generation) update words.
//
// A descriptor is two little-endian 64-bit words (hfi1: struct hw_sdma_desc { __le64 qw[2]; }):
//
//	qw0  63     FIRST_DESC flag        (SDMA_DESC0_FIRST_DESC_FLAG)
//	     62     LAST_DESC flag         (SDMA_DESC0_LAST_DESC_FLAG)
//	     61:48  byte count, 14 bits    (SDMA_DESC0_BYTE_COUNT_SHIFT/_WIDTH)
//	     47:0   bus address, 48 bits   (SDMA_DESC0_PHY_ADDR_SHIFT/_WIDTH)
//	qw1  63:32  first AHG update word  (SDMA_DESC1_HEADER_UPDATE1_SHIFT/_WIDTH)
//	     15:13  header (AHG) mode      (SDMA_DESC1_HEADER_MODE_SHIFT/_WIDTH)
//	     12:8   AHG entry index 0..31  (SDMA_DESC1_HEADER_INDEX_SHIFT/_WIDTH)
//	     7:4    header dwords          (SDMA_DESC1_HEADER_DWS_SHIFT/_WIDTH)
//	     3:2    generation             (SDMA_DESC1_GENERATION_SHIFT/_WIDTH)
//	     1      INT_REQ flag           (SDMA_DESC1_INT_REQ_FLAG)
//	     0      HEAD_TO_HOST flag      (SDMA_DESC1_HEAD_TO_HOST_FLAG)
//
// In a txreq's software copy the generation field holds the mapping type instead (MapNone,
// MapSingle, MapPage); the ring overwrites it with the slot's generation when the descriptor is
// written (hfi1: submit_tx's add_gen, the ring-pass count mod 4 of each slot).
//
// Unlike the kernel's make_tx_sdma_desc, which silently masks, every setter here refuses an
// out-of-range value with a *FieldError naming the field; FieldError matches ErrRange with
// errors.Is. Getters never fail. Desc is a plain value: it is safe to copy and to share read-only.
package desc

import (
	"errors"
	"fmt"
)

// Desc is one 16-byte SDMA descriptor (hfi1: struct hw_sdma_desc, and the qw[2] of struct sdma_desc).
type Desc struct {
	// Qw0 is the first quadword (hfi1: qw[0]): FirstFlag, LastFlag, the byte count (bits 61:48)
	// and the 48-bit bus address (bits 47:0). Written by the Set methods (or whole, by the
	// ring's writer), read by the engine model and the getters.
	Qw0 uint64
	// Qw1 is the second quadword (hfi1: qw[1]): the first AHG update word (bits 63:32), the
	// header mode, index and dword count, the 2-bit Generation, IntReqFlag and HeadToHostFlag.
	// Written and read as Qw0.
	Qw1 uint64
}

// Size is the size of a descriptor in bytes.
const Size = 16

// Bit positions and widths, as in hfi1's sdma.h.
const (
	FirstFlag = uint64(1) << 63 // SDMA_DESC0_FIRST_DESC_FLAG
	LastFlag  = uint64(1) << 62 // SDMA_DESC0_LAST_DESC_FLAG

	ByteCountShift = 48 // SDMA_DESC0_BYTE_COUNT_SHIFT
	ByteCountWidth = 14 // SDMA_DESC0_BYTE_COUNT_WIDTH
	ByteCountMask  = uint64(1)<<ByteCountWidth - 1
	ByteCountSMask = ByteCountMask << ByteCountShift

	PhyAddrShift = 0  // SDMA_DESC0_PHY_ADDR_SHIFT
	PhyAddrWidth = 48 // SDMA_DESC0_PHY_ADDR_WIDTH
	PhyAddrMask  = uint64(1)<<PhyAddrWidth - 1
	PhyAddrSMask = PhyAddrMask << PhyAddrShift

	Update1Shift = 32 // SDMA_DESC1_HEADER_UPDATE1_SHIFT
	Update1Width = 32
	Update1Mask  = uint64(1)<<Update1Width - 1
	Update1SMask = Update1Mask << Update1Shift

	HeaderModeShift = 13 // SDMA_DESC1_HEADER_MODE_SHIFT
	HeaderModeWidth = 3
	HeaderModeMask  = uint64(1)<<HeaderModeWidth - 1
	HeaderModeSMask = HeaderModeMask << HeaderModeShift

	HeaderIndexShift = 8 // SDMA_DESC1_HEADER_INDEX_SHIFT
	HeaderIndexWidth = 5
	HeaderIndexMask  = uint64(1)<<HeaderIndexWidth - 1
	HeaderIndexSMask = HeaderIndexMask << HeaderIndexShift

	HeaderDWsShift = 4 // SDMA_DESC1_HEADER_DWS_SHIFT
	HeaderDWsWidth = 4
	HeaderDWsMask  = uint64(1)<<HeaderDWsWidth - 1
	HeaderDWsSMask = HeaderDWsMask << HeaderDWsShift

	GenerationShift = 2 // SDMA_DESC1_GENERATION_SHIFT
	GenerationWidth = 2
	GenerationMask  = uint64(1)<<GenerationWidth - 1
	GenerationSMask = GenerationMask << GenerationShift

	IntReqFlag     = uint64(1) << 1 // SDMA_DESC1_INT_REQ_FLAG
	HeadToHostFlag = uint64(1) << 0 // SDMA_DESC1_HEAD_TO_HOST_FLAG
)

// Limits.
const (
	MaxByteCount  = 1<<ByteCountWidth - 1 // 16383, the byte count field's limit
	MaxPktSize    = 16*1024 - 1           // MAX_SDMA_PKT_SIZE
	MaxDesc       = 64                    // MAX_DESC, "Hardware limit"
	NumDesc       = 6                     // NUM_DESC, inline descriptors in a txreq
	MaxAddr       = PhyAddrMask           // highest 48-bit bus address
	NumAHGEntries = 32                    // AHG entries per engine (index 0..31)
	MaxAHGWords   = 9                     // update words per packet
)

// MapType says how a txreq's descriptor was mapped, so that its clean knows how to unmap it
// (hfi1: SDMA_MAP_*). It is kept in the generation field (qw1 3:2) of the txreq's software copy;
// the ring overwrites that field with the slot's Generation.
type MapType uint8

// Mapping types (SDMA_MAP_NONE, SDMA_MAP_SINGLE, SDMA_MAP_PAGE).
const (
	MapNone   MapType = 0
	MapSingle MapType = 1
	MapPage   MapType = 2
)

// Generation is a descriptor's ring generation, qw1 3:2: (ring index >> log2(ring size)) & 3
// (hfi1: add_gen). The ring stamps it per slot; the hardware model checks it. Package ring uses
// the same type.
type Generation uint8

// HeaderMode is a first descriptor's AHG header mode, qw1 15:13 (hfi1: SDMA_AHG_*).
type HeaderMode uint8

// AHG header modes (SDMA_AHG_NO_AHG … SDMA_AHG_APPLY_UPDATE3). The engine relies on these values:
// for a mode above ApplyUpdate1, mode>>1 edit descriptors follow the first descriptor.
const (
	AHGNoAHG        HeaderMode = 0
	AHGCopy         HeaderMode = 1
	AHGApplyUpdate1 HeaderMode = 2
	AHGApplyUpdate2 HeaderMode = 3
	AHGApplyUpdate3 HeaderMode = 4
)

// AHG update word layout (sdma_build_ahg_descriptor).
const (
	AHGUpdateEnableShift  = 31
	AHGFieldStartBitShift = 24
	AHGFieldStartBitMask  = 0x1f
	AHGFieldLenShift      = 20
	AHGFieldLenMask       = 0xf
	AHGIndexShift         = 16
	AHGIndexMask          = 0xf
	AHGFieldValueShift    = 0
	AHGFieldValueMask     = 0xffff
	AHGUpdateEnableFlag   = uint32(1) << AHGUpdateEnableShift
)

// ErrRange is matched (errors.Is) by every *FieldError: a value does not fit its field.
var ErrRange = errors.New("desc: value out of range")

// FieldError reports a value refused by a setter or builder, naming the field.
type FieldError struct {
	Field string // e.g. "byte count", "address", "AHG index"
	Value uint64 // the value given (a negative int: its two's complement, with Negative set)
	Max   uint64 // the largest value the field holds
	Min   uint64 // the smallest value the field holds: 1 for the AHG field length, else 0
	// Negative says that the value given was a negative int: it is int64(Value).
	Negative bool
}

// Error names the field, the value (a negative one in decimal) and the field's largest value,
// and its smallest when the value lies below the field.
func (e *FieldError) Error() string {
	if e.Negative {
		return fmt.Sprintf("desc: %s %d out of range (min %#x, max %#x)", e.Field, int64(e.Value), e.Min, e.Max)
	}
	if e.Value < e.Min {
		return fmt.Sprintf("desc: %s %#x out of range (min %#x, max %#x)", e.Field, e.Value, e.Min, e.Max)
	}
	return fmt.Sprintf("desc: %s %#x out of range (max %#x)", e.Field, e.Value, e.Max)
}

// Unwrap returns ErrRange, the sentinel every *FieldError matches (errors.Is).
func (e *FieldError) Unwrap() error { return ErrRange }

func check(field string, v, max uint64) error {
	if v > max {
		return &FieldError{Field: field, Value: v, Max: max}
	}
	return nil
}

// Make builds a software descriptor for len bytes at addr with the given mapping type in the
// generation field (hfi1: make_tx_sdma_desc, for a descriptor other than the first). The flags of
// qw0 and qw1 are clear. addr must fit 48 bits, n must be 0..16383, mapType 0..3.
func Make(addr uint64, n int, mapType MapType) (Desc, error) {
	var d Desc
	if err := d.SetAddr(addr); err != nil {
		return Desc{}, err
	}
	if err := d.SetLen(n); err != nil {
		return Desc{}, err
	}
	if err := d.SetGeneration(Generation(mapType)); err != nil {
		return Desc{}, fmt.Errorf("desc: mapping type: %w", err)
	}
	return d, nil
}

// Addr returns the 48-bit bus address (sdma_mapping_addr).
func (d Desc) Addr() uint64 { return d.Qw0 >> PhyAddrShift & PhyAddrMask }

// Len returns the byte count (sdma_mapping_len).
func (d Desc) Len() int { return int(d.Qw0 >> ByteCountShift & ByteCountMask) }

// First reports the FIRST_DESC flag.
func (d Desc) First() bool { return d.Qw0&FirstFlag != 0 }

// Last reports the LAST_DESC flag.
func (d Desc) Last() bool { return d.Qw0&LastFlag != 0 }

// Update1 returns the first AHG update word (qw1 63:32).
func (d Desc) Update1() uint32 { return uint32(d.Qw1 >> Update1Shift & Update1Mask) }

// HeaderMode returns the AHG header mode (qw1 15:13).
func (d Desc) HeaderMode() HeaderMode { return HeaderMode(d.Qw1 >> HeaderModeShift & HeaderModeMask) }

// HeaderIndex returns the AHG entry index (qw1 12:8).
func (d Desc) HeaderIndex() int { return int(d.Qw1 >> HeaderIndexShift & HeaderIndexMask) }

// HeaderDWs returns the header length in dwords (qw1 7:4), the raw field: in an APPLY_UPDATE mode
// 0 means 16 dwords, the whole 64-byte AHG entry (user_sdma passes sizeof(struct
// hfi1_pkt_header) = 64 bytes and _sdma_txreq_ahgadd masks 64>>2 = 16 to 0; sdma's hardware model
// reads it so), as an AHG field length of 16 is encoded 0 (inferred).
func (d Desc) HeaderDWs() int { return int(d.Qw1 >> HeaderDWsShift & HeaderDWsMask) }

// Generation returns qw1 3:2: the ring generation, in the ring.
func (d Desc) Generation() Generation { return Generation(d.Qw1 >> GenerationShift & GenerationMask) }

// MapType returns qw1 3:2 read as a txreq copy's mapping type (sdma_mapping_type).
func (d Desc) MapType() MapType { return MapType(d.Qw1 >> GenerationShift & GenerationMask) }

// IntReq reports the INT_REQ flag.
func (d Desc) IntReq() bool { return d.Qw1&IntReqFlag != 0 }

// HeadToHost reports the HEAD_TO_HOST flag.
func (d Desc) HeadToHost() bool { return d.Qw1&HeadToHostFlag != 0 }

// SetAddr sets the 48-bit bus address (hfi1: make_tx_sdma_desc's SDMA_DESC0_PHY_ADDR field, which
// the kernel masks to 48 bits; here an address above MaxAddr is refused).
func (d *Desc) SetAddr(addr uint64) error {
	if err := check("address", addr, PhyAddrMask); err != nil {
		return err
	}
	d.Qw0 = d.Qw0&^PhyAddrSMask | addr<<PhyAddrShift
	return nil
}

// SetLen sets the byte count, 0..16383 (hfi1: make_tx_sdma_desc's SDMA_DESC0_BYTE_COUNT field,
// which the kernel masks to 14 bits; here a negative count or one above MaxByteCount is refused).
func (d *Desc) SetLen(n int) error {
	if n < 0 {
		return &FieldError{Field: "byte count", Value: uint64(int64(n)), Max: ByteCountMask, Negative: true}
	}
	if err := check("byte count", uint64(n), ByteCountMask); err != nil {
		return err
	}
	d.Qw0 = d.Qw0&^ByteCountSMask | uint64(n)<<ByteCountShift
	return nil
}

// SetFirst sets or clears the FIRST_DESC flag (hfi1: sdma_txinit_ahg sets it in descs[0]).
func (d *Desc) SetFirst(on bool) { d.Qw0 = setFlag(d.Qw0, FirstFlag, on) }

// SetLast sets or clears the LAST_DESC flag (hfi1: _sdma_close_tx, on the last descriptor).
func (d *Desc) SetLast(on bool) { d.Qw0 = setFlag(d.Qw0, LastFlag, on) }

// SetIntReq sets or clears the INT_REQ flag (hfi1: _sdma_close_tx, from default_desc1 or
// SDMA_TXREQ_F_URGENT).
func (d *Desc) SetIntReq(on bool) { d.Qw1 = setFlag(d.Qw1, IntReqFlag, on) }

// SetHeadToHost sets or clears the HEAD_TO_HOST flag (hfi1: _sdma_close_tx, from default_desc1 or
// SDMA_TXREQ_F_URGENT).
func (d *Desc) SetHeadToHost(on bool) { d.Qw1 = setFlag(d.Qw1, HeadToHostFlag, on) }

// SetUpdate1 sets the first AHG update word, qw1 63:32; any 32-bit value fits (hfi1:
// _sdma_txreq_ahgadd puts ahg[0] there).
func (d *Desc) SetUpdate1(w uint32) { d.Qw1 = d.Qw1&^Update1SMask | uint64(w)<<Update1Shift }

// SetHeaderMode sets the AHG header mode, 0..7; the defined modes are AHGNoAHG..AHGApplyUpdate3
// (hfi1: sdma_txinit_ahg for AHG_COPY, _sdma_txreq_ahgadd for the update modes).
func (d *Desc) SetHeaderMode(mode HeaderMode) error {
	if err := check("header mode", uint64(mode), HeaderModeMask); err != nil {
		return err
	}
	d.Qw1 = d.Qw1&^HeaderModeSMask | uint64(mode)<<HeaderModeShift
	return nil
}

// SetHeaderIndex sets the AHG entry index, 0..31 (hfi1: sdma_txinit_ahg / _sdma_txreq_ahgadd's
// ahg_entry).
func (d *Desc) SetHeaderIndex(idx int) error {
	if err := checkInt("AHG index", idx, HeaderIndexMask); err != nil {
		return err
	}
	d.Qw1 = d.Qw1&^HeaderIndexSMask | uint64(idx)<<HeaderIndexShift
	return nil
}

// SetHeaderDWs sets the header length in dwords, 0..16 (hfi1: _sdma_txreq_ahgadd, ahg_hlen >> 2).
// The kernel's usual 64-byte header (user_sdma's sizeof(struct hfi1_pkt_header), 16 dwords) does
// not fit the 4-bit field: _sdma_txreq_ahgadd masks it to 0, which an APPLY_UPDATE mode reads as
// 16 (see HeaderDWs), and so does SetHeaderDWs(16), as AHGUpdate does with a field length of 16.
// Anything outside 0..16 is ErrRange.
func (d *Desc) SetHeaderDWs(dws int) error {
	if err := checkInt("header dwords", dws, HeaderDWsMask+1); err != nil {
		return err
	}
	d.Qw1 = d.Qw1&^HeaderDWsSMask | uint64(dws)&HeaderDWsMask<<HeaderDWsShift
	return nil
}

// SetGeneration sets qw1 3:2, 0..3: the mapping type in a txreq's copy (hfi1: make_tx_sdma_desc's
// type argument), the generation in the ring (the ring stamps it with WithGeneration).
func (d *Desc) SetGeneration(gen Generation) error {
	if err := check("generation", uint64(gen), GenerationMask); err != nil {
		return err
	}
	*d = d.WithGeneration(gen)
	return nil
}

// WithGeneration returns d with qw1 3:2 replaced by gen&3, without checking: the ring's stamping
// step (hfi1: add_gen), where gen is (index >> log2(size)) & 3 and always fits.
func (d Desc) WithGeneration(gen Generation) Desc {
	d.Qw1 = d.Qw1&^GenerationSMask | (uint64(gen)&GenerationMask)<<GenerationShift
	return d
}

// EditDescs returns how many AHG edit descriptors follow a first descriptor with this header mode:
// mode>>1 for a mode above ApplyUpdate1, else 0 (the skip of hfi1's submit_tx and __sdma_txclean).
// Edit descriptors carry update words in both quadwords and are neither stamped nor unmapped.
//
// mode is a header mode as its 3-bit field (qw1 15:13) holds it, 0..7: Desc.HeaderMode's value,
// or one of the constants (the undefined modes 5..7 give 2, 3 and 3, the kernel's skip; hfi1's
// ahg_mode reads the masked field). A larger value is not masked: EditDescs(200) is 100, not the
// 0 of the field's 200&7. Masking would cost an AND per packet on the descriptor paths, which
// pass HeaderMode's value, masked already (the compiler does not fold the second mask: +26
// instructions per 8-packet AHG message); a caller holding a raw value masks it with
// HeaderModeMask first.
func EditDescs(mode HeaderMode) int {
	if mode > AHGApplyUpdate1 {
		return int(mode >> 1)
	}
	return 0
}

// AHGUpdate builds one AHG update word (hfi1: sdma_build_ahg_descriptor): enable (31), start bit
// (28:24, 0..31), field length in bits (23:20), dword index (19:16, 0..15), value (15:0).
//
// The field length is 1..16 bits. The 4-bit field cannot hold 16: the kernel's user_sdma passes 16
// through the mask, so 16 is encoded as 0 (and DecodeAHG reads 0 back as 16) (inferred). The field
// must lie inside its dword: startBit+bits <= 32. Unlike the kernel, which masks, bad values are
// refused with a *FieldError.
func AHGUpdate(data uint16, dwIndex, startBit, bits uint8) (uint32, error) {
	if err := check("AHG start bit", uint64(startBit), AHGFieldStartBitMask); err != nil {
		return 0, err
	}
	if bits == 0 || bits > 16 {
		return 0, &FieldError{Field: "AHG field length", Value: uint64(bits), Max: 16, Min: 1}
	}
	if int(startBit)+int(bits) > 32 {
		return 0, &FieldError{Field: "AHG field end bit", Value: uint64(startBit) + uint64(bits), Max: 32}
	}
	if err := check("AHG dword index", uint64(dwIndex), AHGIndexMask); err != nil {
		return 0, err
	}
	return AHGUpdateEnableFlag |
		uint32(startBit)<<AHGFieldStartBitShift |
		uint32(bits&AHGFieldLenMask)<<AHGFieldLenShift |
		uint32(dwIndex)<<AHGIndexShift |
		uint32(data)<<AHGFieldValueShift, nil
}

// AHGWord is a decoded AHG update word (the arguments of hfi1's sdma_build_ahg_descriptor, plus
// the enable bit).
type AHGWord struct {
	Enable   bool   // the update-enable bit (AHGUpdateEnableFlag): the chip applies the word
	StartBit uint8  // first bit of the field within its header dword, 0..31
	Bits     uint8  // the field's width in bits, 1..16 (16 is encoded as 0)
	DWIndex  uint8  // which dword of the saved header the field is in, 0..15
	Value    uint16 // the new value of the field
}

// DecodeAHG splits an AHG update word into its fields: the inverse of AHGUpdate (the kernel has no
// decoder; the layout is sdma_build_ahg_descriptor's). A field length of 0 reads as 16.
func DecodeAHG(w uint32) AHGWord {
	return AHGWord{
		Enable:   w&AHGUpdateEnableFlag != 0,
		StartBit: uint8(w >> AHGFieldStartBitShift & AHGFieldStartBitMask),
		Bits:     ahgBits(uint8(w >> AHGFieldLenShift & AHGFieldLenMask)),
		DWIndex:  uint8(w >> AHGIndexShift & AHGIndexMask),
		Value:    uint16(w >> AHGFieldValueShift & AHGFieldValueMask),
	}
}

func ahgBits(b uint8) uint8 {
	if b == 0 {
		return 16
	}
	return b
}

func checkInt(field string, v int, max uint64) error {
	if v < 0 {
		return &FieldError{Field: field, Value: uint64(int64(v)), Max: max, Negative: true}
	}
	return check(field, uint64(v), max)
}

func setFlag(w, flag uint64, on bool) uint64 {
	if on {
		return w | flag
	}
	return w &^ flag
}
