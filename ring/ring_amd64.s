//go:build amd64 && gc && !purego

#include "textflag.h"

// Batch writers for Ring.Write and Ring.EnqueueSP (hfi1: submit_tx's copy loop with add_gen,
// then sdma_update_tail), and the copy-and-release for Ring.Dequeue. See ring_amd64.go for the
// contracts and preconditions. One call handles a whole batch, wrap included.
//
// Writer registers, both functions:
//	DI  base: slot 0 of the ring
//	SI  src: the next source descriptor
//	AX  byte offset of the current slot in the ring: ((start+k) & mask) * 16
//	R8  ring size in bytes: (mask+1) * 16, where AX wraps to 0
//	R9  start (kept to the end: start+n is the index published)
//	CX  k, the index of the descriptor in the batch (after the initial shift)
//	DX  n
//	R10 skip
//	R11 generation << 2 for the current ring pass: ((start+k) >> shift & 3) << 2
//
// Memory ordering, writers: no fence, and none is needed. x86-TSO (Intel SDM vol. 3A §9.2.2;
// AMD APM vol. 2 §7.2) keeps stores in program order for every observer and makes each plain
// store a store-release. The slot stores only touch slots the caller owns (reserved, not yet
// published). For Write the caller publishes them afterwards with an atomic store of the tail
// (the Go compiler does not move memory operations across this call). For EnqueueSP the writer
// itself ends with MOVQ start+n -> reserved, then MOVQ start+n -> tail: every slot store is
// visible before the tail store to any core that loads the tail (the hardware model's
// load-acquire). These stores are not sequentially consistent (no LOCK/XCHG/MFENCE): a later
// load by this core may be satisfied before they leave the store buffer; see EnqueueSP.
// func writeBatchAVX(base *desc.Desc, mask uint64, shift uint, start uint64, src *desc.Desc, n int, skip int, reserved, tail *atomic.Uint64)
TEXT ·writeBatchAVX(SB), NOSPLIT, $0-72
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
	// Two descriptors per iteration when both are stamped (k > skip, so k >= 1 and k+1 >
	// skip), both are in the batch (k+2 <= n) and the second is not past the end of the ring:
	// the same two 16-byte stores as the one-by-one path, in the same order, less loop overhead.
	CMPQ CX, R10
	JLS  avx_one
	LEAQ 2(CX), BX
	CMPQ BX, DX
	JHI  avx_one
	LEAQ 32(AX), BX
	CMPQ BX, R8
	JHI  avx_one
	VMOVDQU (SI), X0
	VMOVDQU 16(SI), X4
	VPAND   X1, X0, X0
	VPOR    X2, X0, X0
	VPAND   X1, X4, X4
	VPOR    X2, X4, X4
	VMOVDQA X0, (DI)(AX*1)
	VMOVDQA X4, 16(DI)(AX*1)
	ADDQ    $32, SI
	ADDQ    $2, CX
	MOVQ    BX, AX
	CMPQ    AX, R8
	JNE     avx_next
	JMP     avx_wrap

avx_one:
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

avx_wrap:
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

	// Publish (EnqueueSP only: reserved != nil): end = start+n to reserved, then to tail, plain
	// MOVs after every slot store. Under x86-TSO the tail store is the store-release that
	// publishes [start, end) to the consumer; reserved goes first so that reserved >= tail holds
	// for any observer (Publish's window check, FreeCnt). No fence: see the top of this file.
	MOVQ  reserved+56(FP), BX
	TESTQ BX, BX
	JEQ   avx_done
	ADDQ  DX, R9
	MOVQ  R9, (BX)             // reserved = end
	MOVQ  tail+64(FP), BX
	MOVQ  R9, (BX)             // tail = end: store-release of the batch

avx_done:
	RET

