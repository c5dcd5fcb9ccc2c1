//go:build !amd64 || !gc || purego || race

package dma

import "sync/atomic"

// The owner's stores of an index entry's words everywhere but amd64 outside -race and purego
// (store_amd64.go): the sync/atomic stores, sequentially consistent, which the seqcount protocol
// needs on weakly ordered machines (a plain store after the busy CAS could become visible before
// it on arm64) and which the race detector sees.

// ownStore64 stores v to *p; the caller owns the busy entry that holds p.
func ownStore64(p *atomic.Uint64, v uint64) { p.Store(v) }

// ownStorePtr stores v to *p; the caller owns the busy entry that holds p.
func ownStorePtr[T any](p *atomic.Pointer[T], v *T) { p.Store(v) }

// ownAdd64 adds d to *p (an atomic add here: see store_amd64.go).
func ownAdd64(p *atomic.Int64, d int64) { p.Add(d) }
