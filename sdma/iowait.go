package sdma

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/iowait"
	"github.com/gosdma/gosdma/internal/membarrier"
)

// WakeAvail is the reason passed to a wakeup callback when ring room became available, or when
// the engine flushed its waiters (hfi1: SDMA_AVAIL_REASON).
const WakeAvail = 0

// SleepFunc is an iowait's sleep callback (hfi1: iowait->sleep), called by Send when the ring
// has no room for tx. seq is a head seqcount snapshot taken before the room was found lacking;
// pktsSent says whether the caller sent packets in this burst. tx is the caller's again for the
// call (not in flight). It returns:
//   - ErrAgain: progress was made (Progress(seq, tx) was true): Send retries with tx.
//   - ErrBusy or ErrQueued: the waiter parked (QueueWait); Send returns that error. Whether tx
//     was kept (verbs: on TxHead) or left to the caller (user_sdma) is the sleeper's business.
//   - nil: the sleeper dropped tx (verbs, when the QP cannot send); Send returns nil. SendList
//     stops and returns nil too, tx and the rest still on its list (sdma_send_txlist's 0).
//
// It runs on the sending goroutine. ParkOrRetry and DeferOrRetry implement the kernel's two
// sleepers correctly, with the engine's wait lock held across the Progress check and the queueing
// (the 2019 fix). That lock is not exported: a sleeper of your own does its own checks and then
// calls one of them. One that calls Progress and then QueueWait leaves the window between the two
// open, where a completion pass that freed the room is missed and the waiter may never be woken.
type SleepFunc func(e *Engine, w *IOWait, tx *TxReq, seq uint32, pktsSent bool) error

// IOWait is the wait state of a caller's QP-like object (hfi1: struct iowait): the sleep,
// wakeup and drained callbacks, the count of txreqs in flight, and the link on an engine's wait
// list. Embed one in your object and Init it. Methods are safe for concurrent use except Init.
type IOWait struct {
	// Callbacks: written by Init, read-only after.
	sleep   SleepFunc
	wakeup  func(w *IOWait, reason int)
	drained func(w *IOWait)

	// on is the engine w is parked on (s_iowait.lock), nil if none. It is the ownership of the
	// wait-list fields below: an engine claims w with a CompareAndSwap(nil, e) under its own wait
	// lock (queueLocked) and gives it back with a Store(nil) under the same lock (remove), after
	// its last write to them. Read (atomic load) by QueueWait, the sleepers and Waiting, which may
	// hold another engine's wait lock: a w parked on engine A and sent on engine B is never
	// queued twice, and its links are never written by two locks.
	on atomic.Pointer[Engine]
	// Wait-list fields: written and read under the wait lock of the engine in on, and by the
	// queueing engine once its CAS of on succeeded.
	next, prev *IOWait
	need       int // descriptors w needs to resume (iowait_get_all_desc), set when queued
	priority   int // iowait priority at queueing time (iowait_get_priority)

	// starved is the starved count (starved_cnt, a u8 in the kernel: kept in 0..255, wrapping).
	// Written by QueueWait (under the wait lock) and
	// SendList (iowait_starve_clear); read by the wake ordering. Atomic: the two do not share a lock.
	starved atomic.Int32
	// basePrio is the priority set by SetPriority, 0..255 (the kernel's u8); read when w is queued.
	basePrio atomic.Int32

	// busy is sdma_busy: txreqs in flight. Incremented by Send before it publishes (or flushes),
	// decremented by the completion; the decrement to zero wakes drainers.
	busy atomic.Int32

	// drainMu guards drainCh, the channel Drain waits on (closed and reset at busy == 0).
	drainMu sync.Mutex
	drainCh chan struct{}

	// txHead holds the txreqs parked by ParkOrRetry (iowait_work.tx_head). The owner's: guard
	// it with the same lock as the sends (verbs: qp->s_lock).
	txHead TxList
}

