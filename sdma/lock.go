package sdma

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	goidpkg "github.com/gosdma/gosdma/internal/goid"
	"github.com/gosdma/gosdma/internal/membarrier"
	"github.com/gosdma/gosdma/internal/relaxed"
)

// ticketLock is the engine's hwMu and headMu: a FIFO ticket spinlock, the kernel's lock for the
// same work (sde->tail_lock, the head_lock seqlock's spinlock; arch_spin_lock's ticket lock on
// x86 before qspinlocks), with a bias towards the goroutine that takes it over and over.
//
// The ticket lock: Lock takes a ticket with one atomic add and waits for its turn; Unlock is a
// store-release of the next turn, a plain MOV on amd64 (relaxed.StoreRelease32), as
// arch_spin_unlock is a plain store. A sync.Mutex's Unlock is a locked add (it has to look for
// parked waiters): a hardware pass that completes takes and releases two locks per packet, so
// the ticket lock saves two locked instructions per packet on the common path.
//
// Waiters spin on the turn, then yield the processor (runtime.Gosched) between polls, so a holder
// preempted on the same P runs again, and then park: they sleep between polls, for longer each
// time up to a bound (waitBackoff). A waiter starts that over whenever the turn moves, so only a
// hold that lasts (a hold across a slow Sink, the sw clean's wait for producers, a Close) makes
// waiters park, never a queue of short holds. Unlock stays one store and looks for nobody, so a
// parked waiter wakes on its own: the lock may sit free for up to the sleep's length before it
// notices, which the waiters queued behind it pay too (FIFO), while none burns a processor for
// as long as the hold lasts. The holds are mostly short (one pass over at most a ring's worth, callbacks that
// must not block). FIFO order keeps a goroutine that takes the lock in a loop (the busy-polling
// hardware goroutine) from starving an Event, Close or Poll waiting behind it.
//
// # The bias
//
// Most holds of an engine's locks are taken by one goroutine: the engine's own goroutine, or the
// one caller that runs Process and Poll on a Manual engine. Where biasable (set by NewDevice:
// linux/amd64 with membarrier(2), outside -race and purego), the lock lets that goroutine, its
// owner, take it with no locked instruction at all: the atomic add is the costliest instruction
// of a lock that nobody else wants (5-8 ns on the project's machine, a quarter of a small
// packet's time). It is the biased locking of the JVMs (Kawachiya, Koseki, Onodera, "Lock
// Reservation", OOPSLA 2002), with the revocation done by an asymmetric Dekker pair over
// membarrier(2), as internal/membarrier describes, instead of a safepoint:
//
//   - The owner (bias's record names it: biasRec.g is its getg) takes the lock by storing 1 into
//     its record's busy word and then loading bias: if bias still names its record, it holds the
//     lock (held = the record); else it stores busy 0 and takes a ticket like anyone. Plain MOVs
//     on amd64, no fence between the store and the load. Unlock of such a hold stores busy 0.
//     It does so only when it does not hold the lock already and no ticket is out (lockBiased):
//     the lock stays not reentrant, and a waiting ticket is served first.
//   - Everyone else takes a ticket. A ticket holder that finds bias set revokes it: it clears bias
//     with a locked exchange, runs membarrier.Barrier, and waits until the record's busy is 0.
//     Dekker: if the owner's load of bias came before the barrier reached its thread, its store
//     of busy came before too and the revoker sees busy 1, and waits for the owner's Unlock; if
//     after, the owner sees bias cleared and backs off. So the owner and a ticket holder never
//     hold at once, and the revoker's wait (a load-acquire of the owner's Unlock store) orders
//     the owner's critical section before the revoker's.
//   - Only a ticket holder changes bias (grant, revoke), so grants and revocations are ordered by
//     the ticket lock. A grant gives the bias to the ticket holder itself (grant), after it took
//     the lock streak times in a row with nobody else in between: need is 1 for a fresh lock,
//     and doubles (to needMax) at each revocation, so that two goroutines taking turns pay a
//     barrier (microseconds) once per need holds, rarely, and a lock that stays with one
//     goroutine pays nothing.
//   - Every grant to a new goroutine has a new record: an owner that was revoked may still be
//     between its load of bias and its back-off store of busy 0 (preempted there, say), and that
//     store must not land on the busy word of the next owner. A record is given again only to
//     its own goroutine (last), which runs one attempt at a time. The goroutine's getg may be
//     reused by the runtime after the goroutine exits; the new goroutine then owns the bias,
//     which is harmless (its attempts run one at a time, too).
//
// Elsewhere (biasable false) the lock is the ticket lock alone: inline where the build has no
// getg (haveGetg false), one call, one getg and two stores more where it has (arm64, amd64 under
// -race, say), which name the ticket holder for heldBy.
//
// Not reentrant; the zero value is unlocked and not biasable; not to be copied (the atomics'
// noCopy).
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
	// biasable says whether the lock may be biased. Written once before the lock is shared
	// (NewDevice); read by Lock, TryLock.
	biasable bool
	// held is the record of the current hold if the owner took it through the bias, else nil.
	// Written and read by the holder only (lockBiased sets it, Unlock clears it before it
	// releases the record's busy).
	held *biasRec
	// bias is the current grant, or nil. Written by ticket holders only (grant: a store;
	// revoke: an exchange, the locked store of the Dekker pair); read by every biased Lock (a
	// plain load on amd64).
	bias atomic.Pointer[biasRec]
	// The ticket holders' bookkeeping, written and read only by a ticket holder: streakG and
	// streak count the ticket holds in a row by one goroutine, need is the streak that earns the
	// bias (0: 1).
	streakG uintptr
	streak  uint32
	need    uint32
	// last is the last record granted (given again to the same goroutine). Written by ticket
	// holders only (grant: a store, the slow path); read by them and by heldBy (atomic loads):
	// while its owner holds the lock through it, it is the lock's record (a grant to another
	// goroutine revokes first, which waits for that hold to end).
	last atomic.Pointer[biasRec]
	// ownerG and ownerT name the last ticket holder: its getg and its ticket. Only where
	// haveGetg: written by each ticket holder right after it takes the lock, ownerG first
	// (store-releases: plain MOVs on amd64, STLRs on arm64; nothing on the bias path, nor in
	// Unlock); read by
	// heldBy (atomic loads, in the other order): the lock is held with ticket turn by g exactly
	// when a ticket is out and ownerT is turn and ownerG is g (see heldBy).
	ownerG atomic.Uint64
	ownerT atomic.Uint32
}

