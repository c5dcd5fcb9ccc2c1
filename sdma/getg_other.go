//go:build !amd64 || !gc || purego

package sdma

// getg is not available on this build; no lock is biased here (canBias).
func getg() uintptr { return 0 }

// canBias reports whether getg works on this build (amd64, gc, not purego).
const canBias = false