// Init sets the callbacks and zeroes the counts (hfi1: iowait_init). sleep may be nil (Send then
// returns ErrBusy when the ring is full); a sleeper that parks (ParkOrRetry, DeferOrRetry,
// QueueWait) needs wakeup, and is refused with ErrInvalid at the park without one. wakeup is
// called, on the completion goroutine, when w is taken off the wait list because room became
// available (reason WakeAvail); drained is called when the last txreq in flight completes.
// Callbacks must not block; a wakeup or drained callback that panics is recovered and recorded
// (Engine.CallbackError), as a txreq's Completer is. Init must not be called while w is queued or
// has txreqs in flight: it would cut the wait list at w (the waiters queued behind it never
// woken) or zero the count the completions decrement (Drain and drained then wrong for good), so
// that programmer error panics with a message saying which, and changes nothing. Init from w's
// own wakeup or drained callback is fine: w is off the list, or its count zero, by then. So is
// Init once Unqueue reported false or Drain returned: the pass that woke or drained w read the
// callback it calls while w was still parked or its count not yet zero, so that callback (the
// old one) may still run after Init returned, never the new one for that wait. The check loads
// w's state atomically, not under a lock: it catches a waiter its owner left parked or sending,
// not one another goroutine parks or sends on meanwhile (Init is not safe for concurrent use).
// Init empties TxHead: txreqs parked there are dropped, not completed.
func (w *IOWait) Init(sleep SleepFunc, wakeup func(w *IOWait, reason int), drained func(w *IOWait)) {
	if e := w.on.Load(); e != nil {
		panic("sdma: IOWait.Init of an iowait parked on engine " + itoa(e.idx) + "'s wait list (Unqueue it, or let its wakeup run, first)")
	}
	if n := w.busy.Load(); n != 0 {
		panic("sdma: IOWait.Init of an iowait with " + itoa(int(n)) + " txreqs in flight (Drain it first)")
	}
	w.sleep, w.wakeup, w.drained = sleep, wakeup, drained
	w.next, w.prev = nil, nil
	w.on.Store(nil)
	w.need, w.priority = 0, 0
	w.starved.Store(0)
	w.busy.Store(0)
	w.txHead = TxList{}
}

// Busy returns the number of txreqs in flight for w (iowait_sdma_pending).
func (w *IOWait) Busy() int { return int(w.busy.Load()) }

// TxHead returns w's list of parked txreqs (iowait_work.tx_head): ParkOrRetry appends to it,
// the owner resends from it after its wakeup. The owner guards it; while w is queued on an engine
// (parked, not yet woken or Unqueued) the engine's wake pass reads its first txreq under the wait
// lock (its need and VIP priority, as sdma_desc_avail does), so the owner changes it then only
// through ParkOrRetry.
func (w *IOWait) TxHead() *TxList { return &w.txHead }

// SetPriority sets the priority w queues with (iowait's init_priority result); when ParkOrRetry
// queues w, one more if the first txreq on its TxHead has FlagVIP (iowait_get_priority: a
// DeferOrRetry's txreq is not on TxHead and adds nothing). A waiter with priority > 0 is queued
// at the head of the wait list, and the highest priority<<4 + starved count of a wake batch is woken first,
// that key taken in the kernel's u8 arithmetic (iowait_priority_update_top: a key of 256 or more
// wraps, so a priority of 16 ranks as 0). The priority is the kernel's u8: p outside 0..255 is
// taken modulo 256 (256 is 0, -1 is 255), and so is the VIP one more (255 + 1 is 0).
func (w *IOWait) SetPriority(p int) { w.basePrio.Store(int32(uint8(p))) }

// Starved returns the starved count (iowait starved_cnt), 0..255: like the kernel's u8 it wraps
// from 255 to 0.
func (w *IOWait) Starved() int { return int(w.starved.Load()) }

// rank is the wake-order key (iowait_priority_update_top): priority<<4 + starved count, in the
// kernel's u8 arithmetic (a key of 256 or more wraps).
func (w *IOWait) rank() int { return int(iowait.Key(uint8(w.priority), uint8(w.starved.Load()))) }

// Waiting reports whether w is parked on this engine's wait list.
func (e *Engine) Waiting(w *IOWait) bool {
	if w == nil {
		return false
	}
	e.waitMu.Lock()
	defer e.waitMu.Unlock()
	return w.on.Load() == e
}

// Unqueue takes w off the wait list of the engine it is parked on, if any (hfi1:
// flush_pq_iowait: list_del_init under that engine's wait lock), and reports whether it did. A
// sender that gave up waiting for its wakeup (a timeout, a cancelled context, a close) unqueues
// w so that its next no-room path queues it anew, on the engine it then sends to, at the place
// and with the starved count the kernel's iowait_queue gives it. Its wakeup will not run for the
// wait it gave up (unless the pass that wakes it already took it off the list: then Unqueue
// reports false). A nil w, or one parked nowhere, reports false.
func (w *IOWait) Unqueue() bool {
	if w == nil {
		return false
	}
	for {
		e := w.on.Load()
		if e == nil {
			return false
		}
		e.waitMu.Lock()
		if w.on.Load() == e { // still parked there: on changes only under that engine's lock
			e.dmawait.remove(w)
			e.waitMu.Unlock()
			return true
		}
		e.waitMu.Unlock() // woken, or moved to another engine meanwhile: look again
	}
}

