package sdma

import "runtime"

// goid returns the calling goroutine's id, read from the header runtime.Stack writes
// ("goroutine 42 [running]:"). It costs microseconds, so it runs only where a call from the wrong
// goroutine would deadlock (Close, Shutdown, Event: see ownGoroutine; a host's registration where
// the build has no getg: gid) and once when an engine's goroutine starts, never per packet.
// Goroutine ids are never reused.
func goid() uint64 {
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

// ownGoroutine refuses op when called on e's hardware-model goroutine (from a Sink, a completion
// callback, a drained callback or a wakeup that it runs): op would wait for that goroutine, which
// is waiting in op. nil elsewhere, and always on a Manual engine (its passes run on callers'
// goroutines: ownPass, host.go, refuses the calls from those of them that register as hosts; a
// Close from a Sink or callback that a Manual engine's Process or Poll runs deadlocks, and is
// documented as forbidden).
func (e *Engine) ownGoroutine(op string) error {
	if id := e.hwGoid.Load(); id != 0 && id == goid() {
		return ownGoroutineErr(op, e.idx)
	}
	return nil
}

func ownGoroutineErr(op string, engine int) error {
	return txErr(op, ErrInvalid, "called on engine "+itoa(engine)+"'s own goroutine (from a Sink, a callback or a wakeup): it would wait for itself")
}

// ownGoroutine is Engine.ownGoroutine for every engine of dev, with one goid lookup.
func (dev *Device) ownGoroutine(op string) error {
	var me uint64
	for _, e := range dev.engines {
		id := e.hwGoid.Load()
		if id == 0 {
			continue
		}
		if me == 0 {
			me = goid()
		}
		if id == me {
			return ownGoroutineErr(op, e.idx)
		}
	}
	return nil
}
