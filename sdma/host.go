package sdma

import (
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"

	goidpkg "github.com/gosdma/gosdma/internal/goid"
)

// Hosts: the goroutines that run an engine's passes in a call of their own.
//
// Callbacks and wakeups run on whichever goroutine runs the pass that completes their txreq, with
// the engine's locks held: the engine's goroutine (refused by ownGoroutine), or the caller of a
// call that runs a pass on its own goroutine. A Close (or Shutdown, or an event on the same
// engine) from such a callback would wait for the locks its own goroutine holds. The calls that
// are not on the packet path register their goroutine as a host of the engine for as long as they
// may run a pass (Stop, Start and the other events, InjectHalt, ProgressSchedule, SendWait while it
// drives the engine or gives back a wakeup, Shutdown's drain, Close's sw clean), so that Close,
// Shutdown and the events can refuse such a call with ErrInvalid instead of deadlocking. On an
// engine with a goroutine, a direct Process registers too (hostProcess), and a direct Poll records
// its goroutine in Engine.pollG (a registration of its own, two stores under the head lock). On a
// Manual engine they are its packet path and record nothing: their caller holds hwMu, which knows
// its holder where the build has getg (amd64 and arm64, gc, not purego: manualPass).

// gid identifies the calling goroutine among the running ones: its runtime g (getg, one load)
// where the build has it, else its id (goid, microseconds). A host's entry is removed (deferred)
// before its goroutine ends, so a g the runtime reuses never matches a stale entry.
func gid() uint64 {
	if haveGetg {
		return uint64(goidpkg.G())
	}
	return goid()
}

// hostKind says what a host holds while a callback of its pass runs (for a callback's
// runtime.Goexit, goexit.go: callerExited).
type hostKind uint8

const (
	// hostHead: the head lock only (headMu; on a Manual engine hwMu): ProgressSchedule,
	// SendWait (its drive is Poll, or Process on a Manual engine; its wakeup give-back),
	// Shutdown's drive.
	hostHead hostKind = iota
	// hostEvent: hwMu, which the call's deferred unlock releases, and the head lock (hwMu on a
	// Manual engine): an event, InjectHalt, Close's clean of the engine.
	hostEvent
	// hostProcess: hwMu, which nothing deferred releases, and headMu: a direct Process of an
	// engine with a goroutine (processDirect). (A direct Poll of one registers in Engine.pollG,
	// as hostHead.)
	hostProcess
)

// hostEntry is one registration.
type hostEntry struct {
	g    uint64
	kind hostKind
}

// hostSet is the hosts of one engine (see above). The zero value is empty.
type hostSet struct {
	// n is the number of entries. Written (atomic add) under mu by add and remove; read by has,
	// which skips the lock (and the caller's gid) when it is 0, the common case of a Close.
	n  atomic.Int32
	mu sync.Mutex
	// gs holds the registrations, the latest last (a goroutine may host twice: an event from a
	// callback that another engine's event runs). Guarded by mu.
	gs []hostEntry
}

// add registers the calling goroutine as a host of kind k and returns its gid for remove.
func (s *hostSet) add(k hostKind) uint64 {
	g := gid()
	s.mu.Lock()
	s.gs = append(s.gs, hostEntry{g, k})
	s.n.Add(1)
	s.mu.Unlock()
	return g
}

// remove drops g's latest registration (add's answer).
func (s *hostSet) remove(g uint64) {
	s.mu.Lock()
	for i := len(s.gs) - 1; i >= 0; i-- {
		if s.gs[i].g == g {
			s.gs = append(s.gs[:i], s.gs[i+1:]...) // keeps the order: the latest stays last
			s.n.Add(-1)
			break
		}
	}
	s.mu.Unlock()
}

// has reports whether the caller hosts the engine now; *me is the caller's gid, computed on first
// need (0: not yet).
func (s *hostSet) has(me *uint64) bool {
	_, ok := s.kindOf(me)
	return ok
}

// kindOf returns the kind of the caller's latest registration, if it has one; *me as has's.
func (s *hostSet) kindOf(me *uint64) (hostKind, bool) {
	if s.n.Load() == 0 {
		return 0, false
	}
	if *me == 0 {
		*me = gid()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.gs) - 1; i >= 0; i-- {
		if s.gs[i].g == *me {
			return s.gs[i].kind, true
		}
	}
	return 0, false
}

// hostedErr is the refusal of op called from a callback, wakeup or Sink that a pass on the
// caller's own goroutine runs for engine engine.
func hostedErr(op string, engine int) error {
	return txErr(op, ErrInvalid, "called from a callback that a pass of engine "+itoa(engine)+" runs on this goroutine (in a Stop, Start, InjectHalt, ProgressSchedule, SendWait, Shutdown, Close, Process or Poll): it would wait for itself")
}

