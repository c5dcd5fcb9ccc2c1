package sdma

import (
	"runtime"

	goidpkg "github.com/gosdma/gosdma/internal/goid"
)

// getg returns the address of the calling goroutine's runtime g (internal/goid.G: thread-local
// storage on amd64, the g register on arm64; one load, no system call, no allocation), or 0 where
// the build has none (haveGetg false). It names the goroutine running now: no two running
// goroutines share it, and the runtime reuses it only after its goroutine has exited. The
// own-goroutine checks use it (gid, ticketLock.heldBy) wherever haveGetg, and ticketLock's bias
// to know its owner (biasRec) where canBias; without it they use goroutine ids and a stack search
// (gid, manualPass), and no lock is biased. The lock and gid call goidpkg.G directly: this
// wrapper, inlined, leaves an inline-mark NOP at each call site (2.6 instructions per packet in
// PacketPath's icount); the tests use it.
func getg() uintptr { return goidpkg.G() }

// haveGetg reports whether getg works on this build (amd64 or arm64, gc, not purego): the locks
// then know their holder (ticketLock.ownerG) and gid is one load.
const haveGetg = goidpkg.HaveG

// canBias reports whether the locks may be biased on this build (see ticketLock, "The bias"):
// getg, and amd64, whose total store order the bias's Dekker pair and its plain stores are
// reasoned on; arm64 has getg but no bias.
const canBias = haveGetg && runtime.GOARCH == "amd64"
