//go:build (amd64 || arm64) && gc && !purego

package sdma

import "runtime"

// getg returns the address of the calling goroutine's runtime g, from where the runtime keeps it
// (getg_amd64.s: thread-local storage, one MOV; getg_arm64.s: the g register, R28): no system
// call, no allocation. It names the goroutine running now: no two running goroutines share it,
// and the runtime reuses it only after its goroutine has exited. The own-goroutine checks use it
// (gid, ticketLock.heldBy) wherever haveGetg, and ticketLock's bias to know its owner (biasRec)
// where canBias.
func getg() uintptr

// haveGetg reports whether getg works on this build (amd64 or arm64, gc, not purego): the locks
// then know their holder (ticketLock.ownerG) and gid is one load.
const haveGetg = true

// canBias reports whether the locks may be biased on this build (see ticketLock, "The bias"):
// getg, and amd64, whose total store order the bias's Dekker pair and its plain stores are
// reasoned on; arm64 has getg but no bias.
const canBias = runtime.GOARCH == "amd64"
