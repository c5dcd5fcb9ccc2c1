package pio

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/goid"
	"github.com/gosdma/gosdma/internal/iowait"
)

// Waiter is a producer waiting for credits on a context's wait list (hfi1: the iowait a QP puts
// on sc->piowait in pio_wait). Its wakeup runs once per time it is taken off the list by a
// release pass, on that pass's goroutine: the chip's (the chip goroutine, or a manual chip's
// Process), ReleaseUpdate's, or the flush of Disable, Restart, Close or a halt's recovery. It
// runs without locks held (the kernel wakes under alloc_lock when sc_disable flushes piowait;
// here that wake-up waits until the lock is let go), so it may retry BufferAlloc on the context;
// it must not block (a Close from a wake-up on the chip goroutine, which would wait for that
// goroutine, is refused with ErrInvalid, and so is one there whose work would wait for another
// chip goroutine that waits, through its own Close, for this one: see Close; the refusal holds
// until the wake-up returns, so a wake-up that retries such a Close loops for ever: it must
// return and leave the Close to another goroutine). It never runs
// inside BufferAlloc: the pass that BufferAlloc runs when room is short leaves its wake-ups to
// the chip's next pass, as the kernel's sc_piobufavail (hfi1_qp_wakeup) only schedules the
// QP's work on a workqueue (see BufferAlloc), so no wake-up runs on a goroutine that holds a
// buffer it has just allocated. A panic in it is recovered and counted (Stats.WakeupPanics);
// the rest of the batch is woken, also when it calls runtime.Goexit (which then ends the
// goroutine; on the chip goroutine it halts the context as a Sink's would, see Sink). Close
// waits for the wake-ups in progress on other goroutines (see Close), so none runs once Close
// has returned.
type Waiter struct {
	wakeup func(*Waiter)
	ch     chan struct{} // the blocking waiters' channel (newChanWaiter)
	next   *Waiter       // list link, under the waitMu of the context in on
	// ticket orders w's park among the parks of the context in on (SendContext.parks when it
	// was linked): written by QueueWait and read by a flush (wakeAll), under that waitMu.
	ticket uint64
	// on is the context whose wait list holds w, nil while w is on none. Set from nil by
	// QueueWait (compare-and-swap) and cleared by the pass or CancelWait that takes w off, each
	// under that context's waitMu; loaded by QueueWait and CancelWait of any context, so that a
	// call on another context leaves the list and count of the one that holds w alone.
	on atomic.Pointer[SendContext]
	// prio is the priority set by SetPriority, 0..255 (iowait's u8 priority): stored by the
	// owner at any time; loaded by QueueWaitSent (head or tail) and by the release pass that
	// takes w off (its wake-order key), each under the waitMu of the context in on.
	prio atomic.Uint32
	// starved is the starved count (iowait starved_cnt, a u8 wrapping at 256): updated by the
	// QueueWaitSent that parks w, under the waitMu of the context it claimed, and stored 0 by
	// StarveClear (the owner, no lock: QueueWaitSent's update is a compare-and-swap, so a
	// StarveClear between its load and its store is not undone);
	// loaded by the pass that takes w off (under that waitMu) and by Starved (no lock: atomic).
	starved atomic.Uint32
}

// Init sets the wake-up function. A Waiter must not be re-initialised while queued. It leaves
// the priority and the starved count as they are.
func (w *Waiter) Init(wakeup func(*Waiter)) { w.wakeup = wakeup }

// SetPriority sets the priority w queues with (hfi1: the iowait priority that the QP's
// init_priority gives, iowait_get_priority in pio_wait and again in sc_piobufavail). A waiter
// with a priority above 0 is parked at the head of the wait list (iowait_queue), and of the
// batch a release pass takes off the list the first one with the highest priority<<4 + starved
// count is woken first, that key taken in the kernel's u8 arithmetic (iowait_priority_update_top:
// a key of 256 or more wraps, so a priority of 16 ranks as 0). The priority is the kernel's u8:
// p outside 0..255 is taken modulo 256 (256 is 0, -1 is 255). It may be called at any time: a
// queued w keeps its place, and its wake-up ranks with the priority it has when the pass takes
// it off. The zero Waiter has priority 0, as QueueWait assumes.
func (w *Waiter) SetPriority(p int) { w.prio.Store(uint32(uint8(p))) }