// func writeBatchMOVQ(base *desc.Desc, mask uint64, shift uint, start uint64, src *desc.Desc, n int, skip int, reserved, tail *atomic.Uint64)
TEXT ·writeBatchMOVQ(SB), NOSPLIT, $0-72
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

	// Publish (EnqueueSP only: reserved != nil): end = start+n to reserved, then to tail, plain
	// MOVs after every slot store. Under x86-TSO the tail store is the store-release that
	// publishes [start, end) to the consumer; reserved goes first so that reserved >= tail holds
	// for any observer (Publish's window check, FreeCnt). No fence: see the top of this file.
	MOVQ  reserved+56(FP), BX
	TESTQ BX, BX
	JEQ   movq_done
	ADDQ  DX, R9
	MOVQ  R9, (BX)             // reserved = end
	MOVQ  tail+64(FP), BX
	MOVQ  R9, (BX)             // tail = end: store-release of the batch

movq_done:
	RET

// func dequeueAsm(base *desc.Desc, mask uint64, h uint64, dst *desc.Desc, n int, hwHead *atomic.Uint64, seq *atomic.Uint32, swHead *atomic.Uint64)
//
// Registers:
//	SI  base: slot 0 of the ring
//	DI  dst: the next destination descriptor
//	AX  byte offset of the current slot: ((h+k) & mask) * 16
//	R8  ring size in bytes, where AX wraps to 0
//	R9  h, then h+n
//	CX  descriptors left to copy
//	DX  n
//
// Memory ordering: the caller loaded the tail (a plain MOV, load-acquire under x86-TSO) before
// this call, and loads are not reordered with older loads, so every slot load here sees the
// producer's descriptor. The four index stores that follow are plain MOVs: x86-TSO does not
// reorder a store with older loads, so the slot loads complete before any producer can see
// swHead move past them (and reuse the slots); and stores become visible in program order, so
// whoever sees the new swHead sees the odd seqcount written before it (write_seqcount_begin's
// seq++; smp_wmb(), where smp_wmb is a compiler barrier on x86), and whoever sees the final even
// count sees swHead. No LOCK prefix: the count has one writer at a time (Dequeue's contract), so
// its increments need not be atomic read-modify-writes, only single-copy atomic 32-bit stores.
TEXT ·dequeueAsm(SB), NOSPLIT, $0-64
	MOVQ base+0(FP), SI
	MOVQ mask+8(FP), R8
	MOVQ h+16(FP), R9
	MOVQ dst+24(FP), DI
	MOVQ n+32(FP), DX

	// AX = (h & mask) * 16; R8 = (mask + 1) * 16.
	MOVQ R9, AX
	ANDQ R8, AX
	SHLQ $4, AX
	INCQ R8
	SHLQ $4, R8
	MOVQ DX, CX

	// Two descriptors per iteration while both lie before the end of the ring.
deq_pair:
	CMPQ CX, $2
	JCS  deq_one
	LEAQ 32(AX), BX
	CMPQ BX, R8
	JHI  deq_one
	MOVOU (SI)(AX*1), X0
	MOVOU 16(SI)(AX*1), X1
	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	ADDQ  $32, DI
	SUBQ  $2, CX
	MOVQ  BX, AX
	CMPQ  AX, R8
	JNE   deq_pair
	XORQ  AX, AX // wrapped to slot 0
	JMP   deq_pair

deq_one:
	TESTQ CX, CX
	JEQ   deq_release
	MOVOU (SI)(AX*1), X0
	MOVOU X0, (DI)
	ADDQ  $16, DI
	DECQ  CX
	ADDQ  $16, AX
	CMPQ  AX, R8
	JNE   deq_pair
	XORQ  AX, AX // wrapped to slot 0
	JMP   deq_pair

deq_release:
	ADDQ DX, R9
	MOVQ hwHead+40(FP), BX
	MOVQ R9, (BX)          // hwHead = h+n: [h, h+n) to the completion pass
	MOVQ seq+48(FP), BX
	MOVL (BX), CX
	INCL CX
	MOVL CX, (BX)          // seq odd: write section open (BeginWrite)
	MOVQ swHead+56(FP), R10
	MOVQ R9, (R10)         // swHead = h+n: the slots back to producers, store-release
	INCL CX
	MOVL CX, (BX)          // seq even: write section closed (EndWrite)
	RET
