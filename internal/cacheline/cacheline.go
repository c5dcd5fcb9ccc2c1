// Package cacheline holds the one padding size the module's packages separate hot fields by.
package cacheline

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// Pad is the padding unit between groups of fields written by different parties: the platform's
// cache line as golang.org/x/sys/cpu knows it (cpu.CacheLinePad: 64 bytes on amd64, 128 on
// arm64, 256 on s390x), and at least 128 bytes, two 64-byte lines, so that the adjacent-line
// prefetcher of Intel CPUs does not couple them either. ring's TestLayout checks the offsets
// against the line size klauspost/cpuid/v2 reads from the running CPU.
const Pad = max(128, unsafe.Sizeof(cpu.CacheLinePad{}))