// Starved returns the starved count (iowait starved_cnt), 0..255: QueueWaitSent with pktsSent
// false adds one (like the kernel's u8 it wraps from 255 to 0), with pktsSent true (and QueueWait)
// sets it to 0, and so does StarveClear(true).
func (w *Waiter) Starved() int { return int(w.starved.Load()) }

// StarveClear ends a producer's send pass (hfi1: iowait_starve_clear, which hfi1_do_send calls
// when its loop ends): with pktsSent true, the pass sent packets, the starved count goes back
// to 0; with pktsSent false it is left as it is. In the kernel a QP that sent packets in a pass
// that ended without waiting (its work done, not out of buffers) starts its next wait from 0:
// without StarveClear a Waiter's count goes back to 0 only at a QueueWaitSent with pktsSent
// true, so a producer starved once keeps that rank through every later pass that needed no
// wait. It may be called at any time: a queued w keeps its place, and its wake-up ranks with
// the count it has when the pass takes it off.
func (w *Waiter) StarveClear(pktsSent bool) {
	if pktsSent {
		w.starved.Store(0)
	}
}

// starve is iowait_queue's starved count update (a compare-and-swap: a StarveClear at the same
// time is not undone).
func (w *Waiter) starve(pktsSent bool) {
	for {
		old := w.starved.Load()
		if w.starved.CompareAndSwap(old, uint32(iowait.Starve(pktsSent, uint8(old)))) {
			return
		}
	}
}

// key is w's wake-order key (iowait_priority_update_top), under the waitMu of the context in on.
func (w *Waiter) key() uint8 { return iowait.Key(uint8(w.prio.Load()), uint8(w.starved.Load())) }

