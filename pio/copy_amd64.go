//go:build amd64 && gc && !purego

package pio

import (
	"sync/atomic"

	"github.com/klauspost/cpuid/v2"
)

// The amd64 seam: one assembly call per run of quadwords (a packet, or the two pieces of one that
// wraps), never one per quadword. Two families of writers:
//
//   - non-temporal ("asm-nt", "asm-movnti"): what a copy into the real chip's write-combining
//     send buffer wants; the stores bypass the caches and merge in the write-combining buffers,
//     and SFENCE at the end orders those weakly ordered stores before the caller's next store
//     (the publishing store of the buffer's state);
//   - write-back ("asm", the default): ordinary whole-quadword and aligned 32-byte stores, for
//     the model's send buffer, which is ordinary cached memory that the model's chip reads right
//     back. There a non-temporal store sends the line to DRAM and the fence waits for it, and the
//     chip's read then misses: BenchmarkPIOCopy measures the difference (the README quotes it).
//
// Preconditions, established by writeQWs: dst and src hold at least n*8 bytes, n >= 1; dst is
// 8-byte aligned (the send buffer is 64-byte aligned and every offset a multiple of 8), so every
// store is a whole quadword and the 32-byte ones aligned after the head loop; src may have any
// alignment.

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

// writeQWsAVXWB stores with MOVQ up to the first 32-byte boundary of dst, then 32 bytes at a
// time with VMOVDQA, the rest with MOVQ; no fence. Requires AVX.
//
//go:noescape
func writeQWsAVXWB(dst, src *byte, n int)

// writeQWsMOVQ stores each quadword with MOVQ, eight per loop; no fence. Any amd64.
//
//go:noescape
func writeQWsMOVQ(dst, src *byte, n int)

const (
	implGo     int32 = iota
	implAVX          // non-temporal, AVX
	implMOVNTI       // non-temporal, MOVNTI
	implAVXWB        // write-back, AVX
	implMOVQ         // write-back, MOVQ
)

// hasAVX: the CPU reports AVX with OS support for the YMM state (klauspost/cpuid/v2 checks
// OSXSAVE); set once at init, read-only after.
var hasAVX = cpuid.CPU.Supports(cpuid.AVX)

var implementations = []string{"asm", "asm-nt", "asm-movnti", "go"}

// curImpl is the selected writer: written by init and setImpl (atomic), read by every writeQWs.
var curImpl atomic.Int32

func init() { curImpl.Store(bestWB()) }

// bestNT is the non-temporal writer the CPU supports best.
func bestNT() int32 {
	if hasAVX {
		return implAVX
	}
	return implMOVNTI
}

// bestWB is the write-back writer the CPU supports best.
func bestWB() int32 {
	if hasAVX {
		return implAVXWB
	}
	return implMOVQ
}

func setImpl(name string) (restore func(), ok bool) {
	var v int32
	switch name {
	case "asm":
		v = bestWB()
	case "asm-nt":
		v = bestNT()
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
	case implAVXWB:
		writeQWsAVXWB(&dst[0], &src[0], n)
	case implMOVQ:
		writeQWsMOVQ(&dst[0], &src[0], n)
	default:
		writeQWsGo(dst, src)
	}
}
