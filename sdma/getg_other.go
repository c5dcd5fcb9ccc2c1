//go:build !(amd64 || arm64) || !gc || purego

package sdma

// getg is not available on this build (haveGetg): the own-goroutine checks use goroutine ids
// and a stack search instead (gid, manualPass), and no lock is biased (canBias).
func getg() uintptr { return 0 }

// haveGetg reports whether getg works on this build (amd64 or arm64, gc, not purego).
const haveGetg = false

// canBias reports whether the locks may be biased on this build (amd64 with getg).
const canBias = false
