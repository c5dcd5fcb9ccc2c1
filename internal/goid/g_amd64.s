//go:build amd64 && gc && !purego

#include "textflag.h"

// func G() uintptr
TEXT ·G(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
