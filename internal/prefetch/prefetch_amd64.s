//go:build amd64 && gc && !purego

#include "textflag.h"

// PREFETCHW is 0F 0D /1, which the Go assembler does not name: with (AX) (ModRM 0x08), and
// with disp32(AX) (ModRM 0x88, then the displacement, little-endian).
#define PREFETCHW_AX BYTE $0x0F; BYTE $0x0D; BYTE $0x08
#define PREFETCHW_AX_DISP32(d0, d1) BYTE $0x0F; BYTE $0x0D; BYTE $0x88; BYTE $d0; BYTE $d1; BYTE $0x00; BYTE $0x00

// func write(p unsafe.Pointer)
TEXT ·write(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ	p+0(FP), AX
	PREFETCHW_AX
	RET

// func writeLines(p unsafe.Pointer, n int)
TEXT ·writeLines(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	p+0(FP), AX
	MOVQ	n+8(FP), CX
	CMPQ	CX, $4
	JNE	loop
	// Four lines, the common case, unrolled.
	PREFETCHW_AX
	PREFETCHW_AX_DISP32(0x40, 0x00)
	PREFETCHW_AX_DISP32(0x80, 0x00)
	PREFETCHW_AX_DISP32(0xC0, 0x00)
	RET
loop:
	TESTQ	CX, CX
	JLE	done
	PREFETCHW_AX
	ADDQ	$64, AX
	DECQ	CX
	JMP	loop
done:
	RET

// func read(p unsafe.Pointer)
TEXT ·read(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ	p+0(FP), AX
	PREFETCHT0	(AX)
	RET
