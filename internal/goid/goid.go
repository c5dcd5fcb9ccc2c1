// Package goid identifies the calling goroutine, for the checks that must know which goroutine
// runs them (sdma's own-goroutine checks and its locks' holders, pio's chip goroutine's Goexit):
// its runtime g (G, one load) where the build has it, else its goroutine id (ID, from
// runtime.Stack, microseconds).
package goid

import (
	"runtime"
	"sync/atomic"
)

// idCalls counts ID's calls (each one a runtime.Stack): written by ID (atomic add), read by
// IDCalls, for tests that prove a path does not take the fallback.
var idCalls atomic.Uint64

// IDCalls returns how many times ID ran (each a runtime.Stack) in this process.
func IDCalls() uint64 { return idCalls.Load() }

// Self identifies the calling goroutine among the running ones: its runtime g (G, one load, no
// allocation) where the build has it (HaveG), else its id (ID, microseconds and an allocation).
// Never 0. A g is reused once its goroutine has exited, an id never: a holder of Self's value
// must forget it before its goroutine ends.
func Self() uint64 {
	if HaveG {
		return uint64(G())
	}
	return ID()
}

// ID returns the calling goroutine's id, read from the header runtime.Stack writes
// ("goroutine 42 [running]:"). It costs microseconds: never per packet. Goroutine ids are never
// reused, and never 0 (0: the header could not be read).
func ID() uint64 {
	idCalls.Add(1)
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) < len(prefix) {
		return 0
	}
	var id uint64
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
