//go:build arm64 && gc && !purego

#include "textflag.h"

// func G() uintptr
// The arm64 ABI keeps the current g in R28, which the assembler calls g. An assembly function
// is ABI0: the result goes to the stack slot, not to R0 (ABIInternal's result register, which
// only the runtime's own assembly may use).
TEXT ·G(SB), NOSPLIT|NOFRAME, $0-8
	MOVD g, ret+0(FP)
	RET
