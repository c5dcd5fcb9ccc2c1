//go:build amd64 && gc && !purego && !race

#include "textflag.h"
#include "go_asm.h"
#include "ring_amd64.h"

// The single-call EnqueueSP and Dequeue (ring_amd64_norace.go), outside -race builds only: they
// publish and release indices with plain MOVs, which the race detector would not see. They read
// the Ring's fields at the offsets go_asm.h gives (Ring_mask, Ring_tail, ...); an atomic.Uint64
// or atomic.Uint32 holds its value at offset 0. Writer registers and the writers' ordering: see
// ring_amd64.s.

// func enqueueSP(r *Ring, ds []desc.Desc, skip int) (start uint64, err error)
//
// The whole of EnqueueSP for the single producer: the batch-size check, the room check against
// the cached head (refreshed from swHead only when it says no room), the write, the publication,
// with AVX or MOVQ stores as curImpl says. When curImpl is implGo, the batch size is out of
// [1, mask] (an error that needs building), or the tail is not at the reservation index (a
// reservation unpublished, or the closed mark), it tail-calls enqueueSPGo with its own arguments,
// which does everything in Go. No room: start = 0, err = ErrFull (the sentinel's two words).
//
// Ordering (package doc, "Memory ordering"): the slot stores and then the tail store are O1; the
// swHead load before writing is O3; plain MOVs suffice by O5, and are not seq-cst (O6).
// reserved and headCache are ours (single producer; Reset needs quiescence; a closed ring goes to
// the Go path, which refuses): plain loads and stores. base is written only by Reset (quiescent),
// so a ring that a Reset moved takes this path too: the index is the word minus base, and the
// word stored is the end plus base. headCache is stored with a plain MOV (the Go path's atomic
// store is an XCHG): it is read only by producers, and by no other producer while this one runs.
TEXT ·enqueueSP(SB), NOSPLIT, $0-64
	MOVL ·curImpl(SB), BX
	CMPL BX, $const_implGo
	JEQ  enq_go
	MOVQ r+0(FP), R12
	MOVQ ds_len+16(FP), DX
	MOVQ Ring_mask(R12), R8

	// n-1 >= mask, unsigned: n < 1 or n > Size()-1.
	LEAQ -1(DX), CX
	CMPQ CX, R8
	JCC  enq_go

	// Room against the cached head: used = start - cached must be <= mask (a cache left stale
	// by racing Reserves can make it look larger, and so does a closed ring's word) and
	// mask - used >= n. The word is the index plus base (0 until a Reset moves it), plus
	// closedMark if closed.
	MOVQ Ring_reserved(R12), R9
	SUBQ Ring_base(R12), R9 // start: == tail, no other producer

	// A reservation not yet published ([tail, start) reserved), or a closed word: the Go path
	// refuses (ErrOrder, ErrClosed); our tail store would publish that reservation's slots.
	CMPQ Ring_tail(R12), R9
	JNE  enq_go

	MOVQ Ring_headCache(R12), AX
	MOVQ R9, CX
	SUBQ AX, CX
	CMPQ CX, R8
	JHI  enq_refresh
	MOVQ R8, R10
	SUBQ CX, R10
	CMPQ R10, DX
	JCS  enq_refresh

enq_room:
	MOVQ    Ring_slots(R12), DI
	MOVQ    ds_base+8(FP), SI
	MOVQ    R12, R13 // WRITE_MOVQ uses R12
	CMPQ    DX, $1
	JNE     enq_batch
	CMPL    BX, $const_implAVX
	JNE     enq_batch

	// One descriptor with AVX (bulk=1, the commonest call): stamp and store it without the
	// batch loop's set-up. No wrap (one slot) and no edit descriptor (k = 0). The generation
	// table's byte offset is gen*16 = (start >> (shift-4)) & 0x30 (shift >= 6).
	MOVQ    Ring_shift(R12), CX
	SUBQ    $4, CX
	MOVQ    R9, R11
	SHRQ    CX, R11
	ANDQ    $0x30, R11
	LEAQ    genTab<>(SB), R10
	MOVQ    R9, AX
	ANDQ    R8, AX
	SHLQ    $4, AX
	VMOVDQU (SI), X0
	VPAND   genClear<>(SB), X0, X0
	VPOR    (R10)(R11*1), X0, X0
	VMOVDQA X0, (DI)(AX*1) // single-copy atomic; VEX.128 only: no dirty upper YMM state
	JMP     enq_publish

