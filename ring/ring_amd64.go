//go:build amd64 && gc && !purego

package ring

import (
	"sync/atomic"

	"github.com/gosdma/gosdma/desc"
	"golang.org/x/sys/cpu"
)

// The amd64 seam: Write, EnqueueSP's write-and-publish and Dequeue's copy-and-release are one
// assembly call per batch each (ring_amd64.s).
//
// The writers write src[0:n] into the ring whose slot 0 is at base, starting at index start:
// the descriptor k goes to slot (start+k)&mask; its qw1 bits 3:2 become ((start+k)>>shift)&3
// unless 1 <= k <= skip (AHG edit descriptors, copied raw). Preconditions, checked by Write and
// EnqueueSP, not by the assembly:
//
//   - base points to mask+1 slots, mask+1 a power of two >= 2, base 16-byte aligned (the AVX
//     variant uses aligned stores and faults otherwise; alignedSlots gives 64);
//   - shift = log2(mask+1), 1 <= shift <= 62;
//   - src points to n descriptors, 1 <= n <= mask (so no slot is written twice);
//   - 0 <= skip <= n-1;
//   - reserved and tail are both nil (Write: the caller publishes the slots afterwards with an
//     atomic store of the tail), or both point to the ring's indices and the caller is the only
//     producer (EnqueueSP): after the last slot store the writer stores start+n to *reserved and
//     then to *tail with plain MOVs, the store-release that publishes the batch under x86-TSO.
//     Those stores are invisible to the race detector: race builds never pass non-nil pointers.

// writeBatchAVX stores each descriptor with one 16-byte VMOVDQA, which is single-copy atomic on
// CPUs that report AVX (Intel SDM vol. 3A §9.1.1; AMD APM vol. 2 §7.3.2). Requires AVX.
//
//go:noescape
func writeBatchAVX(base *desc.Desc, mask uint64, shift uint, start uint64, src *desc.Desc, n int, skip int, reserved, tail *atomic.Uint64)

// writeBatchMOVQ stores each descriptor with two 8-byte MOVQ stores (qw0 then qw1). Any amd64.
//
//go:noescape
func writeBatchMOVQ(base *desc.Desc, mask uint64, shift uint, start uint64, src *desc.Desc, n int, skip int, reserved, tail *atomic.Uint64)

// dequeueAsm copies the n descriptors at indices [h, h+n) of the ring whose slot 0 is at base
// into dst[0:n] (16-byte SSE2 loads and stores, wrap handled), then stores, with plain MOVs and
// in this order: *hwHead = h+n, *seq += 1, *swHead = h+n, *seq += 1 (Dequeue's ordering argument
// in ring.go). Preconditions, established by Dequeue: base points to mask+1 slots (a power of
// two); 1 <= n <= mask; dst points to n descriptors; [h, h+n) is published and owned by the
// caller, the single consumer and the single head seqcount writer. Not used under -race.
//
//go:noescape
func dequeueAsm(base *desc.Desc, mask uint64, h uint64, dst *desc.Desc, n int, hwHead *atomic.Uint64, seq *atomic.Uint32, swHead *atomic.Uint64)

const (
	implGo int32 = iota
	implAVX
	implMOVQ
)

// hasAVX: the CPU reports AVX (and the OS saves YMM state); set once at init, read-only after.
var hasAVX = cpu.X86.HasAVX

var implementations = []string{"asm", "asm-movq", "go"}

// curImpl is the selected implementation: written by init and SetImplementation (atomic store),
// read by every Write (atomic load: a plain MOV on amd64).
var curImpl atomic.Int32

func init() { curImpl.Store(bestAsm()) }

func bestAsm() int32 {
	if hasAVX {
		return implAVX
	}
	return implMOVQ
}

func setImpl(name string) (restore func(), ok bool) {
	var v int32
	switch name {
	case "asm":
		v = bestAsm()
	case "asm-movq":
		v = implMOVQ
	case "go":
		v = implGo
	default:
		return func() {}, false
	}
	old := curImpl.Swap(v)
	return func() { curImpl.Store(old) }, true
}

// writeBatch is Write's worker. Preconditions as above (Write establishes them).
func writeBatch(slots []desc.Desc, mask uint64, shift uint, start uint64, ds []desc.Desc, skip int) {
	switch curImpl.Load() {
	case implAVX:
		writeBatchAVX(&slots[0], mask, shift, start, &ds[0], len(ds), skip, nil, nil)
	case implMOVQ:
		writeBatchMOVQ(&slots[0], mask, shift, start, &ds[0], len(ds), skip, nil, nil)
	default:
		writeGo(slots, mask, shift, start, ds, skip)
	}
}

// writePublishSP is EnqueueSP's worker: write the batch and publish it (reserved, then tail).
// Preconditions as for the writers; the caller is the only producer.
func writePublishSP(r *Ring, start uint64, ds []desc.Desc, skip int) {
	if !raceEnabled {
		switch curImpl.Load() {
		case implAVX:
			writeBatchAVX(&r.slots[0], r.mask, r.shift, start, &ds[0], len(ds), skip, &r.reserved, &r.tail)
			return
		case implMOVQ:
			writeBatchMOVQ(&r.slots[0], r.mask, r.shift, start, &ds[0], len(ds), skip, &r.reserved, &r.tail)
			return
		}
	}
	writePublishSPGo(r, start, ds, skip)
}

// dequeueBatch is Dequeue's worker: copy [h, h+len(dst)) into dst and release it (hwHead, the
// head seqcount's write section, swHead). Preconditions as for dequeueAsm.
func dequeueBatch(r *Ring, h uint64, dst []desc.Desc) {
	if !raceEnabled && curImpl.Load() != implGo {
		dequeueAsm(&r.slots[0], r.mask, h, &dst[0], len(dst), &r.hwHead, &r.seq.seq, &r.swHead)
		return
	}
	dequeueGo(r, h, dst)
}