// biasRec is one grant of a ticketLock's bias (see ticketLock, "The bias").
type biasRec struct {
	// g is the owner's getg. Immutable.
	g uintptr
	// busy is 1 from the owner's attempt to take the lock through the bias until it backs off or
	// its Unlock. Written only by the owner (plain stores on amd64: relaxed.StoreRelease32);
	// read by a revoker after its barrier (load-acquire).
	busy atomic.Uint32
	_    [lineSize - 12]byte // its own line: the owner writes busy at every hold
}

// needMax caps the streak that earns the bias back after revocations: a lock whose holders
// keep changing pays at most one barrier per needMax holds.
const needMax = 1 << 16

// A waiter's polls (waitBackoff): spinPolls polls in a row, then yieldPolls polls each after a
// runtime.Gosched, then polls each after a sleep that starts at parkMin and doubles up to parkMax.
const (
	spinPolls  = 64
	yieldPolls = 256
	parkMin    = 16 * time.Microsecond
	parkMax    = time.Millisecond
)

// waitBackoff is a waiter's pause between two polls (wait, revoke): i counts the polls so far
// (from 1), park is the last sleep (0 before the first), turn the lock's turn at wait's last
// look (seen; revoke does not use it).
type waitBackoff struct {
	i    int
	park time.Duration
	turn uint32
}

// seen starts the backoff over if the turn moved since the last look: the lock changed hands,
// so the wait is in a queue that moves, not behind a long hold (see wait).
func (b *waitBackoff) seen(turn uint32) {
	if turn != b.turn {
		*b = waitBackoff{turn: turn}
	}
}

// pause waits before the next poll: nothing, a yield, or a sleep (see spinPolls).
func (b *waitBackoff) pause() {
	b.i++
	switch {
	case b.i < spinPolls:
	case b.i < spinPolls+yieldPolls:
		runtime.Gosched()
	default:
		b.park = min(max(2*b.park, parkMin), parkMax)
		time.Sleep(b.park)
	}
}

