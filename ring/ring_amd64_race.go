//go:build amd64 && gc && !purego && race

package ring

import "github.com/gosdma/gosdma/desc"

// The race detector does not see stores made by assembly, so under -race the ring publishes and
// releases its indices with sync/atomic only (Write's assembly writers still write the slots,
// which the detector need not see: they are ordered by the atomic tail). The production path's
// ordering is argued in the package doc ("Memory ordering", O5) and tested without -race by
// TestStressOrderingLitmus.

// enqueueSP is EnqueueSP's worker: the Go path, sync/atomic stores.
func enqueueSP(r *Ring, ds []desc.Desc, skip int) (uint64, error) { return enqueueSPGo(r, ds, skip) }

// dequeue is Dequeue's worker: the Go path, sync/atomic stores.
func dequeue(r *Ring, dst []desc.Desc) int { return dequeueGo(r, dst) }
