// Package pcpu gives gosdma's per-packet paths a cheap "which P am I on" for per-P (per-CPU)
// caches and sharded counters: the user-space stand-in for the kernel's this_cpu_ptr and
// get_cpu()/put_cpu() (the per-CPU magazines of kmem_cache, the IOMMU's iova rcache).
//
// Pin returns the index of the P (the scheduler's processor) the calling goroutine runs on and
// keeps it there: until Unpin the goroutine is not preempted, so no other goroutine runs on
// that P, and state indexed by the returned id is the caller's alone. Between Pin and Unpin the
// caller must not block, allocate much, or call anything that may park (channel operations,
// mutexes, syscalls): keep it to a few loads and stores, as sync.Pool does.
//
// Hint returns the same index without the pin: the goroutine may move at once, so state indexed
// by it is only local most of the time and must still be updated with atomics (a sharded
// counter). It costs the same as Pin and Unpin together.
//
// Both are the runtime's procPin/procUnpin (sync.Pool's own), reached with go:linkname; the
// runtime keeps them for exactly such callers. Under the purego tag, where gosdma promises no
// reach into the runtime, Enabled is false: Pin returns -1 and callers fall back to their
// shared path.
package pcpu

import "runtime"

// Max is the number of per-P slots a cache should allocate: GOMAXPROCS now, at least 1, read
// afresh at each call (it is not remembered). A cache sizes its slots with it once, when made;
// a P index at or above its slot count (GOMAXPROCS was raised later) must take the caller's
// shared path.
func Max() int { return max(1, runtime.GOMAXPROCS(0)) }