// ownPass refuses op when the caller's goroutine is e's goroutine or one of its hosts (see
// above): op would wait for e's locks, which that goroutine holds. nil otherwise.
func (e *Engine) ownPass(op string) error {
	if err := e.ownGoroutine(op); err != nil {
		return err
	}
	var me uint64
	var walked int8
	if e.hosts.has(&me) || e.pollHeld(&me) || e.manualPass(&me, &walked) {
		return hostedErr(op, e.idx)
	}
	return nil
}

// InPass reports whether the caller runs inside a pass of e: on e's goroutine, or in a Sink,
// completion callback, drained callback or wakeup that a pass of e (Process, Poll, or an event:
// Stop, Start, SendWait, ...) runs on the caller's goroutine, where e's Close, Shutdown and events
// are refused with ErrInvalid. Whatever waits there for e's completions (a layer above's Close
// waiting for its requests) waits for itself: the pass the caller is in completes them only
// after the caller returned. It tells goroutines apart as those refusals do:
// one load per check where the build has getg; elsewhere (purego, other ports) a runtime.Stack
// read, and while another goroutine holds a Manual engine's lock a call from a pass of another
// Manual engine is reported in e's pass too. Not for the packet path.
func (e *Engine) InPass() bool { return e.ownPass("InPass") != nil }

// pollHeld reports whether the caller runs a direct Poll's pass of e (pollG); *me as has's.
func (e *Engine) pollHeld(me *uint64) bool {
	g := e.pollG.Load()
	if g == 0 {
		return false
	}
	if *me == 0 {
		*me = gid()
	}
	return g == *me
}

// ownPass is Engine.ownPass for every engine of dev (Close, Shutdown).
func (dev *Device) ownPass(op string) error {
	if err := dev.ownGoroutine(op); err != nil {
		return err
	}
	var me uint64
	var walked int8
	for _, e := range dev.engines {
		if e.hosts.has(&me) || e.pollHeld(&me) || e.manualPass(&me, &walked) {
			return hostedErr(op, e.idx)
		}
	}
	return nil
}

// manualPass reports whether the caller runs a direct pass of Manual engine e (a Process or Poll
// on its own goroutine, whose Sink or callback called the caller): it holds e's hwMu, the
// engine's one lock, which a Close or an event would wait for. Those passes are the engine's
// packet path and record nothing of their own: where the build has getg (haveGetg: amd64 and
// arm64, gc, not purego), the lock knows its holder (ticketLock.heldBy: the bias record, or the
// ticket holder's getg), exactly: a call from a Sink or callback of another engine's pass is
// answered by e's holder, whoever holds it. Elsewhere (purego, other ports), while hwMu is held
// (by anyone), the caller's stack is searched for a Manual engine's Process or Poll
// (inManualPass, microseconds: only while a pass or event holds the lock). That search does not
// name the engine: there, a call from a Sink or callback of another Manual engine's direct pass
// is refused too while e's hwMu is held by another goroutine. *me as has's; *walked caches the
// search (0: not yet, 1: in a pass, -1: not).
func (e *Engine) manualPass(me *uint64, walked *int8) bool {
	if !e.manual {
		return false
	}
	if haveGetg {
		if *me == 0 {
			*me = gid()
		}
		return e.hwMu.heldBy(uintptr(*me))
	}
	if !e.hwMu.ticketsOut() {
		return false
	}
	if *walked == 0 {
		*walked = -1
		if inManualPass() {
			*walked = 1
		}
	}
	return *walked > 0
}

// The names of the functions inManualPass looks for on the caller's stack.
var (
	fnProcess       = enginePrefix + "Process"
	fnProcessInner  = enginePrefix + "process"
	fnProcessDirect = enginePrefix + "processDirect"
	fnPoll          = enginePrefix + "Poll"
	fnPollPass      = enginePrefix + "progressLocked"
	fnPollFlush     = enginePrefix + "runFlush"
	enginePrefix    = reflect.TypeFor[Engine]().PkgPath() + ".(*Engine)."
)

// inManualPass reports whether the calling goroutine is inside a direct Process or Poll of a
// Manual engine (manualPass, on builds without getg: purego, other ports): its stack holds
// Process calling process but not from processDirect (that is an engine with a goroutine: a
// registered host), or Poll calling the pass or the flush directly (not through pollDirect).
// Inlined calls count as frames (runtime.CallersFrames). A runtime.Callers walk: microseconds.
func inManualPass() bool {
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(2, pcs)
		if n < len(pcs) {
			pcs = pcs[:n]
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	frames := runtime.CallersFrames(pcs)
	var callee, callee2 string // the frames below this one, nearest first
	for {
		f, more := frames.Next()
		switch f.Function {
		case fnProcess:
			if callee == fnProcessInner && callee2 != fnProcessDirect {
				return true
			}
		case fnPoll:
			if callee == fnPollPass || callee == fnPollFlush {
				return true
			}
		}
		if !more {
			return false
		}
		callee2, callee = callee, f.Function
	}
}
