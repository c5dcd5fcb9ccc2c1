//go:build amd64 && gc && !purego

#include "textflag.h"
#include "ring_amd64.h"

// Batch writers for Ring.Write, the single-call Ring.EnqueueSP (hfi1: submit_tx's copy loop with
// add_gen, then sdma_update_tail) and the single-call Ring.Dequeue. See ring_amd64.go for the
// contracts and preconditions. One call handles a whole batch, wrap included. EnqueueSP and
// Dequeue read the Ring's fields at the offsets go_asm.h gives (Ring_mask, Ring_tail, ...); an
// atomic.Uint64 or atomic.Uint32 holds its value at offset 0.
//
// Writer registers (the WRITE_AVX and WRITE_MOVQ loops):
//	DI  base: slot 0 of the ring
//	SI  src: the next source descriptor
//	AX  byte offset of the current slot in the ring: ((start+k) & mask) * 16
//	R8  ring size in bytes: (mask+1) * 16, where AX wraps to 0
//	R9  start (kept to the end: start+n is the index published)
//	CX  WRITE_MOVQ: k, the index of the descriptor in the batch; WRITE_AVX: the descriptors
//	    left after the current part
//	DX  n
//	R10 skip (>= 0; any value >= n-1 means "every descriptor after the first is raw"), then
//	    the length of the current run
//	R11 generation << 2 for the current ring pass: ((start+k) >> shift & 3) << 2. The
//	    generation only changes where the ring wraps, so it is computed once per call and
//	    bumped at the wrap, never per slot.
//	BX, R12 scratch; X0-X5 (AVX: X1 genClear, X2 the pass's generation)
//
// Memory ordering, writers: no fence, and none is needed: plain MOV stores are store-releases
// under x86-TSO (package doc, "Memory ordering", O5). The slot stores only touch slots the
// caller owns (reserved, not yet published); the tail store after them publishes them (O1).
// They are not sequentially consistent (O6).

// func writeBatchAVX(base *desc.Desc, mask uint64, shift uint, start uint64, src *desc.Desc, n int, skip int)
TEXT ·writeBatchAVX(SB), NOSPLIT, $0-56
	MOVQ base+0(FP), DI
	MOVQ mask+8(FP), R8
	MOVQ shift+16(FP), CX
	MOVQ start+24(FP), R9
	MOVQ src+32(FP), SI
	MOVQ n+40(FP), DX
	MOVQ skip+48(FP), R10
	SETUP_WRITE
	WRITE_AVX
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
	SETUP_WRITE
	WRITE_MOVQ
	RET

