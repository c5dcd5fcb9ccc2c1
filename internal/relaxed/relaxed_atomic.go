//go:build !amd64 || !gc || purego || race

package relaxed

import "sync/atomic"

// The portable seam, and the only one under -race: the sync/atomic operations themselves,
// sequentially consistent (stronger than the package promises) and seen by the race detector.

func add64(p *atomic.Uint64, n uint64)   { p.Add(n) }
func store64(p *atomic.Uint64, v uint64) { p.Store(v) }
func store32(p *atomic.Uint32, v uint32) { p.Store(v) }

// impl names the implementation, for the tests and benchmarks.
const impl = "atomic"

// Plain is false here: the stores are sync/atomic's (see relaxed_amd64.go).
const Plain = false
