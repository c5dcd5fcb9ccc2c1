//go:build amd64 && gc && !purego

package sdma

// getg returns the address of the calling goroutine's runtime g: one MOV from thread-local
// storage, no system call. It names the goroutine running now: no two running goroutines share
// it, and the runtime reuses it only after its goroutine has exited. ticketLock's bias uses it
// to know its owner (see biasRec). Only where canBias is true.
func getg() uintptr

// canBias reports whether getg works on this build (amd64, gc, not purego).
const canBias = true