// Lock waits for the lock and takes it. Only the fast path (a free lock: one atomic add and a
// load of the turn) is here, within the inliner's budget, so that taking a free lock is no call;
// a lock held by another goes to wait, kept out of line. The turn is loaded with
// atomic.LoadUint32 on its word (an atomic.Uint32 holds its value at offset 0, as
// internal/relaxed relies on too), the same load as turn.Load(): the method's wrapper would
// cost the few inlining units that keep Lock under the budget. Where the build has getg
// (haveGetg), Lock is a call of lockBiasable instead, which names the holder (and biases the
// lock where canBias).
func (l *ticketLock) Lock() {
	if haveGetg {
		l.lockBiasable()
		return
	}
	if t := atomic.AddUint32(&l.next, 1) - 1; atomic.LoadUint32((*uint32)(unsafe.Pointer(&l.turn))) != t {
		l.wait(t)
	}
}

// lockBiasable is Lock where the build has getg (haveGetg), out of line: a lock that is not
// biasable (every lock where canBias is false: arm64) takes a ticket; one that is is taken
// through the bias if the caller owns it, else with a ticket and the ticket holder's bookkeeping
// (ticketTaken). Either ticket hold names its holder (ticketHeld).
//
//go:noinline
func (l *ticketLock) lockBiasable() {
	var g uintptr
	if canBias && l.biasable {
		g = goidpkg.G()
		if !l.ticketsOut() && l.lockBiased(g) {
			return
		}
	}
	t := atomic.AddUint32(&l.next, 1) - 1
	if l.turn.Load() != t {
		l.wait(t)
	}
	l.ticketHeld(g, t)
}

// ticketHeld is the bookkeeping of the goroutine whose getg is g (0: not computed yet), which has
// just taken the lock with ticket t (haveGetg): it names itself the ticket holder (ownerG,
// ownerT) and, on a biasable lock, runs ticketTaken.
//
//go:noinline
func (l *ticketLock) ticketHeld(g uintptr, t uint32) {
	if g == 0 {
		g = goidpkg.G()
	}
	relaxed.StoreRelease64(&l.ownerG, uint64(g))
	relaxed.StoreRelease32(&l.ownerT, t)
	if canBias && l.biasable {
		l.ticketTaken(g)
	}
}

// heldBy reports whether the goroutine whose getg is g, the caller, holds the lock. Only where
// haveGetg. Through the bias (canBias only): its record (last, which stays the lock's record
// while its owner holds the lock through it) is busy, and the caller is not in an attempt, being
// here. With a ticket: a ticket is out, and the last ticket holder (ownerT, ownerG) is the caller
// with the ticket that holds the lock (turn). Each ticket holder writes ownerG before ownerT,
// read here in the other order: an ownerT equal to turn was written by turn's holder (every
// ticket hold writes it), so the ownerG read after it is that holder's, or a later one's, never
// the caller's unless it holds the lock; the caller sees its own last stores. The answer is
// exact, on arm64 too: it needs two stores kept in order (release) and two loads (acquire),
// never a store kept before a later load (which qemu-aarch64 does not do for STLR, LDAR). It
// lets Close refuse a call from a Sink or callback that a pass on the caller's own goroutine
// runs (a Manual engine's Process or Poll: ownPass) without a record on the packet path: the
// bias path and Unlock record nothing, and a ticket hold's two stores (with the getg and the
// call of lockBiasable: on amd64 the bias's bookkeeping needs them anyway) are all it costs.
func (l *ticketLock) heldBy(g uintptr) bool {
	if r := l.last.Load(); r != nil && r.g == g && r.busy.Load() != 0 {
		return true
	}
	t := l.turn.Load()
	if atomic.LoadUint32(&l.next) == t { // no ticket out: free, or held through the bias
		return false
	}
	return l.ownerT.Load() == t && l.ownerG.Load() == uint64(g)
}

// ticketsOut reports whether a ticket is taken and not yet released (next is past turn): a
// ticket holder, or a waiter, is there.
func (l *ticketLock) ticketsOut() bool {
	return atomic.LoadUint32(&l.next) != atomic.LoadUint32((*uint32)(unsafe.Pointer(&l.turn)))
}

