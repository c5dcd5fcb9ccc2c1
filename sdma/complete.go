package sdma

import (
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/iowait"
	"github.com/gosdma/gosdma/internal/relaxed"
)

// The completion side.
//
// The completion pass (hfi1: sdma_make_progress) runs one at a time under headMu (on a Manual
// engine under hwMu, its head lock too: see Engine.headMu; "headMu held" below means that
// lock), inside a write section of the ring's head seqcount. It walks swHead up to hwHead; for each txreq whose last
// descriptor it passes it frees the txreq's slots (StoreSwHead, the store-release that hands them
// back to producers), unmaps what the txreq mapped, calls its callback once with its status, and
// drops its iowait's busy count, waking drainers at zero (complete_tx). Then, if it freed
// anything, it wakes parked waiters in order while the freed room lasts (sdma_desc_avail).
//
// Callbacks, wakeups and drained callbacks run on the pass's goroutine (the hardware goroutine
// in CompleteInterrupt mode, the caller of Poll, Process or another call that runs a pass
// otherwise) with headMu held: they must not block, and must not call Poll, Process or
// ProgressSchedule. Device.Close, Shutdown and Event refuse with ErrInvalid when called from them
// on the engine's goroutine or on a host's (host.go: every call that runs a pass; a Manual
// engine's Process and Poll are known by its lock, manualPass). They may Send.
// One that panics does not unwind the pass: the panic is recovered and recorded
// (Engine.CallbackError, EngineStats.CallbackPanics), the txreq counts as completed, and the pass
// goes on.
// One that calls runtime.Goexit ends its goroutine: goexit.go releases the pass's locks (and on
// the engine's goroutine halts the engine).

// makeProgressHW runs one completion pass (Poll's) for a caller that holds hwMu (an interrupt, the
// state machine).
func (e *Engine) makeProgressHW() int {
	e.lockHeadHW()
	n := e.progressLocked()
	e.unlockHeadHW()
	return n
}

// progressLocked is the completion pass with headMu held (hfi1: sdma_make_progress inside
// write_seqlock(&sde->head_lock)). It inlines: the pass is progressPass's.
func (e *Engine) progressLocked() int { return e.progressPass(false) }

// progressPass is the completion pass (progressLocked), and with intr the pass of an interrupt
// (Engine.interrupt, hfi1: sdma_engine_interrupt, after the head's write-back, when intrRunsPass
// says it runs one): on a Manual engine in this same frame (hwMu is its head lock), else under the
// head lock (makeProgressHW). With intr, hwMu held; without, headMu held.
//
// The pass of one txreq (a Manual engine's packet of one or two descriptors) runs walkLocked's
// step and completeTx without their calls.
func (e *Engine) progressPass(intr bool) int {
	if intr && !e.manual {
		n := e.makeProgressHW()
		e.hw.completed, e.hw.intrPass = e.hwHead(), true
		return n
	}
	r := e.ring
	r.BeginWrite()
	e.passStats.passes.Add(1)
	n := 0
	if hw, sw := r.HWHead(), r.SwHead(); hw != sw {
		if i := (hw - 1) & e.mask; e.txRing[i] != nil && hw-sw == uint64(e.txRing[i].numDesc) {
			// One txreq, the last descriptor's, and nothing before it: its descriptors are
			// contiguous and end at hw-1, so [sw, hw) is all of them when they are hw-sw many.
			// walkLocked's step and completeTx for it.
			tx := e.txRing[i]
			e.txRing[i] = nil
			r.StoreSwHead(hw) // its slots are free before its callback runs; sw < hw
			var w *IOWait
			var c Completer
			if tx.numDesc == 1 && tx.nmaps == 1 && tx.soles[0] != 0 && tx.nregs == 0 && !tx.coalescing {
				// clean's first case, a packet of one sole kvaddr mapping (AddKVAddr's), and
				// nothing of its tail but the counts and the state: without clean's call and its
				// spills (TestCompleteOneSoleInline). Keep the two alike. The wait and the
				// callback are read after the unmap's call, not kept across it.
				d := tx.descs[0]
				if tx.dev.sole.UnmapSingleSole(dma.Addr(d.Addr()), d.Len(), dma.ToDevice, tx.soles[0]) != nil {
					tx.dev.unmapErrs.Add(1)
				}
				w, c = tx.wait, tx.complete
				tx.wait = nil
				tx.numDesc, tx.nmaps = 0, 0
				relaxed.StoreRelease32(&tx.state, txFree)
			} else {
				w, c = tx.wait, tx.complete
				tx.wait = nil
				tx.clean()
			}
			e.passStats.completed.Add(1)
			if c != nil {
				e.callComplete(c, tx, StatusOK, w)
			}
			if w != nil { // nested: w != nil && sdmaDec() would materialise a bool for the test
				d := w.drained // before the count drops: see drainedOf
				if w.sdmaDec() && d != nil {
					e.callDrained(w, d)
				}
			}
			n = 1
		} else {
			n = e.walkLocked(hw, StatusOK)
		}
		e.descAvail()
	}
	r.EndWrite()
	if intr {
		e.hw.completed, e.hw.intrPass = e.hwHead(), true
	}
	return n
}

