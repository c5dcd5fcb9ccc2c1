package desc

import (
	"math/rand/v2"
	"testing"
)

// kBuildAHGDescriptor is hfi1's sdma_build_ahg_descriptor (sdma.h), with its masks and shifts
// written out as sdma.h defines them:
//
//	#define SDMA_AHG_VALUE_MASK          0xffff
//	#define SDMA_AHG_VALUE_SHIFT         0
//	#define SDMA_AHG_INDEX_MASK          0xf
//	#define SDMA_AHG_INDEX_SHIFT         16
//	#define SDMA_AHG_FIELD_LEN_MASK      0xf
//	#define SDMA_AHG_FIELD_LEN_SHIFT     20
//	#define SDMA_AHG_FIELD_START_MASK    0x1f
//	#define SDMA_AHG_FIELD_START_SHIFT   24
//	#define SDMA_AHG_UPDATE_ENABLE_SHIFT 31
//
//	return (u32)(1UL << SDMA_AHG_UPDATE_ENABLE_SHIFT |
//		((startbit & SDMA_AHG_FIELD_START_MASK) << SDMA_AHG_FIELD_START_SHIFT) |
//		((bits & SDMA_AHG_FIELD_LEN_MASK) << SDMA_AHG_FIELD_LEN_SHIFT) |
//		((dwindex & SDMA_AHG_INDEX_MASK) << SDMA_AHG_INDEX_SHIFT) |
//		((data & SDMA_AHG_VALUE_MASK) << SDMA_AHG_VALUE_SHIFT));
func kBuildAHGDescriptor(data uint16, dwindex, startbit, bits uint8) uint32 {
	return uint32(1)<<31 |
		(uint32(startbit)&0x1f)<<24 |
		(uint32(bits)&0xf)<<20 |
		(uint32(dwindex)&0xf)<<16 |
		(uint32(data)&0xffff)<<0
}

// TestAHGUpdateMatchesKernel: for every dword index (0..15), start bit and field length that lie
// inside the dword (1..16 bits, user_sdma's 16 encoded as 0 by the 4-bit mask), with values at
// the edges and random ones, AHGUpdate builds the kernel's word and DecodeAHG reads the
// arguments back; every argument the kernel would mask instead is refused.
func TestAHGUpdateMatchesKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(0x616867, 1))
	for dw := range 17 {
		for start := range 33 {
			for bits := range 18 {
				for _, data := range []uint16{0, 1, 0x8000, 0xffff, uint16(rng.Uint32())} {
					w, err := AHGUpdate(data, uint8(dw), uint8(start), uint8(bits))
					valid := dw <= 15 && start <= 31 && bits >= 1 && bits <= 16 && start+bits <= 32
					if !valid {
						if err == nil {
							t.Fatalf("AHGUpdate(%#x, dw %d, start %d, bits %d) = %#x, want a refusal", data, dw, start, bits, w)
						}
						continue
					}
					if err != nil {
						t.Fatalf("AHGUpdate(%#x, dw %d, start %d, bits %d): %v", data, dw, start, bits, err)
					}
					if want := kBuildAHGDescriptor(data, uint8(dw), uint8(start), uint8(bits)); w != want {
						t.Fatalf("AHGUpdate(%#x, dw %d, start %d, bits %d) = %#x, kernel %#x", data, dw, start, bits, w, want)
					}
					got := DecodeAHG(w)
					if want := (AHGWord{Enable: true, StartBit: uint8(start), Bits: uint8(bits), DWIndex: uint8(dw), Value: data}); got != want {
						t.Fatalf("DecodeAHG(%#x) = %+v, want %+v", w, got, want)
					}
				}
			}
		}
	}
}
