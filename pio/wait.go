package pio

import (
	"sync"
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/goid"
)

// Waiter is a producer waiting for credits on a context's wait list (hfi1: the iowait a QP puts
// on sc->piowait in pio_wait). Its wakeup runs once per time it is taken off the list by a
// release pass, on that pass's goroutine: the chip's (the chip goroutine, or a manual chip's
// Process), ReleaseUpdate's, or the flush of Disable, Restart, Close or a halt's recovery. It
// runs without locks held (the kernel wakes under alloc_lock when sc_disable flushes piowait;
// here that wake-up waits until the lock is let go), so it may retry BufferAlloc on the context;
// it must not block (a Close from a wake-up on the chip goroutine, which would wait for that
// goroutine, is refused with ErrInvalid). It never runs inside BufferAlloc: the pass that
// BufferAlloc runs when room is short leaves its wake-ups to the chip's next pass, as the
// kernel's sc_piobufavail (hfi1_qp_wakeup) only schedules the QP's work on a workqueue (see
// BufferAlloc), so no wake-up runs on a goroutine that holds a buffer it has just allocated. A
// panic in it is recovered and counted (Stats.WakeupPanics); the rest of the batch is woken,
// also when it calls runtime.Goexit (which then ends the goroutine; on the chip goroutine it
// halts the context as a Sink's would, see Sink). Close waits for the wake-ups in progress on
// other goroutines (see Close), so none runs once Close has returned.
type Waiter struct {
	wakeup func(*Waiter)
	ch     chan struct{} // the blocking waiters' channel (newChanWaiter)
	next   *Waiter       // list link, under the waitMu of the context in on
	// on is the context whose wait list holds w, nil while w is on none. Set from nil by
	// QueueWait (compare-and-swap) and cleared by the pass or CancelWait that takes w off, each
	// under that context's waitMu; loaded by QueueWait and CancelWait of any context, so that a
	// call on another context leaves the list and count of the one that holds w alone.
	on atomic.Pointer[SendContext]
}

// Init sets the wake-up function. A Waiter must not be re-initialised while queued.
func (w *Waiter) Init(wakeup func(*Waiter)) { w.wakeup = wakeup }

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
func (sc *SendContext) QueueWait(w *Waiter, seq uint32) bool {
	if w == nil {
		panic("pio: QueueWait of a nil Waiter")
	}
	if sc.credits == 0 { // the zero SendContext: no pass would ever wake w
		return false
	}
	sc.waitMu.Lock()
	if !w.on.CompareAndSwap(nil, sc) {
		sc.waitMu.Unlock()
		return true
	}
	first := sc.waitHead == nil
	w.next = nil
	if sc.waitTail == nil {
		sc.waitHead = w
	} else {
		sc.waitTail.next = w
	}
	sc.waitTail = w
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
			if prev == nil {
				sc.waitHead = x.next
			} else {
				prev.next = x.next
			}
			if sc.waitTail == x {
				sc.waitTail = prev
			}
			break
		}
	}
	w.next = nil
	w.on.Store(nil)
	sc.waitCount.Add(-1)
}

// Waiting returns the number of queued waiters.
func (sc *SendContext) Waiting() int { return int(sc.waitCount.Load()) }

// popLocked takes up to len(batch) waiters off the list, in order (waitMu held).
func (sc *SendContext) popLocked(batch []*Waiter) int {
	n := 0
	for n < len(batch) && sc.waitHead != nil {
		w := sc.waitHead
		sc.waitHead = w.next
		if sc.waitHead == nil {
			sc.waitTail = nil
		}
		w.next = nil
		w.on.Store(nil)
		sc.waitCount.Add(-1)
		batch[n] = w
		n++
	}
	return n
}

// piobufavail wakes up to WaitBatchSize waiters, in order, after a release pass (hfi1:
// sc_piobufavail). If more are left it asks for another credit return, whose pass wakes the next
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

// wakeAll wakes every waiter (sc_disable's flush of piowait): those queued when it starts, so
// that waiters woken and queued again (after a Restart's Enable) cannot keep it going.
func (sc *SendContext) wakeAll() {
	var g uint64 // the caller's goroutine, once there is a waiter to wake
	for left := sc.waitCount.Load(); left > 0 && sc.waitCount.Load() != 0; {
		var batch [WaitBatchSize]*Waiter
		if g == 0 {
			g = goid.Self()
		}
		sc.waitMu.Lock()
		n := sc.popLocked(batch[:min(int(left), WaitBatchSize)])
		sc.wakeBeginLocked(g, n)
		sc.waitMu.Unlock()
		sc.wakeTaken(batch[:n], g)
		left -= int32(n)
	}
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

// closers are the goroutines in a Close, of any context, and the Closes waiting for wake-ups in
// progress (waitWakers). Lock order: closers.mu, then a context's waitMu.
var closers = func() *closerSet {
	c := &closerSet{}
	c.cond.L = &c.mu
	return c
}()

type closerSet struct {
	mu sync.Mutex
	// cond is broadcast when a goroutine enters a Close (a wake-up of its that a Close waited
	// for waits no more) and when a wake-up pass ends while a Close waits (waiting != 0).
	cond sync.Cond
	// gs holds the goroutine (goid.Self) of every Close in progress, once per Close (a Close
	// inside a wake-up that another Close's flush runs is there twice). Under mu.
	gs []uint64
	// waiting counts the Closes waiting on cond: written under mu (atomic add), read by
	// wakeEnd without it (atomic load), which broadcasts only when there is one.
	waiting atomic.Int32
}

// enter records that goroutine g is in a Close; leave undoes it.
func (c *closerSet) enter(g uint64) {
	c.mu.Lock()
	c.gs = append(c.gs, g)
	if c.waiting.Load() != 0 {
		c.cond.Broadcast()
	}
	c.mu.Unlock()
}

func (c *closerSet) leave(g uint64) {
	c.mu.Lock()
	for i, x := range c.gs {
		if x == g {
			last := len(c.gs) - 1
			c.gs[i] = c.gs[last]
			c.gs = c.gs[:last]
			break
		}
	}
	c.mu.Unlock()
}

// closingLocked reports whether goroutine g is in a Close (mu held).
func (c *closerSet) closingLocked(g uint64) bool {
	for _, x := range c.gs {
		if x == g {
			return true
		}
	}
	return false
}

// waitWakers is the end of Close on goroutine self: it waits until no goroutine other than self
// runs wake-ups of the context, leaving out those in a Close themselves (of this context or
// another: each would wait for the other). No waiter is queued by now (a closed context parks
// none), so no wake-up starts once this returns but on those goroutines.
func (sc *SendContext) waitWakers(self uint64) {
	closers.mu.Lock()
	closers.waiting.Add(1)
	for sc.othersWaking(self) {
		closers.cond.Wait()
	}
	closers.waiting.Add(-1)
	closers.mu.Unlock()
}

// othersWaking reports whether a goroutine other than self, and not in a Close, runs wake-ups
// of the context (closers.mu held).
func (sc *SendContext) othersWaking(self uint64) bool {
	sc.waitMu.Lock()
	defer sc.waitMu.Unlock()
	for _, w := range sc.wakers {
		if w.g != self && !closers.closingLocked(w.g) {
			return true
		}
	}
	return false
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