enq_batch:
	MOVQ    skip+32(FP), R10
	XORQ    CX, CX
	TESTQ   R10, R10
	CMOVQLT CX, R10 // skip < 0 means no edit descriptor
	MOVQ    Ring_shift(R12), CX
	SETUP_WRITE
	CMPL    BX, $const_implAVX
	JNE     enq_movq
	WRITE_AVX
	JMP     enq_publish

enq_movq:
	WRITE_MOVQ

enq_publish:
	// end = start+n to reserved, then to tail, plain MOVs after every slot store. Under x86-TSO
	// the tail store is the store-release that publishes [start, end) to the consumer; reserved
	// goes first so that reserved >= tail holds for any observer (Publish's window check,
	// FreeCnt).
	MOVQ R9, start+40(FP)
	ADDQ DX, R9
	MOVQ Ring_base(R13), AX     // unchanged since the load above: only Reset writes it
	ADDQ R9, AX
	MOVQ AX, Ring_reserved(R13) // the reservation word = end + base (ours alone: one producer)
	MOVQ R9, Ring_tail(R13)     // tail = end: store-release of the batch
	MOVQ $0, err_itable+48(FP)
	MOVQ $0, err_data+56(FP)
	RET

enq_refresh:
	// The cached head says no room: load the consumer's line (swHead <= tail == start, so
	// start - swHead <= mask) and cache it, storing only on change.
	MOVQ Ring_swHead(R12), CX // load-acquire
	CMPQ CX, AX
	JEQ  enq_cached
	MOVQ CX, Ring_headCache(R12)

enq_cached:
	MOVQ R9, R10
	SUBQ CX, R10
	CMPQ R10, R8
	JHI  enq_go // used > mask: the ring is closed (swHead <= tail == start otherwise): the Go path says ErrClosed
	MOVQ R8, AX
	SUBQ R10, AX
	CMPQ AX, DX
	JCC  enq_room

	// No room: ErrFull, bare.
	MOVQ $0, start+40(FP)
	MOVQ ·ErrFull+0(SB), AX
	MOVQ AX, err_itable+48(FP)
	MOVQ ·ErrFull+8(SB), AX
	MOVQ AX, err_data+56(FP)
	RET

enq_go:
	JMP ·enqueueSPGo(SB)

// func dequeue(r *Ring, dst []desc.Desc) int
//
// The whole of Dequeue, or, when curImpl is implGo, a tail call of dequeueGo (see its ordering argument in ring.go): n = min(len(dst), published),
// the copy of [h, h+n) into dst, then, with plain MOVs and in this order: hwHead = h+n, seq += 1,
// swHead = h+n, seq += 1.
//
// Registers:
//	R11 r
//	SI  base: slot 0 of the ring
//	DI  dst: the next destination descriptor
//	AX  byte offset of the current slot: ((h+k) & mask) * 16
//	R8  mask, then the ring size in bytes, where AX wraps to 0
//	R9  h, then h+n
//	CX  available, then descriptors left to copy after the current run
//	R10 descriptors left in the current run
//	DX  n
//
// Memory ordering (package doc, "Memory ordering"): the tail load (or the cached tail, which was
// such a load) before the slot loads is O1; then hwHead = h+n (O2), seq++, swHead = h+n (O3),
// seq++ (O4), all plain MOVs (O5). tailCache is Dequeue's own (one Dequeue at a time). No LOCK
// prefix: the count has one writer at a time (Dequeue's contract), so its increments need not be
// atomic read-modify-writes, only single-copy atomic 32-bit stores.
TEXT ·dequeue(SB), NOSPLIT, $0-40
	CMPL ·curImpl(SB), $const_implGo
	JEQ  deq_go
	MOVQ r+0(FP), R11
	MOVQ dst_len+16(FP), DX
	MOVQ Ring_hwHead(R11), R9 // h: our own index
	MOVQ Ring_mask(R11), R8

	// The cached tail serves only when it covers the whole request (then the result is what a
	// fresh load would give) and is consistent with hwHead (avail <= mask).
	MOVQ Ring_tailCache(R11), CX
	SUBQ R9, CX
	CMPQ CX, DX
	JCS  deq_reload
	CMPQ CX, R8
	JLS  deq_have

