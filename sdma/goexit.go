package sdma

import "github.com/gosdma/gosdma/sdma/internal/sm"

// Goexit: a Sink, or a completion, drained or wakeup callback, that calls runtime.Goexit (a test's
// t.FailNow or require does) ends the goroutine that called it. Unlike a panic it cannot be
// recovered, and the goroutine ends in the middle of a pass, holding the engine's locks: hwMu
// (a Sink's call), and from a callback the head lock and, in a completion pass or a flush, the
// head seqcount's write section.
//
// The call helpers (packet's delivery, flushSink, callComplete, callDrained, callWakeup) defer a
// handler that runs only if the user's code did not return; with no panic to recover, the code
// called Goexit. The handler finishes the step the user's code interrupted (a completion's iowait
// count, a wakeup batch's remaining waiters) and records in e.hw.exit
// what the goroutine holds, which each helper knows from where it is called:
//
//   - a Sink runs only in a hardware pass (process: hwMu held, and nothing else);
//   - a callback runs only in a completion pass, a flush, a sw clean or a wakeup, all under the
//     head lock; its write section is open if the head seqcount is odd (only the head lock's
//     holder writes it). On the engine's goroutine, that is always inside a hardware pass, so
//     hwMu is held too (headMu is then a lock of its own: the engine is not Manual).
//
// On the engine's goroutine, run's deferred handler (runDone) releases them, exactly those, and
// the goroutine is gone: the engine halts (s99 -> s50_hw_halt_wait, its halt cause a *HaltError
// that names the Goexit, CauseHalt), and stays halted: the ring and the flush list wait for
// Close's sw clean (or a Stop's, which takes it down for good), which completes each txreq once,
// StatusOK if the Sink had returned for its packet, else StatusAborted; sends get ErrNotRunning
// (flushed) meanwhile, and the other events its *HaltError. The callbacks the Goexit kept from
// running (a drained callback due, the wakeups of the interrupted batch) run last, with no lock
// held, before the goroutine ends.
//
// On another goroutine (a caller's Process), a Sink's Goexit releases hwMu in the handler itself
// (no deferred call of the library's is below it) and halts the engine the same way, which then
// recovers with Stop and Start. A callback's Goexit on a caller's goroutine is handled by
// callerExited, which knows the call from its host registration (a direct Process of an engine
// with a goroutine registers too, and a direct Poll of one records itself in pollG), or, with
// none, as a direct Process or Poll of a Manual engine.

// hwExit is what a Goexit in a Sink or callback left to do, recorded by the call helper that saw
// it for the release (exitRelease). Guarded by hwMu (e.hw.exit): written by the handler of a
// Goexit on a goroutine that holds hwMu, read by its release.
type hwExit struct {
	what string // the user's code that called Goexit: "the Sink's Deliver", "a completion callback", …
	// head: a callback's Goexit: the head lock is held too, and the head seqcount's write section
	// is open if the count is odd.
	head bool
	// drained is the drained callback due, bound to the iowait whose busy count the interrupted
	// completion dropped to 0 (the callback read before the drop: see callDrained). wakes are the
	// waiters that the interrupted wakeup batch took off the wait list and had not woken.
	drained func()
	wakes   []lateWake
}

// lateWake is a waiter a Goexit kept from being woken, with the wakeup callback read while it
// was parked (see Engine.wakeFn).
type lateWake struct {
	w      *IOWait
	wakeup func(*IOWait, int)
}

// onOwnGoroutine reports whether the caller runs on e's hardware-model goroutine. It costs a gid
// (a goid, microseconds, where the build has no getg): only for a Goexit's handler.
func (e *Engine) onOwnGoroutine() bool {
	id := e.hwGid.Load()
	return id != 0 && id == gid()
}

// sinkExited is the handler of a Goexit in the Sink's method what (Deliver, Queue, Flush): hwMu
// held, nothing else. held is how many packets behind the chip's head the sink holds unsent (a
// BatchSink's batch, but for a packet whose Queue exited: its head was not advanced). The head is
// written back up to the packets the sink finished with (their write-back may be pending: the
// pass coalesces it), so that the clean completes them StatusOK, and the held ones and the one
// that exited StatusAborted; the batch is dropped. On a caller's goroutine (Process) it releases
// hwMu now; on the engine's, runDone does.
func (e *Engine) sinkExited(what string, held int) {
	if sent, r := e.heldStart(held), e.ring; sent != r.HWHead() {
		r.StoreHWHead(sent)
	}
	e.hw.headToHost = false
	b := &e.hw.batch
	b.held, b.queued, b.bytes, b.flags = 0, 0, 0, 0
	clear(b.errs)
	clear(e.hw.segs[:])
	e.hw.exit.what = "the Sink's " + what
	if !e.onOwnGoroutine() {
		e.exitRelease(false)
	}
}