// lockBiased takes the lock through the bias if g owns it and the lock is free, and reports
// whether it did: the owner's side of the Dekker pair (see ticketLock). Not when g holds the lock
// already, through the bias (held is its record; read here by its only writer, g) or with a
// ticket (the callers ask ticketsOut first: a ticket is out, g's own, or another goroutine's on
// its way to revoke): the ticket lock is not reentrant, and a nested TryLock must fail
// (tryLockBiasable) and a nested Lock wait forever, as they do without the bias, not take the
// lock a second time, whose first Unlock would then release the outer hold.
func (l *ticketLock) lockBiased(g uintptr) bool {
	r := l.bias.Load()
	if r == nil || r.g != g || l.held == r {
		return false
	}
	relaxed.StoreRelease32(&r.busy, 1)
	if l.bias.Load() == r { // no fence in between: a revoker's barrier stands for it
		l.held = r
		return true
	}
	relaxed.StoreRelease32(&r.busy, 0) // revoked meanwhile: the revoker may be waiting for this
	return false
}

// ticketTaken is a ticket holder's bookkeeping, run by goroutine g right after it took the
// ticket: it revokes another's bias, and grants g the bias when g's streak earned it.
func (l *ticketLock) ticketTaken(g uintptr) {
	if l.bias.Load() != nil {
		l.revoke()
	}
	if g != l.streakG {
		l.streakG, l.streak = g, 0
	}
	l.streak++
	if l.streak >= max(l.need, 1) {
		r := l.last.Load()
		if r == nil || r.g != g {
			r = &biasRec{g: g}
			l.last.Store(r)
		}
		l.bias.Store(r) // its busy is 0: g is here, not in an attempt
	}
}

// revoke clears the bias and waits until its owner neither holds the lock through it nor can
// take it again: the revoker's side of the Dekker pair (see ticketLock). The caller holds a
// ticket.
//
//go:noinline
func (l *ticketLock) revoke() {
	r := l.bias.Swap(nil)
	membarrier.Barrier()
	var b waitBackoff
	for r.busy.Load() != 0 {
		b.pause() // the owner may hold the lock for long (a slow Sink): park after a while
	}
	l.need = min(max(2*l.need, 2), needMax)
	l.streak = 0
}

// wait polls the turn until it is ticket t's (Lock's slow path). The backoff starts over each
// time the turn moves (seen): a queue that moves is waited for by spinning, and only a waiter
// that saw no hand-off for its ~320 polls (a hold that lasts: a slow Sink, a Close) parks.
// Without that, with more waiters than processors, each parked behind the others' short holds
// and slept through its own turn, and the FIFO order made everyone behind it wait for the sleep:
// the queue stayed a convoy of sleeps (BenchmarkTicketLockContended: 187-279 us/op, 2.5 us/op
// with the reset).
//
//go:noinline
func (l *ticketLock) wait(t uint32) {
	b := waitBackoff{turn: l.turn.Load()}
	for cur := b.turn; cur != t; cur = l.turn.Load() {
		b.seen(cur)
		b.pause()
	}
}

// TryLock takes the lock if it is free and nobody waits, and reports whether it did. On a
// biasable lock the owner takes it through the bias; anyone else fails while the owner holds it
// (its record's busy is set) and otherwise takes the ticket and revokes the bias, which waits at
// most for an owner's hold that began meanwhile. A TryLock by the lock's holder fails, whichever
// way it holds the lock.
func (l *ticketLock) TryLock() bool {
	if haveGetg {
		return l.tryLockBiasable()
	}
	t := l.turn.Load()
	return atomic.LoadUint32(&l.next) == t && atomic.CompareAndSwapUint32(&l.next, t, t+1)
}

// tryLockBiasable is TryLock where the build has getg (haveGetg; see lockBiasable).
//
//go:noinline
func (l *ticketLock) tryLockBiasable() bool {
	var g uintptr
	if canBias && l.biasable {
		g = goidpkg.G()
		if !l.ticketsOut() && l.lockBiased(g) {
			return true
		}
		if r := l.bias.Load(); r != nil && r.busy.Load() != 0 {
			return false // the owner holds it (or is taking it): held, as far as TryLock knows
		}
	}
	t := l.turn.Load()
	if atomic.LoadUint32(&l.next) != t || !atomic.CompareAndSwapUint32(&l.next, t, t+1) {
		return false
	}
	l.ticketHeld(g, t)
	return true
}

// Unlock releases the lock. The caller must hold it.
func (l *ticketLock) Unlock() {
	if r := l.held; r != nil {
		l.held = nil
		relaxed.StoreRelease32(&r.busy, 0)
		return
	}
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