// sdmaDec drops the busy count; at zero it wakes drainers and reports true: the caller then
// calls drained (iowait_sdma_dec + iowait_drain_wakeup).
func (w *IOWait) sdmaDec() bool {
	if w.busy.Add(-1) != 0 {
		return false
	}
	w.drainMu.Lock()
	if w.drainCh != nil {
		close(w.drainCh)
		w.drainCh = nil
	}
	w.drainMu.Unlock()
	return true
}

// Drain waits until w has no txreq in flight, or ctx is done (hfi1: iowait_sdma_drain). A nil
// ctx is ErrInvalid, whether or not a txreq is in flight.
func (w *IOWait) Drain(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("IOWait.Drain")
	}
	for {
		w.drainMu.Lock()
		if w.busy.Load() == 0 {
			w.drainMu.Unlock()
			return nil
		}
		if w.drainCh == nil {
			w.drainCh = make(chan struct{})
		}
		ch := w.drainCh
		w.drainMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitList is an intrusive doubly linked list of iowaits (sde->dmawait). Guarded by the
// engine's waitMu.
type waitList struct {
	head, tail *IOWait
	n          int
	// count mirrors n for the completion pass's lock-free "anyone parked?" check (descAvail).
	// Written (atomic add) by push and remove under the wait lock; read by descAvail.
	count atomic.Int32
}

func (l *waitList) pushFront(w *IOWait) {
	w.prev, w.next = nil, l.head
	if l.head != nil {
		l.head.prev = w
	} else {
		l.tail = w
	}
	l.head = w
	l.n++
	l.count.Add(1)
}

func (l *waitList) pushBack(w *IOWait) {
	w.next, w.prev = nil, l.tail
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
	l.n++
	l.count.Add(1)
}

func (l *waitList) remove(w *IOWait) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.next, w.prev = nil, nil
	l.n--
	l.count.Add(-1)
	w.on.Store(nil) // last: hands the link fields back (see IOWait.on)
}

// QueueWait parks w on the engine's wait list (hfi1: iowait_queue, under write_seqlock of
// sde->waitlock, which QueueWait takes itself), needing need descriptors to resume (0: as many as
// the first txreq on w's TxHead has). If pktsSent the starved count is reset and w goes to the
// tail, else the count grows and w goes to the head; a priority above 0 also puts it at the head.
// A w already parked (here or on another engine) is left where it is; QueueWait reports whether
// it queued w. The check and the claim are one atomic step, so two engines never both queue w.
//
// A need the ring can never meet (more descriptors than it holds) is refused with ErrInvalid and
// nothing changes: such a waiter would stop every completion pass's wakeups at itself, starving
// everyone queued behind it. A negative need, a nil w, or one without a wakeup callback (nothing
// would wake it), is ErrInvalid too. Once the device is closing (Close), QueueWait refuses with
// ErrClosed: Close wakes the waiters parked before it, and nothing would wake one parked after.
//
// QueueWait alone does not close the sleep window: a completion pass between a caller's Progress
// check and QueueWait would be missed. A sleeper that checks progress first uses ParkOrRetry or
// DeferOrRetry, which check Progress and queue under one hold of the wait lock (the 2019 fix).
// Lock order: the caller's own lock, then the wait lock.
func (e *Engine) QueueWait(w *IOWait, need int, pktsSent bool) (bool, error) {
	if w == nil {
		return false, txErr("QueueWait", ErrInvalid, "nil iowait")
	}
	if w.wakeup == nil {
		return false, errNoWakeup("QueueWait")
	}
	if need < 0 {
		return false, txErr("QueueWait", ErrInvalid, "negative need of "+itoa(need)+" descriptors")
	}
	if need == 0 {
		if tx := w.txHead.Front(); tx != nil {
			need = tx.NumDesc()
		}
	}
	if capacity := e.ring.Size() - 1; need > capacity {
		return false, txErr("QueueWait", ErrInvalid, "need of "+itoa(need)+" descriptors exceeds the ring's capacity "+itoa(capacity))
	}
	e.waitMu.Lock()
	if e.gate.Load()&gateDown != 0 {
		// Close's sw clean woke the wait list (under this lock) or is about to: a waiter
		// queued after it would never be woken.
		e.waitMu.Unlock()
		return false, ErrClosed
	}
	ok := e.queueLocked(w, need, int(w.basePrio.Load()), pktsSent)
	e.waitMu.Unlock()
	return ok, nil
}