// heldStart returns the ring index where the last k packets before the chip's head begin: a
// txreq is one packet, recorded in txRing at its last descriptor, so the scan back from the head
// passes k entries and stops at the next one (or at the written-back head, which a completion
// pass may be walking up to: nothing below it is read). hwMu held.
func (e *Engine) heldStart(k int) uint64 {
	lo, i := e.ring.HWHead(), e.hwHead()
	for ; i != lo; i-- {
		if e.txRing[(i-1)&e.mask] != nil {
			if k == 0 {
				break
			}
			k--
		}
	}
	return i
}

// callbackExited is the handler of a Goexit in a completion-side callback named what: the head
// lock held; the write section open if the count is odd. It finishes what the pass owed the
// interrupted step: w is the completion's iowait (its count is dropped; a drained callback due
// runs late, after the release), and a wakeup batch's waiters not yet woken are woken late too.
// A flush's txreqs not yet completed stay in e.flushing, which the next flush completes first:
// the handler sets pendFlush so that the engine's next pass, Poll or Process runs that flush even
// if nothing is sent to the flush list again (Close's sw clean at the latest). On the engine's goroutine runDone
// releases the locks; on a caller's, callerExited.
func (e *Engine) callbackExited(what string, w *IOWait) {
	var x hwExit
	if w != nil {
		if d := w.drained; w.sdmaDec() && d != nil { // read before the drop (see callDrained)
			x.drained = func() { d(w) }
		}
	}
	for i := range e.wakeBatch {
		if wb := e.wakeBatch[i]; wb != nil {
			x.wakes = append(x.wakes, lateWake{wb, e.wakeFn[i]})
			e.wakeBatch[i], e.wakeFn[i] = nil, nil
		}
	}
	x.what, x.head = "a "+what+" callback", true
	if e.flushing.Len() != 0 {
		// A flush's txreqs that the exit kept from completing: the next flush completes them
		// first, so ask for one (the engine may go on: a caller's Poll or Process, or the
		// engine's next pass, runs it), as a Send to the flush list does.
		e.pending.Or(pendFlush)
	}
	if !e.onOwnGoroutine() {
		e.callerExited(what, x)
		return
	}
	e.hw.exit = x
}

// callerExited is callbackExited on a caller's goroutine, which ends in the pass of the call that
// runs it: what the goroutine holds is known from that call's host registration (host.go:
// hostKind; pollG for a direct Poll of an engine with a goroutine), or, with none, the call is a
// direct Process or Poll of a Manual engine, which hold the head lock only (hwMu there). It closes the write section if open and releases the head
// lock (hwMu of a Process on a Manual engine included); an event's hwMu is its deferred unlock's.
// The engine goes on (the pass stopped after a completed step: the next one finds the rest), or,
// for a Goexit in an event's recovery or a Process's halt, is left in the state the chain reached,
// which the next Stop and Start (or Close) cleans up; the Goexit is recorded as a CallbackError.
// (A Goexit in Close's clean leaves the rest of Close undone: the next Close does it.) A direct
// Process of an engine with a goroutine is a host (hostProcess: hwMu and headMu, both released
// here), and a direct Poll of one is recorded in pollG (headMu). Then it runs the callbacks the
// Goexit kept from running, deferred (see exitRelease).
func (e *Engine) callerExited(what string, x hwExit) {
	var me uint64
	kind, ok := e.hosts.kindOf(&me)
	polled := e.pollHeld(&me) // a direct Poll of an engine with a goroutine (pollDirect)
	switch {
	case ok:
	case polled:
		kind = hostHead
	case !e.manual:
		return // not reached: every pass on a caller's goroutine of such an engine is registered
	default:
		kind = hostHead // a direct Process or Poll of a Manual engine: hwMu, its head lock
	}
	e.stats.callbackPanics.Add(1)
	e.callbackErr.Store(&CallbackError{Engine: e.idx, Callback: what, Goexit: true})
	if r := e.ring; r.Seq().Count()&1 != 0 {
		r.EndWrite()
	}
	if polled {
		e.setPollG(0) // before the head lock goes: the next holder's Poll may record itself
	}
	switch {
	case kind == hostHead:
		e.headLock().Unlock()
	case kind == hostProcess: // hwMu and headMu, neither released by a deferred call
		e.headMu.Unlock()
		e.hwMu.Unlock()
	case !e.manual: // hostEvent: headMu; hwMu, the head lock of a Manual engine, is the event's defer's
		e.headMu.Unlock()
	}
	for i := len(x.wakes) - 1; i >= 0; i-- {
		defer e.lateWakeup(x.wakes[i])
	}
	if x.drained != nil {
		defer e.lateDrained(x.drained)
	}
}

