package dma

import "github.com/gosdma/gosdma/internal/membarrier"

// The asymmetric barrier of Registration's plain use counts (see Registration): Deregister, the
// rare side, pays with membarrier(2) for the fence the per-packet Acquire leaves out
// (internal/membarrier: only on linux/amd64 outside -race and purego, where the owner's adds are
// plain instructions, store_amd64.go; elsewhere every count is atomic).

// plainCounts reports whether registrations may count their uses with plain adds: the
// process-wide barrier is available (probed and registered once, at the first Register).
func plainCounts() bool { return membarrier.Available() }

// processBarrier runs a full memory barrier on every thread of the process. Only called once
// plainCounts reported true.
func processBarrier() { membarrier.Barrier() }