// walkLocked completes, with status st, every txreq whose last descriptor lies in [swHead, to),
// and moves swHead to to. headMu held, inside a write section; to <= hwHead. The txreqs are taken
// in chunks: a chunk's mappings are undone in one batch (unmapChunkLocked), then its txreqs
// complete one by one, so each txreq is unmapped before its callback runs, as in the kernel.
//
// A pass over at most walkNoBatch descriptors (one packet of a Manual engine, an engine that
// keeps up) builds no batch: it holds at most that many txreqs, and each one's clean unmaps it.
func (e *Engine) walkLocked(to uint64, st Status) int {
	r := e.ring
	n := 0
	sw := r.SwHead()
	set := sw // the last swHead stored
	for sw != to {
		end := to
		if to-sw > walkNoBatch {
			end = e.unmapChunkLocked(sw, to)
		}
		for sw != end {
			i := sw & e.mask
			sw++
			if tx := e.txRing[i]; tx != nil {
				e.txRing[i] = nil
				r.StoreSwHead(sw) // its slots are free before its callback runs; sw <= to
				set = sw
				e.completeTx(tx, st)
				n++
			}
		}
	}
	if set != to {
		r.StoreSwHead(to)
	}
	return n
}

// walkNoBatch is the longest walk that unmaps each txreq in its clean instead of gathering a
// batch (unmapChunkLocked): a batch of two descriptors' unmaps would save at most one hold of a
// stripe lock, less than the scan that builds it.
const walkNoBatch = 2

// unmapChunkBatch is how many unmaps a completion pass gathers before it undoes them (at least
// one whole txreq is always taken, however many it has).
const unmapChunkBatch = 64

// unmapChunkLocked undoes, in one dma.UnmapAll call (a hold of each stripe lock of the mapping
// table per group of up to 16 entries, not one per entry), the mappings of the txreqs whose last
// descriptors lie in [sw, to), as many as fit in unmapChunkBatch, and returns where that chunk ends: the txreqs up to it have nothing left to
// unmap but the chunk's lone mapped txreq, if it has only one (hfi1: the sdma_txclean part of
// complete_tx, for a batch). headMu held.
//
// A chunk in which only one txreq mapped anything (a pass over one packet: a Manual engine, an
// engine that keeps up) builds no batch: that txreq keeps its descriptors, and its clean in
// completeTx unmaps them, one Unmap call each, before its callback runs, as complete_tx does.
//
// Sole mappings (AddKVAddr's, freed with a store) join the batch too, although each alone would
// take no lock: leaving them to each txreq's clean, between the callbacks, saved about 200
// instructions per packet but cost the engine-goroutine row about 18 % (PacketPath list/direct
// hw=goroutine, interleaved: 317 -> 380 ns/pkt): the batch writes every index entry of the pass
// before the first txreq goes back to the producer, whose maps then find them written.
func (e *Engine) unmapChunkLocked(sw, to uint64) uint64 {
	var lone *TxReq // the first mapped txreq of the chunk, not in us while it is the only one
	us := e.unmaps.us[:0]
	for sw != to && len(us) < unmapChunkBatch {
		tx := e.txRing[sw&e.mask]
		sw++
		if tx == nil || tx.nmaps == 0 {
			continue
		}
		if lone == nil {
			lone = tx
			continue
		}
		if len(us) == 0 {
			if us == nil {
				us = make([]dma.Unmap, 0, 2*unmapChunkBatch)
			}
			us = lone.takeUnmaps(us)
		}
		us = tx.takeUnmaps(us)
	}
	if len(us) > 0 {
		// As sdma_unmap_desc, an error is not the completion's, but it is counted as clean counts
		// one (Device.UnmapErrors): once for the batch, whose error names its first failed entry.
		if dma.UnmapAll(e.dev.mapper, us) != nil {
			e.dev.unmapErrs.Add(1)
		}
		clear(us) // the scratch keeps no bus addresses
	}
	e.unmaps.us = us[:0]
	return sw
}

