//go:build amd64 && gc && !purego && !race

package relaxed

import (
	"sync/atomic"
	"unsafe"
)

// The amd64 seam, outside -race (whose detector does not see these plain accesses) and purego:
// ordinary Go stores through unsafe.Pointer, which the compiler inlines into the caller as one
// MOV (or an ADD to memory), with no call and no LOCK prefix. Each atomic.Uint64 and
// atomic.Uint32 holds its value at offset 0 (its other fields, noCopy and the alignment marker,
// have size 0), which the casts rely on; p must not be nil. The atomic types keep the word
// aligned, so each MOV is single-copy atomic and a reader's atomic Load never sees a torn word.
//
// Why an ordinary Go store is a store-release here. The hardware: under x86-TSO (Intel SDM vol.
// 3A §9.2.2; AMD APM vol. 2 §7.2) a plain MOV store is not reordered with the earlier loads and
// stores of its core. The compiler: gc threads every store, and every sync/atomic operation
// (intrinsics with a memory result), through one memory chain in program order, and schedules
// each load before the next store on that chain (a load's memory argument is the state before
// that store); no pass moves a store above an earlier memory operation or sinks it below a later
// store. So the caller's earlier loads and stores stay before the store, as a release needs.
// What the compiler may do, and the package never promised against: satisfy a later ordinary
// load by the same goroutine before the store (forwarding, as the store buffer does), and drop a
// store that a later store to the same word overwrites with no memory read between them (two
// release stores of which readers may always have missed the first). The earlier assembly call
// did neither, at about 2 ns a call.

// add64 adds n to *p: a load, an add and a plain store (ADDQ to memory), no LOCK prefix: NOT
// atomic against a second writer (one writer only).
func add64(p *atomic.Uint64, n uint64) { *(*uint64)(unsafe.Pointer(p)) += n }

// store64 stores v to *p with a plain MOVQ: a store-release under x86-TSO, not seq-cst.
func store64(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }

// store32 stores v to *p with a plain MOVL: a store-release under x86-TSO, not seq-cst.
func store32(p *atomic.Uint32, v uint32) { *(*uint32)(unsafe.Pointer(p)) = v }

// impl names the implementation, for the tests and benchmarks.
const impl = "plain"

// Plain is true where StoreRelease64 and StoreRelease32 are plain stores (see the package
// documentation): a caller may then spell such a store out as an ordinary store through
// unsafe.Pointer, where the inlined call would leave the compiler's inline-mark NOPs in a loop.
const Plain = true
