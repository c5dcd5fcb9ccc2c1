//go:build amd64 && gc && !purego

#include "textflag.h"

// Batch writers for Ring.Write (hfi1: submit_tx's copy loop with add_gen). See ring_amd64.go for
// the contract and preconditions. One call writes a whole batch, wrap included.
//
// Registers, both functions:
//	DI  base: slot 0 of the ring
//	SI  src: the next source descriptor
//	AX  byte offset of the current slot in the ring: ((start+k) & mask) * 16
//	R8  ring size in bytes: (mask+1) * 16, where AX wraps to 0
//	CX  k, the index of the descriptor in the batch (after the initial shift)
//	DX  n
//	R10 skip
//	R11 generation << 2 for the current ring pass: ((start+k) >> shift & 3) << 2
//
// Memory ordering: these functions contain no fences and need none. They only store to slots that
// the caller owns (reserved, not yet published). The caller publishes them afterwards with an
// atomic store of the tail; under x86-TSO stores are not reordered with other stores, and the Go
// compiler does not move memory operations across this call, so every slot store here is visible
// before the tail store that follows the call (the store-release of Publish). No load here
// depends on another thread's stores.

// func writeBatchAVX(base *desc.Desc, mask uint64, shift uint, start uint64, src *desc.Desc, n int, skip int)
TEXT ·writeBatchAVX(SB), NOSPLIT, $0-56
	MOVQ base+0(FP), DI
	MOVQ mask+8(FP), R8
	MOVQ shift+16(FP), CX
	MOVQ start+24(FP), R9
	MOVQ src+32(FP), SI
	MOVQ n+40(FP), DX
	MOVQ skip+48(FP), R10

	// R11 = ((start >> shift) & 3) << 2: the generation of the first slot, in place.
	MOVQ R9, R11
	SHRQ CX, R11
	ANDQ $3, R11
	SHLQ $2, R11

	// AX = (start & mask) * 16; R8 = (mask + 1) * 16.
	MOVQ R9, AX
	ANDQ R8, AX
	SHLQ $4, AX
	INCQ R8
	SHLQ $4, R8

	// X1 = {qw0: ^0, qw1: ^0xC}: clears the generation field of qw1, keeps everything else.
	// X2 = {qw0: 0,  qw1: gen<<2}: the generation to OR in.
	VPCMPEQQ X1, X1, X1
	MOVQ     $0xC, BX
	VMOVQ    BX, X3
	VPSLLDQ  $8, X3, X3
	VPXOR    X3, X1, X1
	VMOVQ    R11, X2
	VPSLLDQ  $8, X2, X2

	XORQ CX, CX

avx_loop:
	// Load the source descriptor; the source slice has no alignment guarantee.
	VMOVDQU (SI), X0
	// An AHG edit descriptor (1 <= k <= skip, i.e. k-1 < skip unsigned; k = 0 gives 2^64-1)
	// keeps its raw qw1.
	LEAQ -1(CX), BX
	CMPQ BX, R10
	JCS  avx_store
	VPAND X1, X0, X0
	VPOR  X2, X0, X0

avx_store:
	// One aligned 16-byte store: single-copy atomic on AVX CPUs, so a reader of the slot never
	// sees half a descriptor. No fence (see above).
	VMOVDQA X0, (DI)(AX*1)
	ADDQ    $16, SI
	INCQ    CX
	ADDQ    $16, AX
	CMPQ    AX, R8
	JNE     avx_next

	// Wrapped to slot 0: the next ring pass, generation + 1 (mod 4).
	XORQ    AX, AX
	ADDQ    $4, R11
	ANDQ    $0xC, R11
	VMOVQ   R11, X2
	VPSLLDQ $8, X2, X2

avx_next:
	CMPQ CX, DX
	JCS  avx_loop

	// Only VEX-encoded 128-bit instructions were used, which zero the upper YMM halves, so
	// there is no dirty upper state; VZEROUPPER is kept as cheap insurance against SSE
	// transition penalties in the caller.
	VZEROUPPER
	RET

// func writeBatchMOVQ(base *desc.Desc, mask uint64, shift uint, start uint64, src *desc.Desc, n int, skip int)
TEXT ·writeBatchMOVQ(SB), NOSPLIT, $0-56
	MOVQ base+0(FP), DI
	MOVQ mask+8(FP), R8
	MOVQ shift+16(FP), CX
	MOVQ start+24(FP), R9
	MOVQ src+32(FP), SI
	MOVQ n+40(FP), DX
	MOVQ skip+48(FP), R10

	// R11 = ((start >> shift) & 3) << 2.
	MOVQ R9, R11
	SHRQ CX, R11
	ANDQ $3, R11
	SHLQ $2, R11

	// AX = (start & mask) * 16; R8 = (mask + 1) * 16.
	MOVQ R9, AX
	ANDQ R8, AX
	SHLQ $4, AX
	INCQ R8
	SHLQ $4, R8

	XORQ CX, CX

movq_loop:
	MOVQ (SI), BX
	MOVQ 8(SI), R12
	// AHG edit descriptor (1 <= k <= skip): raw qw1.
	LEAQ -1(CX), R13
	CMPQ R13, R10
	JCS  movq_store
	ANDQ $~0xC, R12
	ORQ  R11, R12

movq_store:
	// Two 8-byte stores, qw0 then qw1; each is single-copy atomic, the pair is not. No fence
	// (see above): x86-TSO keeps them in program order with the later tail store.
	MOVQ BX, (DI)(AX*1)
	MOVQ R12, 8(DI)(AX*1)
	ADDQ $16, SI
	INCQ CX
	ADDQ $16, AX
	CMPQ AX, R8
	JNE  movq_next

	// Wrapped to slot 0: generation + 1 (mod 4).
	XORQ AX, AX
	ADDQ $4, R11
	ANDQ $0xC, R11

movq_next:
	CMPQ CX, DX
	JCS  movq_loop
	RET