// unmapBatch is the completion pass's scratch: the unmaps of one chunk. Guarded by headMu.
type unmapBatch struct{ us []dma.Unmap }

// takeUnmaps appends the unmaps of tx's mapped descriptors (hfi1: sdma_unmap_desc's arguments) to
// us and leaves tx with no descriptors, so that its clean unmaps nothing again.
//
// A txreq whose adds mapped nothing (registered memory, daddr: nmaps 0) is left as it is, its
// descriptors unread: its completion touches only the txreq's first cache line (the completion
// group, see TxReq), and its clean reads no descriptor either.
func (tx *TxReq) takeUnmaps(us []dma.Unmap) []dma.Unmap {
	if tx.nmaps == 0 {
		return us
	}
	ds := tx.descp[:tx.numDesc]
	us = appendUnmap(us, ds[0], tx.soleOf(0))
	for i := 1 + desc.EditDescs(ds[0].HeaderMode()); i < len(ds); i++ {
		us = appendUnmap(us, ds[i], tx.soleOf(i))
	}
	tx.numDesc, tx.nmaps = 0, 0
	return us
}

// appendUnmap appends the unmap of descriptor d, if its type says the library mapped it.
func appendUnmap(us []dma.Unmap, d desc.Desc, h dma.Sole) []dma.Unmap {
	switch d.MapType() {
	case desc.MapSingle:
		us = append(us, dma.Unmap{Addr: dma.Addr(d.Addr()), Size: d.Len(), Dir: dma.ToDevice, Kind: dma.KindSingle, Sole: h})
	case desc.MapPage:
		us = append(us, dma.Unmap{Addr: dma.Addr(d.Addr()), Size: d.Len(), Dir: dma.ToDevice, Kind: dma.KindPage})
	}
	return us
}

// completeTx finishes one txreq (hfi1: complete_tx): save the wait and the callback, clean (unmap;
// the txreq becomes txFree), call the callback, drop the iowait's busy count. progressPass has
// its own copy for the pass of one txreq (StatusOK), without this call: keep the two alike.
func (e *Engine) completeTx(tx *TxReq, st Status) {
	w, c := tx.wait, tx.complete
	tx.wait = nil
	tx.clean()
	if st == StatusOK {
		e.passStats.completed.Add(1)
	} else {
		e.stats.aborted.Add(1)
	}
	if c != nil {
		e.callComplete(c, tx, st, w)
	}
	if w != nil { // nested, as in progressPass
		d := w.drained // before the count drops: see drainedOf
		if w.sdmaDec() && d != nil {
			e.callDrained(w, d)
		}
	}
}

// callComplete, callDrained and callWakeup call the caller's completion-side callbacks so that
// a panic cannot leave the pass's locks held (headMu, the head seqcount's write section): it is
// recovered, recorded (CallbackError) and counted, and the pass goes on as if the callback had
// returned. The deferred recover costs a few nanoseconds and no allocation. A callback that
// calls runtime.Goexit ends the goroutine: callbackExited (goexit.go) finishes its step, and on
// the engine's goroutine run's handler releases the locks.
//
// Each calls recover only if the callback did not return (see Engine.packet): a recover that
// finds no panic is still a call into the runtime. w is the completion's iowait (nil: none), for
// a Goexit's handler: the completion drops its count after the callback.
func (e *Engine) callComplete(c Completer, tx *TxReq, st Status, w *IOWait) {
	returned := false
	defer func() {
		if !returned {
			e.callbackUnwound("completion", recover(), w)
		}
	}()
	c.Complete(tx, st)
	returned = true
}

