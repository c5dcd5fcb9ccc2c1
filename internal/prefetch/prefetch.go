// Package prefetch asks the CPU to bring cache lines closer ahead of their use: for writing
// (Write, WriteLines: the line comes exclusive, so that the stores and locked instructions that
// follow do not wait for a second transfer to take it from the core that holds it, as they do
// after a load, which leaves it shared) or for reading (Read).
//
// Go has no prefetch intrinsic for user code. On amd64 (gc, outside the purego tag) each is a
// tiny assembly function (PREFETCHW, PREFETCHT0): a call of about 1-2 ns, which pays where it
// overlaps a cross-core transfer of a line written on another core (hundreds of ns on a VM) with
// other work. Elsewhere they are no-ops.
//
// A prefetch is a hint: it never faults (an address need not be mapped) and changes no memory,
// so it cannot change what a program computes, and the race detector sees no access.
//
// PREFETCHW is issued without a CPUID test (CPUID.80000001H:ECX.PRFCHW): every 64-bit AMD
// processor has it (3DNow!'s prefetch, since the K6-2), Intel's report it from Broadwell on, and
// earlier Intel 64 processors execute its encoding (0F 0D /1) as a no-op, which is what let
// Windows 8.1, which requires PrefetchW, run on them. A test (TestPrefetchChangesNothing) executes it
// on the running CPU.
package prefetch

import "unsafe"

// LineSize is the cache line the prefetches step by: 64 bytes on the targets that have them.
const LineSize = 64

// Write prefetches the cache line of p for writing (amd64: PREFETCHW).
func Write(p unsafe.Pointer) { write(p) }

// WriteLines prefetches for writing the n cache lines from p's on (n <= 0: none), in one call.
func WriteLines(p unsafe.Pointer, n int) { writeLines(p, n) }

// Read prefetches the cache line of p for reading (amd64: PREFETCHT0).
func Read(p unsafe.Pointer) { read(p) }
