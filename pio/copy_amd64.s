//go:build amd64 && gc && !purego

#include "textflag.h"

// func writeQWsMOVNTI(dst, src *byte, n int)
// DI dst, SI src, CX quadwords left. Loads are ordinary (src may be unaligned); stores are
// MOVNTI, weakly ordered among themselves and with later stores: the SFENCE at the end makes
// them globally visible before any store the caller makes after the call (Intel SDM vol. 3A
// §11.3.1 and §8.2.2: non-temporal stores are not ordered with other stores, SFENCE orders them).
TEXT ·writeQWsMOVNTI(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $8
	JB   tail

block:
	// One 64-byte block per iteration: eight loads, eight MOVNTI.
	MOVQ    0(SI), AX
	MOVQ    8(SI), BX
	MOVQ    16(SI), DX
	MOVQ    24(SI), R8
	MOVNTIQ AX, 0(DI)
	MOVNTIQ BX, 8(DI)
	MOVNTIQ DX, 16(DI)
	MOVNTIQ R8, 24(DI)
	MOVQ    32(SI), AX
	MOVQ    40(SI), BX
	MOVQ    48(SI), DX
	MOVQ    56(SI), R8
	MOVNTIQ AX, 32(DI)
	MOVNTIQ BX, 40(DI)
	MOVNTIQ DX, 48(DI)
	MOVNTIQ R8, 56(DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $8, CX
	CMPQ    CX, $8
	JAE     block

tail:
	TESTQ   CX, CX
	JZ      done
	MOVQ    (SI), AX
	MOVNTIQ AX, (DI)
	ADDQ    $8, SI
	ADDQ    $8, DI
	DECQ    CX
	JMP     tail

done:
	// Fence: the non-temporal stores above are visible before the caller's next store (the
	// buffer's state, which hands the blocks to the chip).
	SFENCE
	RET

// func writeQWsAVX(dst, src *byte, n int)
// MOVNTI until dst is 32-byte aligned, then VMOVNTDQ (which faults on a misaligned address, so
// the head loop is required) two per 64 bytes, one for a remaining 32, MOVNTI for the last
// quadwords; SFENCE as above; VZEROUPPER before returning to SSE code (Go's ABI expects the
// upper YMM halves clean).
TEXT ·writeQWsAVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

head:
	TESTQ   CX, CX
	JZ      done
	TESTQ   $31, DI
	JZ      aligned
	MOVQ    (SI), AX
	MOVNTIQ AX, (DI)
	ADDQ    $8, SI
	ADDQ    $8, DI
	DECQ    CX
	JMP     head

aligned:
	CMPQ CX, $8
	JB   half

loop64:
	VMOVDQU  (SI), Y0
	VMOVDQU  32(SI), Y1
	VMOVNTDQ Y0, (DI)
	VMOVNTDQ Y1, 32(DI)
	ADDQ     $64, SI
	ADDQ     $64, DI
	SUBQ     $8, CX
	CMPQ     CX, $8
	JAE      loop64

half:
	CMPQ     CX, $4
	JB       tail
	VMOVDQU  (SI), Y0
	VMOVNTDQ Y0, (DI)
	ADDQ     $32, SI
	ADDQ     $32, DI
	SUBQ     $4, CX

tail:
	TESTQ   CX, CX
	JZ      done
	MOVQ    (SI), AX
	MOVNTIQ AX, (DI)
	ADDQ    $8, SI
	ADDQ    $8, DI
	DECQ    CX
	JMP     tail

done:
	// Fence as in writeQWsMOVNTI; then leave the AVX state clean.
	SFENCE
	VZEROUPPER
	RET

// func writeQWsAVXWB(dst, src *byte, n int)
// The write-back variant: ordinary (temporal) stores, 8-byte MOVQ up to the first 32-byte
// boundary of dst, then aligned 32-byte VMOVDQA (two per 64 bytes, one for a remaining 32), MOVQ
// for the last quadwords. No fence: on write-back memory x86 keeps stores in program order (TSO,
// Intel SDM vol. 3A §8.2.2), so the caller's publishing store cannot pass them. VZEROUPPER as
// above.
TEXT ·writeQWsAVXWB(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

whead:
	TESTQ CX, CX
	JZ    wdone
	TESTQ $31, DI
	JZ    waligned
	MOVQ  (SI), AX
	MOVQ  AX, (DI)
	ADDQ  $8, SI
	ADDQ  $8, DI
	DECQ  CX
	JMP   whead

waligned:
	CMPQ CX, $8
	JB   whalf

wloop64:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQA Y0, (DI)
	VMOVDQA Y1, 32(DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $8, CX
	CMPQ    CX, $8
	JAE     wloop64

whalf:
	CMPQ    CX, $4
	JB      wtail
	VMOVDQU (SI), Y0
	VMOVDQA Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $4, CX

wtail:
	TESTQ CX, CX
	JZ    wdone
	MOVQ  (SI), AX
	MOVQ  AX, (DI)
	ADDQ  $8, SI
	ADDQ  $8, DI
	DECQ  CX
	JMP   wtail

wdone:
	// No fence (see above).
	VZEROUPPER
	RET

// func writeQWsMOVQ(dst, src *byte, n int)
// The write-back variant without AVX: one 8-byte MOVQ store per quadword, eight per loop. No
// fence (TSO, as above).
TEXT ·writeQWsMOVQ(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $8
	JB   mtail

mblock:
	MOVQ 0(SI), AX
	MOVQ 8(SI), BX
	MOVQ 16(SI), DX
	MOVQ 24(SI), R8
	MOVQ AX, 0(DI)
	MOVQ BX, 8(DI)
	MOVQ DX, 16(DI)
	MOVQ R8, 24(DI)
	MOVQ 32(SI), AX
	MOVQ 40(SI), BX
	MOVQ 48(SI), DX
	MOVQ 56(SI), R8
	MOVQ AX, 32(DI)
	MOVQ BX, 40(DI)
	MOVQ DX, 48(DI)
	MOVQ R8, 56(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $8, CX
	CMPQ CX, $8
	JAE  mblock

mtail:
	TESTQ CX, CX
	JZ    mdone
	MOVQ  (SI), AX
	MOVQ  AX, (DI)
	ADDQ  $8, SI
	ADDQ  $8, DI
	DECQ  CX
	JMP   mtail

mdone:
	RET