// callDrained's drained is w's callback as the completion that drops w's busy count to 0 read it
// before the drop, never after: the drop wakes Drain, after which the owner may Init w
// (IOWait.Init refuses only a w with txreqs in flight), and a read of w.drained after the drop
// raced with Init's write of it (TestIOWaitInitAfterDrain). The read is ordered before Init's
// write: Init's load of a 0 count comes after the drop.
func (e *Engine) callDrained(w *IOWait, drained func(*IOWait)) {
	returned := false
	defer func() {
		if !returned {
			e.callbackUnwound("drained", recover(), nil)
		}
	}()
	drained(w)
	returned = true
}

func (e *Engine) callWakeup(w *IOWait, wakeup func(*IOWait, int)) {
	returned := false
	defer func() {
		if !returned {
			e.callbackUnwound("wakeup", recover(), nil)
		}
	}()
	wakeup(w, WakeAvail)
	returned = true
}

// callbackUnwound handles a callback named what that did not return: it panicked with p, or
// called runtime.Goexit (p nil). w: callComplete's.
func (e *Engine) callbackUnwound(what string, p any, w *IOWait) {
	if p != nil {
		e.callbackPanicked(what, p)
		return
	}
	e.callbackExited(what, w)
}

// recoverCallback records a panic of the callback named what (deferred by the call helpers).
func (e *Engine) recoverCallback(what string) { e.callbackPanicked(what, recover()) }

// callbackPanicked records that the callback named what panicked with p; nil is not a panic.
func (e *Engine) callbackPanicked(what string, p any) {
	if p != nil {
		e.stats.callbackPanics.Add(1)
		e.callbackErr.Store(&CallbackError{Engine: e.idx, Callback: what, Panic: p, Stack: debug.Stack()})
	}
}

// descAvail wakes parked waiters while the free descriptors last (hfi1: sdma_desc_avail, called
// with sdma_descq_freecnt): under the
// wait lock it takes waiters off dmawait in order, at most 20, stopping at the first whose need
// does not fit; after the lock it calls their wakeup callbacks, the top-priority waiter
// (priority<<4 + starved count) first. headMu held.
//
// With no waiter parked and no sleeper announced (Engine.sleepers) it returns without the wait
// lock. That is safe because a sleeper announces itself (an atomic add) before it reads the
// seqcount for its Progress check, and the pass reads the announcements after its seqcount store
// (BeginWrite, a store-release that a later load could otherwise pass) with a full barrier
// between the two: of the two, at least one sees the other (a Dekker pair). Either the sleeper
// sees the pass as progress and does not park, or the pass sees the sleeper and takes the lock,
// which waits for the sleeper's queueing. A sleeper queues (the list's count) before it
// withdraws its announcement, so there is no gap between the two.
//
// The barrier is the pass's own locked instruction (an atomic add of 0 to sleepers), or, with
// plainSleepers (linux/amd64 with membarrier(2), outside -race and purego), the sleeper's: the
// pass reads sleepers with a plain load and announceSleeper runs a process-wide barrier
// (internal/membarrier) between its announcement and its check, so every pass pays nothing and
// only a sleeper about to park pays a system call. A locked instruction is the costliest part of
// a pass's check: about 8 ns a packet on the one-txreq path (BenchmarkPayload 256 bytes).
//
// The check is all of descAvail, which inlines into the pass; the waking is wakeAvail's, kept
// out of line.
func (e *Engine) descAvail() {
	// The sleeper's barrier pairs with this load (see above); both counts are never negative.
	// The list's count is loaded with atomic.LoadInt32 on its word, the same load as
	// count.Load(), whose method wrapper would cost the unit that keeps descAvail inlined.
	if e.plainSleepers && atomic.LoadInt32(&e.sleepers)|atomic.LoadInt32((*int32)(unsafe.Pointer(&e.dmawait.count))) == 0 {
		return
	}
	e.descAvailSlow()
}

