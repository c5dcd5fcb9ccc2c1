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

// genClear is {qw0: ^0, qw1: ^0xC}: ANDed into a descriptor it clears qw1's generation field and
// keeps everything else. genTab holds {qw0: 0, qw1: g<<2} for g = 0..3: the generation to OR in,
// indexed by (g<<2)*4 = g*16. File-local (<>), so each .s file that includes this has its own.
DATA genClear<>+0(SB)/8, $0xffffffffffffffff
DATA genClear<>+8(SB)/8, $0xfffffffffffffff3
GLOBL genClear<>(SB), RODATA|NOPTR, $16
DATA genTab<>+0(SB)/8, $0
DATA genTab<>+8(SB)/8, $0
DATA genTab<>+16(SB)/8, $0
DATA genTab<>+24(SB)/8, $4
DATA genTab<>+32(SB)/8, $0
DATA genTab<>+40(SB)/8, $8
DATA genTab<>+48(SB)/8, $0
DATA genTab<>+56(SB)/8, $12
GLOBL genTab<>(SB), RODATA|NOPTR, $64

// AVX_GEN: X2 = genTab[R11>>2], the generation vector for the current pass. Uses BX.
#define AVX_GEN \
	LEAQ    genTab<>(SB), BX; \
	VMOVDQU (BX)(R11*4), X2

// AVX_STAMP1: one stamped descriptor from (SI) to the slot at AX; SI and AX advance.
#define AVX_STAMP1 \
	VMOVDQU (SI), X0; \
	VPAND   X1, X0, X0; \
	VPOR    X2, X0, X0; \
	VMOVDQA X0, (DI)(AX*1); \
	ADDQ    $16, SI; \
	ADDQ    $16, AX

// AVX_WRAP: if AX reached the end of the ring, back to slot 0 and the next generation (mod 4).
#define AVX_WRAP(skiplabel) \
	CMPQ AX, R8; \
	JNE  skiplabel; \
	XORQ AX, AX; \
	ADDQ $4, R11; \
	ANDQ $0xC, R11; \
	AVX_GEN; \
skiplabel:

// WRITE_AVX stores each descriptor with one 16-byte VMOVDQA, single-copy atomic on CPUs that
// report AVX (Intel SDM vol. 3A §9.1.1; AMD APM vol. 2 §7.3.2), in index order.
//
// The batch is three parts: descriptor 0, stamped; descriptors 1..min(skip, n-1), the AHG edit
// descriptors, copied raw (one by one: there are at most a few); the rest, stamped, in
// contiguous runs that end at the end of the ring or of the batch, four per iteration and then
// one by one. The generation vector changes only at a wrap (AVX_WRAP), so stamping a
// descriptor is an AND and an OR. The source slice has no alignment guarantee (VMOVDQU); the
// slots are 16-byte aligned (VMOVDQA). Only VEX-encoded 128-bit instructions are used, which
// zero the upper YMM halves; VZEROUPPER at the end is cheap insurance against SSE transition
// penalties in the caller. CX ends as the number of stamped descriptors left (0).
#define WRITE_AVX \
	VMOVDQU genClear<>(SB), X1; \
	AVX_GEN; \
	AVX_STAMP1; \
	AVX_WRAP(avx_w0); \
	LEAQ    -1(DX), CX; \
	TESTQ   CX, CX; \
	JEQ     avx_done; \
	TESTQ   R10, R10; \
	JEQ     avx_run; \
	CMPQ    R10, CX; \
	CMOVQHI CX, R10; \
	SUBQ    R10, CX; \
avx_raw: \
	VMOVDQU (SI), X0; \
	VMOVDQA X0, (DI)(AX*1); \
	ADDQ    $16, SI; \
	ADDQ    $16, AX; \
	AVX_WRAP(avx_w1); \
	DECQ    R10; \
	JNE     avx_raw; \
	TESTQ   CX, CX; \
	JEQ     avx_done; \
avx_run: \
	MOVQ    R8, BX; \
	SUBQ    AX, BX; \
	SHRQ    $4, BX; \
	CMPQ    BX, CX; \
	CMOVQHI CX, BX; \
	SUBQ    BX, CX; \
	MOVQ    BX, R10; \
avx_quad: \
	CMPQ    R10, $4; \
	JCS     avx_single; \
	VMOVDQU (SI), X0; \
	VMOVDQU 16(SI), X3; \
	VMOVDQU 32(SI), X4; \
	VMOVDQU 48(SI), X5; \
	VPAND   X1, X0, X0; \
	VPAND   X1, X3, X3; \
	VPAND   X1, X4, X4; \
	VPAND   X1, X5, X5; \
	VPOR    X2, X0, X0; \
	VPOR    X2, X3, X3; \
	VPOR    X2, X4, X4; \
	VPOR    X2, X5, X5; \
	VMOVDQA X0, (DI)(AX*1); \
	VMOVDQA X3, 16(DI)(AX*1); \
	VMOVDQA X4, 32(DI)(AX*1); \
	VMOVDQA X5, 48(DI)(AX*1); \
	ADDQ    $64, SI; \
	ADDQ    $64, AX; \
	SUBQ    $4, R10; \
	JMP     avx_quad; \
avx_single: \
	TESTQ   R10, R10; \
	JEQ     avx_runend; \
	AVX_STAMP1; \
	DECQ    R10; \
	JMP     avx_single; \
avx_runend: \
	AVX_WRAP(avx_w2); \
	TESTQ   CX, CX; \
	JNE     avx_run; \
avx_done: \
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

