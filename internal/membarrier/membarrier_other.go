//go:build !linux || !amd64 || !gc || purego || race

package membarrier

// Available reports false: outside linux/amd64, -race and purego every pair keeps its fences.
func Available() bool { return false }

// Barrier is never to be called here (Available is false).
func Barrier() { panic("membarrier: Barrier without Available") }