func newChanWaiter() *Waiter {
	w := &Waiter{ch: make(chan struct{}, 1)}
	w.wakeup = func(w *Waiter) {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
	return w
}

// QueueWait parks w on the context's wait list unless a release pass ran since seq (taken with
// ReleaseSeq before the allocation that found no credits): then it returns false and the caller
// retries (the sleep window: credits that came back between the failed allocation and the
// parking are never missed). Parking the first waiter asks the chip for a credit return (hfi1:
// pio_wait's hfi1_sc_wantpiobuf_intr(sc, 1)); while waiters are queued the chip model returns
// credits after every packet. A waiter already queued, on this context or another, stays where it
// is (true: its wake-up comes from that context's list). On a closed context it returns false and
// parks nothing (the caller's retried allocation gets ErrClosed), and so on the zero SendContext,
// not made by New (the retried allocation gets ErrInvalid). A nil w is a programmer
// error: QueueWait panics with a message saying so, before it takes the wait lock (there is nothing
// to park, and no answer would be right: false asks for a retry, true for a wake-up).
//
// QueueWait is QueueWaitSent(w, seq, true): pio_wait for a QP that sent packets in its pass. With
// priority 0 (the zero Waiter's, SetPriority) w goes to the tail of the list: a list of such
// waiters is first in, first out.
func (sc *SendContext) QueueWait(w *Waiter, seq uint32) bool {
	if w == nil {
		panic("pio: QueueWait of a nil Waiter")
	}
	return sc.queueWait(w, seq, true)
}

// QueueWaitSent is QueueWait for a waiter that says whether it sent packets in its pass (hfi1:
// pio_wait's iowait_queue(ps->pkts_sent, ...)): with pktsSent true its starved count is set to
// 0, and w goes to the tail of the wait list unless it has a priority (SetPriority); with
// pktsSent false the count grows by one and w goes to the head, as it does with a priority above
// 0. A release pass takes up to WaitBatchSize waiters off the head of the list and wakes the
// first of them with the highest priority<<4 + starved count first, then the others in list
// order (sc_piobufavail); the flush of Disable, Restart, Close or a halt's recovery wakes every
// waiter queued when it starts, in list order (sc_disable). The count and the place change only when w is parked
// (true): a false return, and a w queued already (true, left where it is, its count as it was,
// as pio_wait leaves a QP whose iowait is on a list), change nothing. A nil w panics, as with
// QueueWait.
func (sc *SendContext) QueueWaitSent(w *Waiter, seq uint32, pktsSent bool) bool {
	if w == nil {
		panic("pio: QueueWaitSent of a nil Waiter")
	}
	return sc.queueWait(w, seq, pktsSent)
}

func (sc *SendContext) queueWait(w *Waiter, seq uint32, pktsSent bool) bool {
	if sc.credits == 0 { // the zero SendContext: no pass would ever wake w
		return false
	}
	sc.waitMu.Lock()
	if !w.on.CompareAndSwap(nil, sc) {
		sc.waitMu.Unlock()
		return true
	}
	first := sc.waitHead == nil
	w.ticket = sc.parks
	sc.parks++
	if iowait.AtHead(uint8(w.prio.Load()), pktsSent) {
		w.next = sc.waitHead
		sc.waitHead = w
		if sc.waitTail == nil {
			sc.waitTail = w
		}
	} else {
		w.next = nil
		if sc.waitTail == nil {
			sc.waitHead = w
		} else {
			sc.waitTail.next = w
		}
		sc.waitTail = w
	}
	// The count is stored before the sequence is checked: a release pass stores the sequence
	// before it loads the count (piobufavail, wakeAll), so with sequentially consistent atomics
	// either it sees this waiter or this check sees its sequence (Dekker). Checking first and
	// counting after would let both miss each other: a lost wake-up.
	sc.waitCount.Add(1)
	// A closed context (Close stores scfInFree before its Disable moves the sequence and wakes
	// the list) parks nothing: no pass would ever wake w. Either this load sees the flag, or
	// the seq was taken before Close's Disable and the sequence check sees it moved, or w is on
	// the list before Disable's flush takes it.
	if sc.releaseSeq.Load() != seq || sc.flags.Load()&scfInFree != 0 {
		sc.removeLocked(w)
		sc.waitMu.Unlock()
		return false
	}
	// Parked: the starved count, read by the pass that takes w off under this lock.
	w.starve(pktsSent)
	sc.stats.waits.Add(1)
	sc.waitMu.Unlock()
	if first {
		sc.ReturnCredits()
	}
	return true
}

// CancelWait takes w off the context's wait list; it reports whether w was queued on it (never,
// for a nil w or one queued on another context, which stays queued there).
func (sc *SendContext) CancelWait(w *Waiter) bool {
	if w == nil {
		return false
	}
	sc.waitMu.Lock()
	defer sc.waitMu.Unlock()
	if w.on.Load() != sc {
		return false
	}
	sc.removeLocked(w)
	return true
}

// removeLocked unlinks w, queued on sc (waitMu held).
func (sc *SendContext) removeLocked(w *Waiter) {
	var prev *Waiter
	for x := sc.waitHead; x != nil; prev, x = x, x.next {
		if x == w {
			sc.cutLocked(prev, w)
			break
		}
	}
	sc.detachLocked(w)
}

// cutLocked unlinks w, which follows prev on the list (prev nil: w is the head), waitMu held.
func (sc *SendContext) cutLocked(prev, w *Waiter) {
	if prev == nil {
		sc.waitHead = w.next
	} else {
		prev.next = w.next
	}
	if sc.waitTail == w {
		sc.waitTail = prev
	}
}

// detachLocked marks w, unlinked, as on no list and counts it out (waitMu held).
func (sc *SendContext) detachLocked(w *Waiter) {
	w.next = nil
	w.on.Store(nil)
	sc.waitCount.Add(-1)
}

// Waiting returns the number of queued waiters.
func (sc *SendContext) Waiting() int { return int(sc.waitCount.Load()) }

// popLocked takes up to len(batch) waiters off the head of the list (waitMu held), in list
// order, but with the first one with the highest wake-order key moved to the front (hfi1:
// sc_piobufavail's top_idx, iowait_priority_update_top over the batch; sc_disable's flush,
// flushLocked, has no such pick): batch[:n] is the order to wake them in.
func (sc *SendContext) popLocked(batch []*Waiter) int {
	n, top := 0, 0
	var topKey uint8
	for n < len(batch) && sc.waitHead != nil {
		w := sc.waitHead
		sc.cutLocked(nil, w)
		// Before on is cleared: once off the list w may be queued again and its count
		// rewritten.
		if k := w.key(); n == 0 {
			topKey = k
		} else if top = iowait.UpdateTop(k, topKey, n, top); top == n {
			topKey = k
		}
		sc.detachLocked(w)
		batch[n] = w
		n++
	}
	if top > 0 { // the top first, then the others in list order
		w := batch[top]
		copy(batch[1:top+1], batch[:top])
		batch[0] = w
	}
	return n
}

// piobufavail wakes up to WaitBatchSize waiters after a release pass, the first with the highest
// priority<<4 + starved count first, then the others in list order (hfi1: sc_piobufavail; see
// QueueWaitSent). If more are left it asks for another credit return, whose pass wakes the next
// batch (the kernel's "redo the force to avoid a potential hang").
//
// chip: the pass runs on the chip goroutine (run), which records nothing in wakers: Close waits
// for that goroutine's end (done) before it looks at them, and a Close of this context on it is
// refused, so no Close needs the record; and the chip's passes come per packet while producers
// wait, where goid.Self without getg would be a runtime.Stack each (TestChipWakeupsTakeNoStack).
func (sc *SendContext) piobufavail(chip bool) {
	if sc.waitCount.Load() == 0 {
		return
	}
	var batch [WaitBatchSize]*Waiter
	var g uint64
	if !chip {
		g = goid.Self()
	}
	sc.waitMu.Lock()
	n := sc.popLocked(batch[:])
	if !chip {
		sc.wakeBeginLocked(g, n)
	}
	more := sc.waitHead != nil
	sc.waitMu.Unlock()
	if more {
		sc.ReturnCredits()
	}
	if chip {
		sc.wakeBatch(batch[:n])
		return
	}
	sc.wakeTaken(batch[:n], g)
}

// wakeAll wakes every waiter (sc_disable's flush of piowait), in list order: those queued when
// it starts, as sc_disable splices the whole list onto its wake list (list_splice_init) before
// it wakes anyone, so that waiters woken and queued again (after a Restart's Enable) cannot keep
// it going. It takes them WaitBatchSize at a time, the lock let go between batches: one queued
// meanwhile (by a wake-up of this flush, say), at the head or the tail, has a later ticket and
// is left on the list, where it would otherwise take the place of one queued before the flush.
func (sc *SendContext) wakeAll() {
	if sc.waitCount.Load() == 0 {
		return
	}
	g := goid.Self() // the caller's goroutine: there is a waiter to wake
	sc.waitMu.Lock()
	before := sc.parks // the parks this flush wakes: tickets below it
	for {
		var batch [WaitBatchSize]*Waiter
		n := sc.flushLocked(batch[:], before)
		sc.wakeBeginLocked(g, n)
		sc.waitMu.Unlock()
		if n == 0 {
			return
		}
		sc.wakeTaken(batch[:n], g)
		sc.waitMu.Lock()
	}
}

// flushLocked takes off the list, in list order, up to len(batch) waiters parked with a ticket
// below before (waitMu held); it leaves the others where they are.
func (sc *SendContext) flushLocked(batch []*Waiter, before uint64) int {
	n := 0
	var prev *Waiter
	for w := sc.waitHead; w != nil && n < len(batch); {
		next := w.next
		if w.ticket >= before {
			prev, w = w, next
			continue
		}
		sc.cutLocked(prev, w)
		sc.detachLocked(w)
		batch[n] = w
		n++
		w = next
	}
	return n
}

// waker is a goroutine running wake-ups of a context (SendContext.wakers): g its identity
// (goid.Self), n its batches taken off the list and not yet all woken (more than one when a
// wake-up runs a pass of its own).
type waker struct {
	g uint64
	n int32
}

// wakeBeginLocked records that goroutine g took n waiters off the list to wake them (waitMu
// held, in the critical section of the pop: a Close that looks at the list and the wakers under
// waitMu sees each waiter either queued or being woken). n == 0 records nothing.
func (sc *SendContext) wakeBeginLocked(g uint64, n int) {
	if n == 0 {
		return
	}
	for i := range sc.wakers {
		if sc.wakers[i].g == g {
			sc.wakers[i].n++
			return
		}
	}
	sc.wakers = append(sc.wakers, waker{g: g, n: 1}) // grows only past the most goroutines ever waking at once
}

// wakeTaken wakes ws, the batch that goroutine g took off the list (wakeBeginLocked), then
// records that g is done with it and tells the Closes waiting for wake-ups (Close, closers),
// also when a wake-up's runtime.Goexit ends the goroutine.
func (sc *SendContext) wakeTaken(ws []*Waiter, g uint64) {
	if len(ws) == 0 {
		return
	}
	defer sc.wakeEnd(g)
	sc.wakeBatch(ws)
}

func (sc *SendContext) wakeEnd(g uint64) {
	sc.waitMu.Lock()
	for i := range sc.wakers {
		if sc.wakers[i].g == g {
			if sc.wakers[i].n--; sc.wakers[i].n == 0 {
				last := len(sc.wakers) - 1
				sc.wakers[i] = sc.wakers[last]
				sc.wakers = sc.wakers[:last] // forget g before the goroutine ends (goid.Self reuse)
			}
			break
		}
	}
	sc.waitMu.Unlock()
	// After the store above: a Close that counted the wakers before it is waiting by now
	// (closers.waiting is added to before it counts), and one that counts after sees it.
	if closers.waiting.Load() != 0 {
		closers.mu.Lock()
		closers.cond.Broadcast()
		closers.mu.Unlock()
	}
}

// closers are the Closes, of every context, that wait, and what each waits for: a wait-for graph
// of goroutines, so that no Close waits for a goroutine that waits, directly or through other
// Closes, for its own (closeWork, waitWakers). Lock order: closers.mu, then a context's waitMu.
var closers = func() *closerSet {
	c := &closerSet{waits: map[uint64]*closeWait{}}
	c.cond.L = &c.mu
	return c
}()

type closerSet struct {
	mu sync.Mutex
	// cond is broadcast when a Close's work ends (doClose), when a Close's work of a context
	// with a chip goroutine starts (closeWork: an edge to that goroutine, working, which the
	// others must take into account), and when a wake-up pass ends while a Close waits for
	// wake-ups (waiting != 0).
	cond sync.Cond
	// waits maps each goroutine whose Close is waiting to that wait: one per goroutine, its
	// innermost Close's (an outer Close on it runs the wake-up that made the inner one). Written
	// by the waiting Close before it waits and after; under mu.
	waits map[uint64]*closeWait
	// working are the contexts with a chip goroutine whose Close work is in progress (closingG
	// set): the goroutine doing it waits, at the work's end, for that chip goroutine's end
	// (chipG), an edge of the graph from the start of the work, as nothing can call it off.
	// Appended to by closeWork, removed by doClose's end; under mu.
	working []*SendContext
	// closing are the contexts whose Close work is in progress (closingG set), chip goroutine
	// or not: the work waits for their locks (lockTargetsLocked). Appended to by closeWork,
	// removed by doClose's end; under mu.
	closing []*SendContext
	// waiting counts the Closes waiting for wake-ups (waitWakers, from before they read the
	// wakers until they return): written under mu (atomic add), read by wakeEnd without it
	// (atomic load), which broadcasts only when there is one.
	waiting atomic.Int32
}

// closeWaitKind is what a Close waits for (closeWait).
type closeWaitKind uint8

const (
	waitWork   closeWaitKind = iota // another goroutine's Close work of sc (closeWork)
	waitWakers                      // the wake-ups of sc on other goroutines (waitWakers)
)

// closeWait is a Close's wait (closerSet.waits); its edges, the goroutines it waits for, are
// those of targetsLocked, read again at each look (an edge ends with what it waits for).
type closeWait struct {
	kind closeWaitKind
	sc   *SendContext
	// g is, for waitWork, the goroutine doing sc's work when the wait began (an edge while
	// sc.closingG is g); for waitWakers, the waiting Close's own goroutine.
	g uint64
	// skip are, for waitWakers, the wakers it does not wait for: each waited, when the Close
	// last looked, directly or through other Closes, for g.
	skip []uint64
}

// targetsLocked appends to dst the goroutines that w waits for now (closers.mu held): the one
// doing sc's work while it does; every goroutine running wake-ups of sc but its own and those it
// skips.
func (w *closeWait) targetsLocked(dst []uint64) []uint64 {
	switch w.kind {
	case waitWork:
		if w.sc.closingG == w.g {
			dst = append(dst, w.g)
		}
	case waitWakers:
		w.sc.waitMu.Lock()
		for _, k := range w.sc.wakers {
			if k.g != w.g && !slices.Contains(w.skip, k.g) {
				dst = append(dst, k.g)
			}
		}
		w.sc.waitMu.Unlock()
	}
	return dst
}

// chipTargetsLocked appends to dst the chip goroutines whose end goroutine g waits for, or will
// at the end of the Close work it does (working; closers.mu held).
func (c *closerSet) chipTargetsLocked(g uint64, dst []uint64) []uint64 {
	for _, sc := range c.working {
		if sc.closingG == g {
			if cg := sc.chipG.Load(); cg != 0 {
				dst = append(dst, cg)
			}
		}
	}
	return dst
}

// lockTargetsLocked appends to dst the goroutines whose locks the Close work that goroutine g
// does waits for (closers.mu held): the ones that run a Releaser or Sink of that context with
// its releaseMu or hwMu held on a caller's goroutine (relG, hwG). Such a wait is called off by
// no Close: the callback's Close, which may wait for g, must leave g out instead.
func (c *closerSet) lockTargetsLocked(g uint64, dst []uint64) []uint64 {
	for _, sc := range c.closing {
		if sc.closingG == g {
			if h := sc.relG.Load(); h != 0 && h != g {
				dst = append(dst, h)
			}
			if h := sc.hwG.Load(); h != 0 && h != g {
				dst = append(dst, h)
			}
		}
	}
	return dst
}

// locksReachLocked reports whether sc's Close work, on goroutine self, would wait for the locks of
// a goroutine that runs sc's Releasers or Sink (relG, hwG) and waits for self through waits that
// no Close calls off (closers.mu held): two callbacks, each with its context's locks held,
// Closing the other's context; the second Close to start its work is refused.
func (c *closerSet) locksReachLocked(sc *SendContext, self uint64) bool {
	for _, h := range [...]uint64{sc.relG.Load(), sc.hwG.Load()} {
		if h != 0 && h != self && c.reachesLocked(h, self, true) {
			return true
		}
	}
	return false
}

// reachesLocked reports whether goroutine from is to, or waits for it through the Closes'
// waits (closers.mu held). chipOnly: through waits for chip goroutines' ends alone, which no
// Close calls off (the other waits are looked at again at each broadcast, and leave out a
// goroutine that reaches back).
func (c *closerSet) reachesLocked(from, to uint64, chipOnly bool) bool {
	seen := []uint64{from}
	var next []uint64
	for i := 0; i < len(seen); i++ {
		if seen[i] == to {
			return true
		}
		next = c.chipTargetsLocked(seen[i], next[:0])
		next = c.lockTargetsLocked(seen[i], next)
		if w := c.waits[seen[i]]; w != nil && !chipOnly {
			next = w.targetsLocked(next)
		}
		for _, g := range next {
			if !slices.Contains(seen, g) {
				seen = append(seen, g)
			}
		}
	}
	return false
}

// waitLocked records w as goroutine self's wait and waits for a broadcast (closers.mu held).
func (c *closerSet) waitLocked(self uint64, w *closeWait) {
	c.waits[self] = w
	c.cond.Wait()
	delete(c.waits, self)
}

// closeWork is the start of Close on goroutine self: it does Close's work (doClose) unless that
// is done, or waits while another goroutine's Close does it. It returns false, at once, where
// that goroutine waits, directly or through other Closes, for self (self's own Close doing the
// work, whose flush ran the wake-up that called this Close, included): the work is left to it.
// It refuses (false, ErrInvalid), having changed nothing, where the work would wait for the end
// of a chip goroutine that waits for self's end through waits for chip goroutines' ends alone:
// self is a chip goroutine (a wake-up, Sink or Releaser of sc2 Closing sc while one on sc's chip
// goroutine Closes sc2), and each would wait for ever, as no Close calls such a wait off.
//
// No cycle of waits forms, so no Close waits for ever on another: each edge is added (here, in
// waitWakers) only where its target does not reach back to its Close's goroutine, but the chip
// goroutine's end (working), added where it does not reach back through such ends alone, at the
// start of the work (before anything is done that the refusal would have to undo): a cycle it
// closes goes through another kind of wait, which looks again (the broadcast) and leaves out the
// goroutine that reaches back.
func (sc *SendContext) closeWork(self uint64) (bool, error) {
	c := closers
	c.mu.Lock()
	for !sc.closed {
		if h := sc.closingG; h == 0 {
			if c.locksReachLocked(sc, self) {
				c.mu.Unlock()
				return false, errf("Close", ErrInvalid, "send context "+itoa(sc.index)+"'s Releaser or Sink runs, with its locks held, on a goroutine that waits, through Closes, for this one (each Closing the other's context): it would wait for itself"+refusedInCallback)
			}
			if sc.quit != nil {
				if cg := sc.chipG.Load(); cg != 0 && c.reachesLocked(cg, self, true) {
					c.mu.Unlock()
					return false, errf("Close", ErrInvalid, "send context "+itoa(sc.index)+"'s chip goroutine waits, through Closes, for the end of the chip goroutine this Close runs on (from a wake-up, Sink or Releaser): it would wait for itself"+refusedInCallback)
				}
				c.working = append(c.working, sc)
			}
			c.closing = append(c.closing, sc)
			c.cond.Broadcast() // a new edge (the work's, to the chip goroutine or the locks' holders)
			sc.closingG = self
			c.mu.Unlock()
			sc.doClose() // ends with closingG 0 (also on a Goexit), closed once done
			c.mu.Lock()
		} else if c.reachesLocked(h, self, false) {
			c.mu.Unlock()
			return false, nil
		} else {
			c.waitLocked(self, &closeWait{kind: waitWork, sc: sc, g: h})
		}
	}
	c.mu.Unlock()
	return true, nil
}

// waitWakers is the end of Close on goroutine self: it waits until no goroutine other than self
// runs wake-ups of the context, but those that wait, directly or through other Closes, for self
// (each would wait for the other), looked at again at each broadcast. No waiter is queued by
// now (a closed context parks none), so no wake-up starts once this returns but on self or on
// the goroutines it skipped.
func (sc *SendContext) waitWakers(self uint64) {
	c := closers
	c.mu.Lock()
	c.waiting.Add(1) // before the wakers are read: see wakeEnd
	w := &closeWait{kind: waitWakers, sc: sc, g: self}
	for {
		w.skip = w.skip[:0]
		wait := false
		for _, g := range w.targetsLocked(nil) {
			if c.reachesLocked(g, self, false) {
				w.skip = append(w.skip, g)
			} else {
				wait = true
			}
		}
		if !wait {
			break
		}
		c.waitLocked(self, w)
	}
	c.waiting.Add(-1)
	c.mu.Unlock()
}

func (sc *SendContext) wakeBatch(ws []*Waiter) {
	for i, w := range ws {
		sc.stats.wakeups.Add(1)
		if w.wakeup != nil {
			sc.callWakeup(w, ws[i+1:])
		}
	}
}

// callWakeup runs w's wake-up; a panic in it is recovered and counted (Stats.WakeupPanics), so
// that the rest of the batch is still woken and the pass's goroutine goes on. A runtime.Goexit
// in it (no lock is held) ends the goroutine, which first wakes the rest of the batch, rest,
// taken off the list with w (they would otherwise wait for ever). If that is the chip goroutine,
// it then halts the context (goexitHalt: CauseGoexit, the goroutine gone), unless a Goexit
// before this one on the goroutine did (a wake-up that goexitHalt's own wakeAll runs): from
// then on allocations get ErrNotRunning and Restart and Enable the *HaltError, also before the
// goroutine's end (runDone), where the context stayed enabled with nothing to consume its
// packets. A caller's goroutine leaves the context as it is.
func (sc *SendContext) callWakeup(w *Waiter, rest []*Waiter) {
	returned := false
	defer func() {
		if !returned {
			if p := recover(); p != nil {
				sc.stats.wakePanics.Add(1)
			} else {
				sc.wakeBatch(rest)
				if !sc.gone.Load() && sc.onChip() {
					sc.goexitHalt("a Waiter's wake-up", false, false)
				}
			}
		}
	}()
	w.wakeup(w)
	returned = true
}
