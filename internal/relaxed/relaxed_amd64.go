//go:build amd64 && gc && !purego && !race

package relaxed

import "sync/atomic"

// The amd64 seam, outside -race (whose detector does not see assembly stores) and purego:
// relaxed_amd64.s. Each atomic.Uint64 and atomic.Uint32 holds its value at offset 0 (its other
// fields, noCopy and the alignment marker, have size 0), which the assembly relies on; p must
// not be nil. The atomic types keep the word aligned, so each MOV is single-copy atomic.

// add64 adds n to *p with ADDQ to memory, no LOCK prefix: a load, an add and a plain store.
//
//go:noescape
func add64(p *atomic.Uint64, n uint64)

// store64 stores v to *p with a plain MOVQ: a store-release under x86-TSO, not seq-cst.
//
//go:noescape
func store64(p *atomic.Uint64, v uint64)

// store32 stores v to *p with a plain MOVL: a store-release under x86-TSO, not seq-cst.
//
//go:noescape
func store32(p *atomic.Uint32, v uint32)

// impl names the implementation, for the tests and benchmarks.
const impl = "asm"