// runDone is run's deferred handler: it closes done, and if run did not return, the goroutine is
// ending in a Goexit of a Sink or callback (a panic there was recovered by its helper; one of the
// library's own goes on to end the program), and it releases what the helper recorded as held
// (exitRelease). A Goexit elsewhere (a Mapper's, say) left no record and is not handled.
func (e *Engine) runDone(returned *bool) {
	defer e.runEnded()
	if *returned {
		return
	}
	if p := recover(); p != nil {
		panic(p)
	}
	if e.hw.exit.what != "" { // hwMu held: the record is this goroutine's
		e.exitRelease(true)
	}
}

// runEnded is the last thing the engine's goroutine does: it stops naming the goroutine (hwGid:
// its g may go to a later goroutine, which must not be refused as this one) and closes done. After
// the callbacks a Goexit kept from running (exitRelease's deferred calls), which still run on it.
func (e *Engine) runEnded() {
	e.hwGid.Store(0)
	close(e.done)
}

// exitRelease halts the engine on the Goexit that e.hw.exit records and releases, exactly, what
// the exiting goroutine holds: the write section if open, the head lock if a callback exited,
// and hwMu; then it runs the callbacks the Goexit kept from running, each deferred, so that one
// that calls Goexit again does not keep the next from running. gone: the goroutine is the
// engine's own, which is then gone for good. hwMu held.
func (e *Engine) exitRelease(gone bool) {
	x := e.hw.exit
	e.hw.exit = hwExit{}
	e.exitHalt(x.what, gone)
	if x.head {
		if r := e.ring; r.Seq().Count()&1 != 0 {
			r.EndWrite()
		}
		e.unlockHeadHW()
	}
	e.hwMu.Unlock()
	for i := len(x.wakes) - 1; i >= 0; i-- {
		defer e.lateWakeup(x.wakes[i]) // in batch order: deferred calls run last first
	}
	if x.drained != nil {
		defer e.lateDrained(x.drained)
	}
}

// exitHalt records the Goexit of what as the engine's halt cause and halts it: a running engine
// goes to s50_hw_halt_wait without its halt worker (nothing confirms the halt: it waits for Stop
// or Close), and producers stop at the gate. gone marks the engine's goroutine gone (hwGone).
// hwMu held.
func (e *Engine) exitHalt(what string, gone bool) {
	where := "a caller's goroutine (Process)"
	if gone {
		where = "the engine's goroutine"
		e.hwGone.Store(true)
	}
	h := &HaltError{Engine: e.idx, Cause: CauseHalt, Index: e.hwHead(), Desc: e.headDesc(),
		Detail: what + " called runtime.Goexit on " + where + ": the engine stays halted until Stop or Close"}
	e.stMu.Lock()
	if e.sm.cur == sm.S99Running {
		e.sm.step(sm.E90SwHalted, "runtime.Goexit") // its halt worker never runs: see exitHalt
		e.gate.And(^gateRunning)
		e.exitHalted.Store(true) // Shutdown does not wait for it (idleForShutdown)
	}
	e.stMu.Unlock()
	e.recordHalt(evItem{ev: sm.E90SwHalted, halt: h})
}

// lateWakeup and lateDrained call a callback that a Goexit kept from running, with no lock held
// (exitRelease). A panic is recovered and recorded, as on the pass.
func (e *Engine) lateWakeup(lw lateWake) {
	defer e.recoverCallback("wakeup")
	lw.wakeup(lw.w, WakeAvail)
}

func (e *Engine) lateDrained(drained func()) {
	defer e.recoverCallback("drained")
	drained()
}

// goneEvent is event for an engine whose goroutine a Goexit ended (hwGone): E00 (Stop) takes it
// down and cleans it (the sw clean, also of a clean the Goexit interrupted); any other event is
// refused with the recorded *HaltError: with no goroutine the engine cannot run again. hwMu held.
func (e *Engine) goneEvent(ev sm.Event, cause string) error {
	if ev != sm.E00GoHwDown {
		return e.HaltCause()
	}
	e.raise(ev, cause, nil)
	e.swCleanLocked()
	return nil
}
