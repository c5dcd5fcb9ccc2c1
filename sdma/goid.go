package sdma

import (
	"sync/atomic"

	goidpkg "github.com/gosdma/gosdma/internal/goid"
)

// goidCalls, if set (by in-package tests, before any goroutine runs), counts goid's calls.
var goidCalls *atomic.Int64

// goid returns the calling goroutine's id (internal/goid: from runtime.Stack's header). It costs
// microseconds: it is gid's fallback where the build has no getg, never per packet. Goroutine
// ids are never reused.
func goid() uint64 {
	if goidCalls != nil {
		goidCalls.Add(1)
	}
	return goidpkg.ID()
}

// ownGoroutine refuses op when called on e's hardware-model goroutine (from a Sink, a completion
// callback, a drained callback or a wakeup that it runs): op would wait for that goroutine, which
// is waiting in op. nil elsewhere, and always on a Manual engine (its passes run on callers'
// goroutines: ownPass, host.go, refuses the calls from those).
//
// The goroutine is compared by gid (host.go): its runtime g, one load, where the build has getg,
// else its id from runtime.Stack (microseconds); either is computed only on an engine with a
// goroutine.
func (e *Engine) ownGoroutine(op string) error {
	if id := e.hwGid.Load(); id != 0 && id == gid() {
		return ownGoroutineErr(op, e.idx)
	}
	return nil
}

func ownGoroutineErr(op string, engine int) error {
	return txErr(op, ErrInvalid, "called on engine "+itoa(engine)+"'s own goroutine (from a Sink, a callback or a wakeup): it would wait for itself")
}

// ownGoroutine is Engine.ownGoroutine for every engine of dev, with one gid lookup.
func (dev *Device) ownGoroutine(op string) error {
	var me uint64
	for _, e := range dev.engines {
		id := e.hwGid.Load()
		if id == 0 {
			continue
		}
		if me == 0 {
			me = gid()
		}
		if id == me {
			return ownGoroutineErr(op, e.idx)
		}
	}
	return nil
}