// descAvailSlow is the rest of descAvail, out of line so that descAvail's plain check inlines:
// with plainSleepers, a sleeper or a waiter was seen (wake); without, the check with the pass's
// own full barrier (an atomic add of 0 to sleepers) after its seqcount store, then the wake.
//
//go:noinline
func (e *Engine) descAvailSlow() {
	if !e.plainSleepers && atomic.AddInt32(&e.sleepers, 0)|e.dmawait.count.Load() == 0 {
		return
	}
	e.wakeAvail()
}

// wakeAvail is descAvail with a sleeper announced or a waiter parked: under the wait lock it takes
// the waiters that fit off dmawait and then wakes them. headMu held.
func (e *Engine) wakeAvail() {
	e.waitMu.Lock()
	if e.dmawait.head == nil {
		e.waitMu.Unlock()
		return
	}
	// The room is read only now, with a waiter to wake: FreeCnt loads the producers'
	// reservation index, a line they write on every send.
	avail := e.ring.FreeCnt()
	n := 0
	for w := e.dmawait.head; w != nil && n < waitBatchSize; {
		next := w.next
		if w.wakeup == nil {
			w = next
			continue
		}
		w.refreshLocked()
		if w.need > avail {
			break
		}
		avail -= w.need
		e.wakeBatch[n], e.wakeRank[n], e.wakeFn[n] = w, w.rank(), w.wakeup // before remove gives w's fields back
		e.dmawait.remove(w)
		n++
		w = next
	}
	e.waitMu.Unlock()
	e.wakeBatchLocked(n)
}

// wakeBatchLocked calls the wakeups of wakeBatch[:n], top priority first (by the ranks taken
// under the wait lock: once off the list a waiter may be queued again and its fields rewritten),
// and clears the batch. headMu held.
func (e *Engine) wakeBatchLocked(n int) {
	if n == 0 {
		return
	}
	top := 0
	for i := 1; i < n; i++ {
		top = iowait.UpdateTop(uint8(e.wakeRank[i]), uint8(e.wakeRank[top]), i, top)
	}
	e.stats.wakeups.Add(uint64(n))
	// Each entry is cleared before its wakeup runs: the ones left are the waiters a wakeup's
	// runtime.Goexit kept from being woken (callbackExited).
	w, fn := e.wakeBatch[top], e.wakeFn[top]
	e.wakeBatch[top], e.wakeFn[top] = nil, nil
	e.callWakeup(w, fn)
	for i := 0; i < n; i++ {
		if w, fn := e.wakeBatch[i], e.wakeFn[i]; w != nil {
			e.wakeBatch[i], e.wakeFn[i] = nil, nil
			e.callWakeup(w, fn)
		}
	}
}

// wakeAllLocked takes every waiter off dmawait and wakes it (hfi1: sdma_flush's wakeup loop), in
// the list's order: sdma_flush has no top-priority pick (that is sdma_desc_avail's), so every
// rank is 0 and wakeBatchLocked keeps the order. headMu held.
func (e *Engine) wakeAllLocked() {
	for {
		e.waitMu.Lock()
		n := 0
		for e.dmawait.head != nil && n < waitBatchSize {
			w := e.dmawait.head
			if w.wakeup != nil {
				e.wakeBatch[n], e.wakeRank[n], e.wakeFn[n] = w, 0, w.wakeup // list order (see above)
				n++
			}
			e.dmawait.remove(w)
		}
		more := e.dmawait.head != nil
		e.waitMu.Unlock()
		e.wakeBatchLocked(n)
		if !more {
			return
		}
	}
}

// Poll runs one completion pass on the caller's goroutine and returns the number of txreqs it
// completed (hfi1: sdma_make_progress, as the interrupt handler calls it). It also runs a
// pending flush. In CompletePoll mode this is how txreqs complete; in CompleteInterrupt mode it
// is harmless. It waits for a pass already running to end (on a Manual engine also for a
// Process). Not from a callback.
func (e *Engine) Poll() int {
	if !e.manual {
		return e.pollDirect()
	}
	if e.pending.Load() != 0 { // the word as a whole, as process tests it: one compare, no mask
		e.runFlush()
	}
	// The pass under the head lock (hwMu on a Manual engine), with no call but the pass's (Lock's
	// fast path inlines here).
	e.hwMu.Lock()
	n := e.progressLocked()
	e.hwMu.Unlock()
	return n
}