// errNoWakeup refuses to park an iowait that nothing would wake.
func errNoWakeup(op string) error {
	return txErr(op, ErrInvalid, "iowait has no wakeup callback: parked, it would never be woken (IOWait.Init)")
}

// queueLocked claims w for this engine's wait list (on: nil → e) and queues it with need and
// prio; false, with nothing changed, if w is parked already (here or elsewhere). waitMu held.
func (e *Engine) queueLocked(w *IOWait, need, prio int, pktsSent bool) bool {
	if !w.on.CompareAndSwap(nil, e) {
		return false
	}
	w.need, w.priority = need, prio
	for { // iowait_queue's starved_cnt: 0, or ++ on the kernel's u8 (255 wraps to 0)
		old := w.starved.Load()
		if w.starved.CompareAndSwap(old, int32(iowait.Starve(pktsSent, uint8(old)))) {
			break
		}
	}
	if iowait.AtHead(uint8(prio), pktsSent) {
		e.dmawait.pushFront(w)
	} else {
		e.dmawait.pushBack(w)
	}
	e.stats.sleeps.Add(1)
	return true
}

// refreshLocked recomputes a queued waiter's need and priority from the first txreq on its TxHead,
// as the wake pass of the kernel does for each waiter it looks at (sdma_desc_avail:
// iowait_init_priority, then iowait_get_all_desc, whose iowait_get_desc takes the first
// txreq's descriptors as the need and adds one to the priority for a VIP one): a txreq parked
// behind the one the waiter was queued with, or on a waiter queued with nothing on its TxHead
// (DeferOrRetry, QueueWait), counts at the wake. With nothing on TxHead the values of the
// queueing stand (QueueWait's explicit need; the base priority). The wait lock held; TxHead is
// read under it, as the kernel reads tx_head under the wait lock: while w is queued its owner
// changes TxHead only through ParkOrRetry (see TxHead).
func (w *IOWait) refreshLocked() {
	front := w.txHead.Front()
	if front == nil {
		return
	}
	w.need, w.priority = front.NumDesc(), int(w.basePrio.Load())
	if front.flags&FlagVIP != 0 {
		w.priority = int(uint8(w.priority + 1)) // the kernel's u8 priority++
	}
}

// ParkOrRetry is the verbs sleeper (hfi1: qp.c iowait_sleep), usable as an IOWait's SleepFunc:
// under the wait lock it checks Progress(seq, tx) and returns ErrAgain if the ring moved enough;
// otherwise it appends tx to w's TxHead, queues w if it is not queued yet, and returns ErrBusy.
// The owner resends TxHead after its wakeup. Call it with the owner's lock held (the one that
// guards TxHead). If the engine is not running it returns ErrAgain, so that Send flushes tx.
func (e *Engine) ParkOrRetry(w *IOWait, tx *TxReq, seq uint32, pktsSent bool) error {
	return e.sleepPark(w, tx, seq, pktsSent, true)
}

// DeferOrRetry is the user_sdma sleeper (hfi1: defer_packet_queue): as ParkOrRetry, but tx
// stays where the caller has it (for SendList: at the head of its list). Use it with SendList.
// With nothing on w's TxHead, w is queued needing no descriptors (sdma_desc_avail's
// iowait_get_all_desc of the packet queue's iowait is 0): the next completion pass wakes it,
// whatever room it made, and goes on to the waiters behind it.
func (e *Engine) DeferOrRetry(w *IOWait, tx *TxReq, seq uint32, pktsSent bool) error {
	return e.sleepPark(w, tx, seq, pktsSent, false)
}

// sleepPark is the sleep protocol with the 2019 fix: the Progress check and the queueing happen under
// one hold of the wait lock, and descAvail takes the same lock after the pass moved swHead, so a
// pass either shows as progress or finds w queued.
func (e *Engine) sleepPark(w *IOWait, tx *TxReq, seq uint32, pktsSent bool, keep bool) error {
	if w == nil || tx == nil {
		// Checked before the wait lock: a panic under it would wedge the engine.
		return txErr("ParkOrRetry", ErrInvalid, "nil iowait or txreq")
	}
	if w.wakeup == nil {
		return errNoWakeup("ParkOrRetry")
	}
	if !e.lockUnlessProgress(seq, tx) {
		return ErrAgain
	}
	// need is iowait_get_all_desc's: the first txreq on w's TxHead, or 0 if there is none. So
	// ParkOrRetry's w needs its first parked txreq (tx if it is the first), and DeferOrRetry's,
	// whose tx is not on TxHead (user_sdma keeps it on req->txps), needs nothing: every completion
	// pass wakes it and none stops at it.
	need := 0
	if front := w.txHead.Front(); front != nil {
		need = front.NumDesc()
	}
	if keep {
		if need == 0 {
			need = tx.NumDesc()
		}
		w.txHead.PushBack(tx)
	}
	// iowait_get_priority: the base priority, plus one if the first txreq on w's TxHead (after
	// the park: iowait_sleep adds tx before it asks) is a VIP one. Not tx's own flag: a
	// DeferOrRetry's tx is not on TxHead (defer_packet_queue's pq->busy has no tx_head entries),
	// and a ParkOrRetry's tx behind others ranks as the first of them does.
	prio := int(w.basePrio.Load())
	if front := w.txHead.Front(); front != nil && front.flags&FlagVIP != 0 {
		prio = int(uint8(prio + 1)) // the kernel's u8 priority++
	}
	e.queueLocked(w, need, prio, pktsSent) // no-op if w is parked already (if not queued)
	e.unlockSleeper()
	return ErrBusy
}

