package sdma

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/gosdma/gosdma/internal/relaxed"
)

// ticketLock is the engine's hwMu and headMu: a FIFO ticket spinlock, the kernel's lock for the
// same work (sde->tail_lock, the head_lock seqlock's spinlock; arch_spin_lock's ticket lock on
// x86 before qspinlocks). Lock takes a ticket with one atomic add and waits for its turn; Unlock
// is a store-release of the next turn, a plain MOV on amd64 (relaxed.StoreRelease32), as
// arch_spin_unlock is a plain store. A sync.Mutex's Unlock is a locked add (it has to look for
// parked waiters): a hardware pass that completes takes and releases two locks per packet, so
// the ticket lock saves two locked instructions per packet on the common path.
//
// Waiters do not park: they spin on the turn, and yield the processor (runtime.Gosched) between
// polls after a short spin, so a holder preempted on the same P runs again. The holds are short
// (one pass over at most a ring's worth, callbacks that must not block); the long ones are the
// sw clean's wait for producers (quiesce) and Close, whose waiters are rare. FIFO order keeps a
// goroutine that takes the lock in a loop (the busy-polling hardware goroutine) from starving an
// Event, Close or Poll waiting behind it.
//
// Not reentrant; the zero value is unlocked; not to be copied (the atomics' noCopy).
type ticketLock struct {
	// next is the next ticket to give out. Written by Lock (atomic add) and TryLock (CAS); read
	// by TryLock (atomic load). A plain uint32 accessed only through sync/atomic's functions,
	// not an atomic.Uint32: the method wrappers' inlining cost would push Lock past the
	// inliner's budget (turn's atomic.Uint32 keeps the struct's noCopy).
	next uint32
	// turn is the ticket that holds, or may take, the lock. Written only by the holder's Unlock
	// (a store-release: every access of the critical section happens before the next holder's
	// load of the new turn); read by the waiters (load-acquire) and TryLock.
	turn atomic.Uint32
}

// spinPolls is how many polls of the turn a waiter makes before it yields between polls.
const spinPolls = 64

// Lock waits for the lock and takes it. Only the fast path (a free lock: one atomic add and a
// load of the turn) is here, within the inliner's budget, so that taking a free lock is no call;
// a lock held by another goes to wait, kept out of line. The turn is loaded with
// atomic.LoadUint32 on its word (an atomic.Uint32 holds its value at offset 0, as
// internal/relaxed relies on too), the same load as turn.Load(): the method's wrapper would
// cost the few inlining units that keep Lock under the budget.
func (l *ticketLock) Lock() {
	if t := atomic.AddUint32(&l.next, 1) - 1; atomic.LoadUint32((*uint32)(unsafe.Pointer(&l.turn))) != t {
		l.wait(t)
	}
}

// wait polls the turn until it is ticket t's (Lock's slow path).
//
//go:noinline
func (l *ticketLock) wait(t uint32) {
	for i := 1; l.turn.Load() != t; i++ {
		if i >= spinPolls {
			runtime.Gosched()
		}
	}
}

// TryLock takes the lock if it is free and nobody waits, and reports whether it did.
func (l *ticketLock) TryLock() bool {
	t := l.turn.Load()
	return atomic.LoadUint32(&l.next) == t && atomic.CompareAndSwapUint32(&l.next, t, t+1)
}

// Unlock hands the lock to the next ticket. The caller must hold it.
func (l *ticketLock) Unlock() {
	relaxed.StoreRelease32(&l.turn, l.turn.Load()+1)
}

// The head lock (Engine.headMu, or hwMu on a Manual engine). lockHead, unlockHead and
// tryLockHead are for callers that do not hold hwMu (Poll, ProgressSchedule, a SendWait that gives
// its wakeup back); lockHeadHW and unlockHeadHW for callers that hold it (the hardware pass's
// interrupt and flush, the state machine, the sw clean), which on a Manual engine hold the head
// lock already.

func (e *Engine) lockHead() { e.headLock().Lock() }

func (e *Engine) unlockHead() { e.headLock().Unlock() }

// headLock is the head lock: hwMu on a Manual engine, headMu otherwise.
func (e *Engine) headLock() *ticketLock {
	if e.manual {
		return &e.hwMu
	}
	return &e.headMu
}

func (e *Engine) tryLockHead() bool {
	if e.manual {
		return e.hwMu.TryLock()
	}
	return e.headMu.TryLock()
}

func (e *Engine) lockHeadHW() {
	if !e.manual {
		e.headMu.Lock()
	}
}

func (e *Engine) unlockHeadHW() {
	if !e.manual {
		e.headMu.Unlock()
	}
}