// pollDirect is Poll of an engine with a goroutine: its flush and its pass run with the caller
// recorded as the head lock's holder (pollG), so that a callback of theirs that calls Close,
// Shutdown or an event is refused (ownPass) and one that calls runtime.Goexit has the head lock
// released (callerExited). A pass with nothing to complete (the written-back head at swHead, read
// under the lock) runs no callback: it is the empty pass, without the gid, which costs
// microseconds where the build has no getg (gid).
func (e *Engine) pollDirect() int {
	if e.pending.Load()&pendFlush != 0 && !e.flushDeferred() {
		e.headMu.Lock()
		e.setPollG(gid())
		e.flushWorker()
		e.setPollG(0)
		e.headMu.Unlock()
	}
	e.headMu.Lock()
	n := 0
	if r := e.ring; !haveGetg && r.HWHead() == r.SwHead() {
		r.BeginWrite() // progressPass with nothing to walk: the pass still counts as progress
		e.passStats.passes.Add(1)
		r.EndWrite()
	} else {
		e.setPollG(gid())
		n = e.progressLocked()
		e.setPollG(0)
	}
	e.headMu.Unlock()
	return n
}

// setPollG records g as the direct Poll's head-lock holder (pollG). Head lock held.
func (e *Engine) setPollG(g uint64) { relaxed.StoreRelease64(&e.pollG, g) }

// ProgressSchedule forces a completion pass if at least an eighth of the ring is in process
// (hfi1: sdma_engine_progress_schedule, which forces the progress interrupt). The pass runs on
// the caller's goroutine, unless one is running already. It reports whether it ran one; a nil
// engine runs none (the kernel returns at once for a NULL engine). The forced interrupt's
// handler, sdma_engine_interrupt, runs either way, and does what every interrupt does: it counts
// the interrupt (progress_int_cnt; here Stats().Interrupts) and reloads the count interrupt's
// descriptor count, also when a running pass does its work. The reload takes effect at once, as
// the handler's register write does: the next count interrupt comes DescIntr descriptors after
// the descriptor the hardware model had reached, also in the middle of a pass (the model applies
// it at its next count window's end or pass start, counting from there: takeCountReload). With
// less than an eighth in process, or a nil engine, it forces no interrupt, and counts none.
func (e *Engine) ProgressSchedule() bool {
	if e == nil || e.ring.InProcess() < e.ring.Size()/8 {
		return false
	}
	e.stats.forcedIntrs.Add(1) // the handler's count: the interrupt is forced from here on
	// The reload is the hardware pass's to apply: the count is hwMu's state, not the head lock's.
	// It took effect where the chip is now (its head), which the pass reads after the bit.
	e.progressAt.Store(e.hw.head.Load())
	e.pending.Or(pendCount)
	if !e.tryLockHead() {
		return false // a pass is running: it does what the forced one would
	}
	e.progressHosted()
	e.unlockHead()
	return true
}

// progressHosted is ProgressSchedule's pass, with the caller registered as a host (host.go) while
// its callbacks run. Head lock held.
func (e *Engine) progressHosted() {
	defer e.hosts.remove(e.hosts.add(hostHead))
	e.progressLocked()
}

// runFlush completes the flush list aborted (hfi1: sdma_field_flush → sdma_flush's flushlist
// part), inside a head write section as the kernel's flush worker holds head_lock.
// The caller does not hold hwMu (Poll, which calls it when any pending bit is set: a fault plan
// alone is left to the next hardware pass, takeFaults); runFlushHW is for one that does (the
// hardware pass).
func (e *Engine) runFlush() {
	if e.pending.Load()&pendFlush == 0 || e.flushDeferred() {
		return
	}
	e.lockHead()
	e.flushWorker()
	e.unlockHead()
}

func (e *Engine) runFlushHW() {
	if e.flushDeferred() {
		return
	}
	e.lockHeadHW()
	e.flushWorker()
	e.unlockHeadHW()
}

// flushWorker is the flush worker's work (hfi1: sdma_field_flush): the flush list completed
// aborted, and on an engine that is not running every parked waiter woken in list order, as
// sdma_flush does after the list (a waiter queued with QueueWait on a stopped engine, which no
// completion pass will wake before the next Start). Head lock held.
func (e *Engine) flushWorker() {
	e.flushSection()
	if e.gate.Load()&gateRunning == 0 {
		e.wakeAllLocked()
	}
}

