//go:build amd64 && gc && !purego

package pio

import (
	"sync/atomic"

	"github.com/klauspost/cpuid/v2"
)

// The amd64 seam: one assembly call per run of quadwords (a packet, or the two pieces of one that
// wraps), never one per quadword. Both writers store with non-temporal hints, as a copy into
// write-combining MMIO wants (the stores bypass the caches and merge in the write-combining
// buffers), and end with SFENCE, which orders those weakly ordered stores before anything the
// caller stores next: the publishing store of the buffer's state. Preconditions, established by
// writeQWs: dst and src hold at least n*8 bytes, n >= 1; dst is 8-byte aligned for the
// non-temporal stores to be whole quadwords (the send buffer is 64-byte aligned and every offset
// a multiple of 8); src may have any alignment.

// writeQWsMOVNTI stores each quadword with MOVNTI (SSE2: every amd64), eight per loop, then
// SFENCE.
//
//go:noescape
func writeQWsMOVNTI(dst, src *byte, n int)

// writeQWsAVX stores with MOVNTI up to the first 32-byte boundary of dst, then 32 bytes at a time
// with VMOVNTDQ (aligned; loads with VMOVDQU), the rest with MOVNTI, then SFENCE and VZEROUPPER.
// Requires AVX.
//
//go:noescape
func writeQWsAVX(dst, src *byte, n int)

const (
	implGo int32 = iota
	implAVX
	implMOVNTI
)

// hasAVX: the CPU reports AVX with OS support for the YMM state (klauspost/cpuid/v2 checks
// OSXSAVE); set once at init, read-only after.
var hasAVX = cpuid.CPU.Supports(cpuid.AVX)

var implementations = []string{"asm", "asm-movnti", "go"}

// curImpl is the selected writer: written by init and setImpl (atomic), read by every writeQWs.
var curImpl atomic.Int32

func init() { curImpl.Store(bestAsm()) }

func bestAsm() int32 {
	if hasAVX {
		return implAVX
	}
	return implMOVNTI
}

func setImpl(name string) (restore func(), ok bool) {
	var v int32
	switch name {
	case "asm":
		v = bestAsm()
	case "asm-movnti":
		v = implMOVNTI
	case "go":
		v = implGo
	default:
		return func() {}, false
	}
	old := curImpl.Swap(v)
	return func() { curImpl.Store(old) }, true
}

// writeQWs writes len(src)/8 whole quadwords of src to dst (len(dst) >= that).
func writeQWs(dst, src []byte) {
	n := len(src) >> 3
	if n == 0 {
		return
	}
	_ = dst[n*8-1] // the assembly does no bounds checks
	switch curImpl.Load() {
	case implAVX:
		writeQWsAVX(&dst[0], &src[0], n)
	case implMOVNTI:
		writeQWsMOVNTI(&dst[0], &src[0], n)
	default:
		writeQWsGo(dst, src)
	}
}