deq_reload:
	MOVQ    Ring_tail(R11), BX // load-acquire: the slots below the tail are written
	MOVQ    BX, Ring_tailCache(R11)
	MOVQ    BX, CX
	SUBQ    R9, CX
	CMPQ    CX, DX
	CMOVQCS CX, DX // n = min(n, avail)

deq_have:
	TESTQ DX, DX
	JEQ   deq_none
	MOVQ  Ring_slots(R11), SI
	MOVQ  dst_base+8(FP), DI

	// AX = (h & mask) * 16.
	MOVQ R9, AX
	ANDQ R8, AX
	SHLQ $4, AX

	// One descriptor (bulk=1): no run to compute.
	CMPQ  DX, $1
	JNE   deq_batch
	MOVOU (SI)(AX*1), X0
	MOVOU X0, (DI)
	JMP   deq_release

deq_batch:
	// R8 = (mask + 1) * 16; CX = n.
	INCQ R8
	SHLQ $4, R8
	MOVQ DX, CX

	// Contiguous runs that end at the end of the ring or of the request (at most two): R10 =
	// run length, copied four per iteration, then one by one.
deq_run:
	MOVQ    R8, R10
	SUBQ    AX, R10
	SHRQ    $4, R10
	CMPQ    R10, CX
	CMOVQHI CX, R10
	SUBQ    R10, CX

deq_quad:
	CMPQ  R10, $4
	JCS   deq_single
	MOVOU (SI)(AX*1), X0
	MOVOU 16(SI)(AX*1), X1
	MOVOU 32(SI)(AX*1), X2
	MOVOU 48(SI)(AX*1), X3
	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	MOVOU X2, 32(DI)
	MOVOU X3, 48(DI)
	ADDQ  $64, AX
	ADDQ  $64, DI
	SUBQ  $4, R10
	JMP   deq_quad

deq_single:
	TESTQ R10, R10
	JEQ   deq_runend
	MOVOU (SI)(AX*1), X0
	MOVOU X0, (DI)
	ADDQ  $16, AX
	ADDQ  $16, DI
	DECQ  R10
	JMP   deq_single

deq_runend:
	TESTQ CX, CX
	JEQ   deq_release
	XORQ  AX, AX // the run ended at the end of the ring: on from slot 0
	JMP   deq_run

deq_release:
	ADDQ DX, R9
	MOVQ R9, Ring_hwHead(R11)                 // hwHead = h+n: [h, h+n) to the completion pass
	MOVL (Ring_seq+SeqCount_seq)(R11), CX
	INCL CX
	MOVL CX, (Ring_seq+SeqCount_seq)(R11)     // seq odd: write section open (BeginWrite)
	MOVQ R9, Ring_swHead(R11)                 // swHead = h+n: the slots back to producers
	INCL CX
	MOVL CX, (Ring_seq+SeqCount_seq)(R11)     // seq even: write section closed (EndWrite)
	MOVQ DX, ret+32(FP)
	RET

deq_none:
	MOVQ $0, ret+32(FP)
	RET

deq_go:
	JMP ·dequeueGo(SB)
