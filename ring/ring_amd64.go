//go:build amd64 && gc && !purego

package ring

import (
	"sync/atomic"

	"github.com/gosdma/gosdma/desc"
	"golang.org/x/sys/cpu"
)

// The amd64 seam: Write, EnqueueSP and Dequeue are one assembly call per batch each. Write's
// writers are in ring_amd64.s; EnqueueSP and Dequeue (ring_amd64_norace.go, outside -race) fold
// their checks and index updates into their call, so that the exported method inlines and its
// caller calls the assembly directly.
//
// The writers write src[0:n] into the ring whose slot 0 is at base, starting at index start:
// the descriptor k goes to slot (start+k)&mask; its qw1 bits 3:2 become ((start+k)>>shift)&3
// unless 1 <= k <= skip (AHG edit descriptors, copied raw). Preconditions, checked by Write, not
// by the assembly:
//
//   - base points to mask+1 slots, mask+1 a power of two >= 2, base 16-byte aligned (the AVX
//     variant uses aligned stores and faults otherwise; alignedSlots gives 64);
//   - shift = log2(mask+1), 1 <= shift <= 62;
//   - src points to n descriptors, 1 <= n <= mask (so no slot is written twice);
//   - 0 <= skip <= n-1.
//
// The caller publishes the slots afterwards with an atomic store of the tail.

// writeBatchAVX stores each descriptor with one 16-byte VMOVDQA, which is single-copy atomic on
// CPUs that report AVX (Intel SDM vol. 3A §9.1.1; AMD APM vol. 2 §7.3.2). Requires AVX.
//
//go:noescape
func writeBatchAVX(base *desc.Desc, mask uint64, shift uint, start uint64, src *desc.Desc, n int, skip int)

// writeBatchMOVQ stores each descriptor with two 8-byte MOVQ stores (qw0 then qw1). Any amd64.
//
//go:noescape
func writeBatchMOVQ(base *desc.Desc, mask uint64, shift uint, start uint64, src *desc.Desc, n int, skip int)

const (
	implGo int32 = iota
	implAVX
	implMOVQ
)

// hasAVX: the CPU reports AVX (and the OS saves YMM state); set once at init, read-only after.
var hasAVX = cpu.X86.HasAVX

var implementations = []string{"asm", "asm-movq", "go"}

// curImpl is the selected implementation: written by init and setImplementation (atomic store),
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
		writeBatchAVX(&slots[0], mask, shift, start, &ds[0], len(ds), skip)
	case implMOVQ:
		writeBatchMOVQ(&slots[0], mask, shift, start, &ds[0], len(ds), skip)
	default:
		writeGo(slots, mask, shift, start, ds, skip)
	}
}