// lockUnlessProgress is the sleepers' check before they queue (the 2019 fix): under the wait
// lock it checks the gate and Progress(seq, tx). false means retry (the engine is not running,
// or the ring moved enough), with the lock released; true means park, with the wait lock held
// for the queueing. The test hooks' sleepWindow runs between the check and the return; skipWaitLock
// checks without the lock and takes it only after the window, as kernels before the fix did.
func (e *Engine) lockUnlessProgress(seq uint32, tx *TxReq) bool {
	th := e.test
	skipLock := th != nil && th.skipWaitLock
	if !skipLock {
		e.waitMu.Lock()
		e.announceSleeper() // announced before the check: see Engine.sleepers
	}
	if e.gate.Load() != gateRunning || e.Progress(seq, tx) {
		if !skipLock {
			e.unlockSleeper()
		}
		return false
	}
	if th != nil && th.sleepWindow != nil {
		th.sleepWindow() // a completion pass in the window between the check and the return
	}
	if skipLock {
		e.waitMu.Lock() // the pre-2019 kernel took waitlock only around iowait_queue
		e.announceSleeper()
	}
	return true
}

// announceSleeper announces a sleeper to the completion pass (Engine.sleepers): an atomic add,
// then, when the pass reads the announcements with a plain load (plainSleepers), the
// process-wide barrier that stands for the pass's fence (descAvail): after it, either the pass
// in progress has its seqcount store visible to the sleeper's Progress check, or it will see the
// announcement.
func (e *Engine) announceSleeper() {
	atomic.AddInt32(&e.sleepers, 1)
	if e.plainSleepers {
		membarrier.Barrier()
	}
}

// unlockSleeper ends a sleeper's hold of the wait lock taken by lockUnlessProgress: it withdraws
// its announcement (after queueing, if it queued: the wait list's count covers it from then on)
// and releases the lock.
func (e *Engine) unlockSleeper() {
	atomic.AddInt32(&e.sleepers, -1)
	e.waitMu.Unlock()
}

// blockWaiter is SendWait's waiter: an IOWait whose wakeup signals a channel.
type blockWaiter struct {
	w  IOWait
	ch chan struct{} // cap 1: a wakeup that came before the wait is not lost
}

var blockWaiters = sync.Pool{New: func() any {
	bw := &blockWaiter{ch: make(chan struct{}, 1)}
	bw.w.Init(nil, func(*IOWait, int) {
		select {
		case bw.ch <- struct{}{}:
		default:
		}
	}, nil)
	return bw
}}

// parkBlocking parks bw until room for tx is signalled or ctx ends; nil means retry.
func (e *Engine) parkBlocking(ctx context.Context, bw *blockWaiter, tx *TxReq, seq uint32) error {
	select { // drop a stale signal from an earlier use
	case <-bw.ch:
	default:
	}
	// The same 2019 fix as sleepPark: the Progress check and the queueing under one hold of the
	// wait lock.
	if !e.lockUnlessProgress(seq, tx) {
		return nil
	}
	e.queueLocked(&bw.w, tx.NumDesc(), 0, true) // bw is SendWait's own: never parked here
	e.unlockSleeper()
	select {
	case <-bw.ch:
		return nil
	case <-ctx.Done():
	}
	e.waitMu.Lock()
	queued := bw.w.on.Load() == e
	if queued {
		e.dmawait.remove(&bw.w)
	}
	e.waitMu.Unlock()
	if !queued {
		// We were woken with room set aside for us that we will not use: pass it on.
		e.lockHead()
		e.descAvail()
		e.unlockHead()
	}
	return ctx.Err()
}
