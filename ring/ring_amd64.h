// Shared by ring_amd64.s and ring_amd64_norace.s: the batch writers' loops, as macros, so that
// Write's writers and the single-call EnqueueSP run the same instructions. Registers and
// ordering: see the top of ring_amd64.s.

// SETUP_WRITE: from DI, R8 = mask, R9 = start, CX = shift: R11 = the first slot's generation in
// place, AX = (start & mask) * 16, R8 = (mask + 1) * 16, CX = 0.
#define SETUP_WRITE \
	MOVQ R9, R11; \
	SHRQ CX, R11; \
	ANDQ $3, R11; \
	SHLQ $2, R11; \
	MOVQ R9, AX; \
	ANDQ R8, AX; \
	SHLQ $4, AX; \
	INCQ R8; \
	SHLQ $4, R8; \
	XORQ CX, CX

// WRITE_AVX stores each descriptor with one 16-byte VMOVDQA, single-copy atomic on CPUs that
// report AVX (Intel SDM vol. 3A §9.1.1; AMD APM vol. 2 §7.3.2).
//
// X1 = {qw0: ^0, qw1: ^0xC} clears the generation field of qw1 and keeps everything else;
// X2 = {qw0: 0, qw1: gen<<2} is the generation to OR in. Two descriptors per iteration when both
// are stamped (k > skip, so k >= 1 and k+1 > skip), both are in the batch (k+2 <= n) and the
// second is not past the end of the ring: the same two 16-byte stores as the one-by-one path, in
// the same order, less loop overhead. An AHG edit descriptor (1 <= k <= skip, i.e. k-1 < skip
// unsigned; k = 0 gives 2^64-1) keeps its raw qw1. The source slice has no alignment guarantee
// (VMOVDQU); the slots are 16-byte aligned (VMOVDQA). Only VEX-encoded 128-bit instructions are
// used, which zero the upper YMM halves; VZEROUPPER at the end is cheap insurance against SSE
// transition penalties in the caller.
#define WRITE_AVX \
	VPCMPEQQ X1, X1, X1; \
	MOVQ     $0xC, BX; \
	VMOVQ    BX, X3; \
	VPSLLDQ  $8, X3, X3; \
	VPXOR    X3, X1, X1; \
	VMOVQ    R11, X2; \
	VPSLLDQ  $8, X2, X2; \
avx_loop: \
	CMPQ CX, R10; \
	JLS  avx_one; \
	LEAQ 2(CX), BX; \
	CMPQ BX, DX; \
	JHI  avx_one; \
	LEAQ 32(AX), BX; \
	CMPQ BX, R8; \
	JHI  avx_one; \
	VMOVDQU (SI), X0; \
	VMOVDQU 16(SI), X4; \
	VPAND   X1, X0, X0; \
	VPOR    X2, X0, X0; \
	VPAND   X1, X4, X4; \
	VPOR    X2, X4, X4; \
	VMOVDQA X0, (DI)(AX*1); \
	VMOVDQA X4, 16(DI)(AX*1); \
	ADDQ    $32, SI; \
	ADDQ    $2, CX; \
	MOVQ    BX, AX; \
	CMPQ    AX, R8; \
	JNE     avx_next; \
	JMP     avx_wrap; \
avx_one: \
	VMOVDQU (SI), X0; \
	LEAQ -1(CX), BX; \
	CMPQ BX, R10; \
	JCS  avx_store; \
	VPAND X1, X0, X0; \
	VPOR  X2, X0, X0; \
avx_store: \
	VMOVDQA X0, (DI)(AX*1); \
	ADDQ    $16, SI; \
	INCQ    CX; \
	ADDQ    $16, AX; \
	CMPQ    AX, R8; \
	JNE     avx_next; \
avx_wrap: \
	XORQ    AX, AX; \
	ADDQ    $4, R11; \
	ANDQ    $0xC, R11; \
	VMOVQ   R11, X2; \
	VPSLLDQ $8, X2, X2; \
avx_next: \
	CMPQ CX, DX; \
	JCS  avx_loop; \
	VZEROUPPER

// WRITE_MOVQ stores each descriptor with two 8-byte MOVQ stores (qw0 then qw1): each is
// single-copy atomic, the pair is not. Any amd64. At the wrap to slot 0: generation + 1 (mod 4).
#define WRITE_MOVQ \
movq_loop: \
	MOVQ (SI), BX; \
	MOVQ 8(SI), R12; \
	TESTQ CX, CX; \
	JEQ  movq_stamp; \
	CMPQ CX, R10; \
	JLS  movq_store; \
movq_stamp: \
	ANDQ $~0xC, R12; \
	ORQ  R11, R12; \
movq_store: \
	MOVQ BX, (DI)(AX*1); \
	MOVQ R12, 8(DI)(AX*1); \
	ADDQ $16, SI; \
	INCQ CX; \
	ADDQ $16, AX; \
	CMPQ AX, R8; \
	JNE  movq_next; \
	XORQ AX, AX; \
	ADDQ $4, R11; \
	ANDQ $0xC, R11; \
movq_next: \
	CMPQ CX, DX; \
	JCS  movq_loop

