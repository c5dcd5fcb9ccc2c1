//go:build amd64 && gc && !purego && !race

package dma

import (
	"sync/atomic"
	"unsafe"
)

// The owner's stores of an index entry's words (index.go), amd64 outside -race and purego: plain
// MOVs, no LOCK prefix. They are used only by the goroutine that made the entry busy with a
// compare-and-swap of its meta word, so they have no second writer, and only between that CAS
// and the store-release (relaxed.StoreRelease64) that ends the busy state: the CAS is a full
// barrier, and under x86-TSO (Intel SDM vol. 3A §9.2.2) plain stores become visible in program
// order, so a reader that loads a new word before its second load of meta sees meta busy or
// with the next generation there, and retries (the seqcount protocol). An atomic Store would be
// an XCHG, a locked instruction, for each word. The pointer stores are ordinary Go pointer
// assignments, so the compiler emits the garbage collector's write barrier for them.
//
// Each atomic type holds its value at offset 0 (the other fields have size 0), which the casts
// rely on; the atomic types keep the word aligned, so each MOV is single-copy atomic and a
// reader's atomic Load never sees a torn word.

// ownStore64 stores v to *p; the caller owns the busy entry that holds p.
func ownStore64(p *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(p)) = v }

// ownStorePtr stores v to *p; the caller owns the busy entry that holds p.
func ownStorePtr[T any](p *atomic.Pointer[T], v *T) { *(**T)(unsafe.Pointer(p)) = v }

// ownAdd64 adds d to *p with a plain ADDQ to memory, no LOCK prefix: NOT atomic against a second
// writer. For a Registration's per-P use count, whose only writer is the goroutine pinned to its P
// (see Registration); readers load it atomically.
func ownAdd64(p *atomic.Int64, d int64) { *(*int64)(unsafe.Pointer(p)) += d }