// flushDeferred is the flush worker's ordering rule (hfi1: sdma_flush flushes the descq ring
// first, then the flush list, "to avoid ordering issues"): while the engine is not running and
// its ring still holds txreqs submitted before the flush list's (frozen in s80 until e81, or a
// halt's recovery before its sw clean), the flush list is left to the sw clean that must come
// before the engine runs again (or Close's), which completes the ring first and then the list.
// Completing the list now would complete later txreqs before earlier ones. The pending flag is
// cleared first (the sw clean flushes regardless), so that the hardware goroutine does not spin
// on it, and so that a Send that sets it again after a sw clean emptied the ring gets its flush.
func (e *Engine) flushDeferred() bool {
	e.pending.And(^pendFlush)
	return e.gate.Load()&gateRunning == 0 && !e.ring.Empty()
}

// flushSection is the flush inside a head write section. Head lock held.
func (e *Engine) flushSection() {
	e.ring.BeginWrite()
	e.flushLocked()
	e.ring.EndWrite()
}

// flushLocked completes every txreq on the flush list with StatusAborted: the ones on it when it
// takes the list (hfi1: sdma_flush's list_splice_init of the flushlist), after any that an
// earlier flush took and did not complete (its callback's runtime.Goexit, goexit.go). A txreq sent to the
// flush list meanwhile (by a callback of this flush, say, that resends what was aborted) sets
// pendFlush and waits for the next flush (the hardware goroutine's next pass, a Process or
// Poll, a sw clean): a flush that took it too would run for as long as such a callback resends,
// holding the head lock (and, in a sw clean, hwMu). Close's flush leaves nothing: its producers
// are quiesced and its callbacks' sends refused (ErrClosed). headMu held.
func (e *Engine) flushLocked() {
	e.pending.And(^pendFlush)
	e.flushMu.Lock()
	l := &e.flushing // the engine's, not a local: what a callback's Goexit left in it, the next flush completes first
	l.pushBackList(&e.flush)
	e.flushMu.Unlock()
	for tx := l.PopFront(); tx != nil; tx = l.PopFront() {
		e.completeTx(tx, StatusAborted)
	}
}

// swCleanLocked is the sw clean (hfi1: sdma_sw_clean_up_task + sdma_flush): it waits for the
// producers past the gate (quiesce), completes the txreqs the hardware finished with StatusOK
// (sdma_make_progress), the rest of the ring and the flush list with StatusAborted, resets the
// ring's indices to 0 (descq_tail = descq_head = 0, *head_dma = 0; the generation restarts with
// them), and wakes every parked waiter: after each of the two walks that freed room, the waiters
// that fit, top priority first (sdma_desc_avail, which sdma_make_progress and sdma_flush_descq
// call when they made progress), then the rest in the list's order (sdma_flush). The engine is not in s99 (the gate's running bit is clear)
// or is closing. hwMu held, so the hardware reads nothing being unmapped.
func (e *Engine) swCleanLocked() {
	e.exitHalted.Store(false) // taken down or recovered: a halt of a Goexit is over (exitHalt)
	e.quiesce()
	r := e.ring
	e.lockHeadHW()
	r.BeginWrite()
	e.passStats.passes.Add(1)
	if hw := r.HWHead(); hw != r.SwHead() {
		e.walkLocked(hw, StatusOK)
		e.wakeAvail() // sdma_make_progress's sdma_desc_avail, for the room it freed
	}
	tail := r.Tail() // == the reservation index: quiesce saw every reservation published
	if r.HWHead() != tail {
		r.SetHWHead(tail)
	}
	if r.SwHead() != tail {
		e.walkLocked(tail, StatusAborted)
		e.wakeAvail() // sdma_flush_descq's sdma_desc_avail: the whole ring is free now
	}
	e.flushLocked()
	r.EndWrite()
	// Quiescent: no producer past the gate, no hardware pass (hwMu), no completion pass (headMu).
	r.Reset(0)
	e.hw.head.Store(0)
	e.hw.sinceIntr = 0
	e.dropCountReload()
	e.hw.idle = true
	e.wakeAllLocked()
	e.unlockHeadHW()
}
