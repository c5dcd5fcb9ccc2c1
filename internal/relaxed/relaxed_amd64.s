//go:build amd64 && gc && !purego && !race

#include "textflag.h"

// Plain stores, no fence and no LOCK prefix, and none is needed for what the package promises:
// under x86-TSO (Intel SDM vol. 3A §9.2.2; AMD APM vol. 2 §7.2) a plain store is not reordered
// with the caller's earlier loads and stores, so it is a store-release. It may be passed by the
// caller's later loads (it is not sequentially consistent; see the package documentation).

// func add64(p *atomic.Uint64, n uint64)
TEXT ·add64(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ CX, (AX) // load, add, plain store: NOT atomic against a second writer (one writer only)
	RET

// func store64(p *atomic.Uint64, v uint64)
TEXT ·store64(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), CX
	MOVQ CX, (AX) // store-release (TSO); not seq-cst
	RET

// func store32(p *atomic.Uint32, v uint32)
TEXT ·store32(SB), NOSPLIT, $0-12
	MOVQ p+0(FP), AX
	MOVL v+8(FP), CX
	MOVL CX, (AX) // store-release (TSO); not seq-cst
	RET
