//go:build !linux || !amd64 || !gc || purego || race

package dma

// Outside linux/amd64, -race and purego every use count of a Registration is an atomic add (see
// Registration): there is no process-wide barrier to pair plain adds with.

// plainCounts reports false: registrations count with atomic adds.
func plainCounts() bool { return false }

// processBarrier is never called here (plainCounts is false).
func processBarrier() { panic("dma: processBarrier without plain counts") }
