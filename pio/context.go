package pio

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/cpu"

	"github.com/gosdma/gosdma/internal/goid"
	"github.com/gosdma/gosdma/internal/sinklanes"
)

// Releaser is told once per packet that its credits came back (hfi1: pio_release_cb with its
// arg). Released runs on the goroutine that ran the credit-return pass (the chip model's, a
// BufferAlloc that found no room, or Disable, Restart and Close) with the context's release lock
// held: it must not block and must not call into the same context (a Close of it, also one
// reached through another context's Close, is refused with ErrInvalid; see Close). A panic in
// it is recovered and counted (Stats.ReleasePanics); the pass goes on. A runtime.Goexit in it (a test's
// t.FailNow) cannot be stopped: the locks its goroutine held are released and the context is left
// halted (see Sink).
type Releaser interface {
	Released(code ReleaseCode)
}

// ReleaseFunc adapts a function to Releaser.
type ReleaseFunc func(code ReleaseCode)

// Released calls f.
func (f ReleaseFunc) Released(code ReleaseCode) { f(code) }

// Sink receives each packet the chip model sends: the bytes after the PBC, LengthDWs×4 − 8 of
// them, as one segment or two (when the packet wraps at the end of the send buffer). It has the
// shape of sdma.Sink, so any sdma sink serves a send context too. segs alias the send buffer and
// are valid only during the call. An error is counted (Stats.SinkErrors), not propagated; a panic
// is recovered and counted the same way. Deliver runs with the chip's lock held (and, in Disable
// and Close, the allocation lock): like a Releaser it must not block and must not call into the
// same context (Process, Disable, Close, ... would wait for themselves).
//
// A runtime.Goexit in Deliver or in a Releaser's Released (a test's t.FailNow; package sdma
// survives one in its sink too) ends the goroutine that ran the pass: the chip goroutine, a
// caller's Process or blocking send, a BufferAlloc, Disable, Restart or Close. The locks it held
// are released, and the context is left halted, not restarted, with a *HaltError of cause
// CauseGoexit (LastHalt, Stats.Halts): allocations get ErrNotRunning, waiters are woken, and the
// packet whose Deliver exited, with every one still pending, is released with PRCSCDisable by the
// next Restart, Disable or Close, exactly once (a Releaser that exited counts as called). If it
// was the chip goroutine, nothing can consume packets any more: Restart and Enable give the
// *HaltError, and only Close is left. An interrupted Close does the rest of its work when called
// again.
type Sink interface {
	Deliver(ctxt int, segs [][]byte) error
}

// Config configures a send context (the parameters of hfi1's sc_alloc).
type Config struct {
	// Type is the context type; it picks the default size and threshold.
	Type Type
	// Credits is the size in 64-byte blocks, 1..MaxBlocks. 0: the type's default size from
	// ContextSizes(SizeConfig{SDMA: true, RcvContexts: 2}), one user context beside the kernel
	// receive queue (kernel 18, VL15 102, ACK 32, user 1024).
	Credits int
	// Threshold is the credit-return threshold in blocks: the chip writes the free counter back
	// once this many consumed credits are unreturned. 0: DefaultCreditThreshold(Type, Credits,
	// MTU, 32), at least 1.
	Threshold int
	// MTU is the MTU in bytes the default threshold is computed for, 1..10240; 0: 10240
	// (hfi1_max_mtu).
	MTU int
	// Index is the context's software index, handed to the sink with each packet.
	Index int
	// Sink receives the packets. nil: they are dropped (counted in Stats). A Sink with a method
	// Engines() int says it takes the numbers 0..Engines()-1 (udpsink.Sink does): New reads it
	// once and refuses (ErrInvalid) a sink with no number for Index, which would refuse every
	// packet of the context after its send succeeded. A negative answer says nothing (a wrapper
	// over a sink without the method gives -1): such a sink, and one without the method, is
	// taken.
	Sink Sink
	// Manual runs no chip goroutine: the caller drives the chip with Process (and a blocking
	// send drives it itself while it waits).
	Manual bool
	// Faults is the initial fault plan (SetFaults changes it).
	Faults FaultPlan
}

// context flags (hfi1: SCF_*).
const (
	scfEnabled = 0x01 // SCF_ENABLED: allocations allowed
	scfInFree  = 0x02 // SCF_IN_FREE: being freed (Close): no restarts
	scfHalted  = 0x04 // SCF_HALTED: the chip halted the context
	scfFrozen  = 0x08 // SCF_FROZEN
)

// buffer states, in Buf.state.
const (
	bufFree      uint32 = iota // not allocated (or consumed by the chip)
	bufAllocated               // handed out by BufferAlloc, being written
	bufWritten                 // the copy ended: the chip may consume it
)

// Buf is one allocated PIO buffer: the blocks of one packet (hfi1: struct pio_buf, an entry of
// the shadow ring). It is returned by BufferAlloc and belongs to the caller until the copy ends
// (Copy, or CopyEnd after CopyStart and CopyMid); after that it is the context's, and the
// pointer must not be used again (the slot is reused).
type Buf struct {
	sc         *SendContext
	rel        Releaser // called once when the credits come back; cleared when called
	sentAt     uint64   // the fill count after this allocation: sent once free >= sentAt (sent_at)
	start      uint32   // byte offset of the first block in the send buffer
	blocks     uint32   // blocks allocated
	qwWritten  uint32   // quadwords written so far (qw_written)
	carryBytes uint32   // valid low bytes in carry (carry_bytes)
	carry      uint64   // pending bytes of a segmented copy, unused bytes zero (carry)

	// state is bufFree/bufAllocated/bufWritten. Written by BufferAlloc (allocated, under the
	// alloc lock, before the head store that publishes the slot), by the copy's end (written:
	// the store-release that hands the blocks to the chip) and by the chip (free, after
	// consuming); read by the chip (load-acquire).
	state atomic.Uint32
	_     [64 - 60]byte // one slot per cache line on 64-bit (layout_unsafe_test.go)
}

// SendContext is a PIO send context (hfi1: struct send_context): a send buffer of Credits
// 64-byte blocks handed out as credits in order, a shadow ring of the buffers in flight, the
// chip model that consumes whole blocks in order and writes the free counter back, the release
// pass that returns credits and runs release callbacks, and the wait list of producers that
// found no credits.
//
// A SendContext is safe for concurrent use. Lock order: alloc, hw (the chip), release, wait;
// the package's closers lock (the Closes' waits) comes before a wait lock.
// Make one with New: the zero SendContext has no send buffer, and its BufferAlloc (hence
// BufferAllocWait and SendWait) and Enable refuse with ErrInvalid saying so; its QueueWait parks
// nothing (false: retry).
type SendContext struct {
	// Read-only after New.
	typ     Type
	index   int
	credits uint64 // blocks in the context (credits)
	size    int    // bytes: credits × 64 (size)
	buf     []byte // the send buffer, 64-byte aligned (the PIO memory at base_addr)
	sr      []Buf  // shadow ring, credits+1 entries so head == tail means empty (sr)
	srSize  uint32 // len(sr) (sr_size)
	sink    Sink   // nil: drop
	manual  bool   // no chip goroutine
	bell    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	// closingG is the goroutine (goid.Self) doing Close's work (doClose), 0 when none; closed is
	// set when that work is all done (a Goexit in a callback that Close's Disable runs leaves it
	// clear: the next Close finishes). Both under closers.mu (closeWork, doClose): a Close that
	// finds the work in progress waits for it, unless its goroutine waited for (closerSet).
	closingG uint64
	closed   bool
	// gone is set when a Goexit is ending the chip goroutine: by goexitHalt on that goroutine
	// (a Sink's, Releaser's or wake-up's Goexit: under allocMu, with the halt, so that no
	// Restart or Enable gets in between the halt and the goroutine's end), and by its deferred
	// handler (runDone). Enable and Restart refuse from then on. Read by Enable under allocMu,
	// by Restart before it (atomic loads).
	gone atomic.Bool
	// chipG identifies the chip goroutine (goid.Self: its runtime g where the build has it, else
	// its id), or 0 before it runs, once it has ended and on a manual chip. Written by run (atomic
	// store) and by runDone (0, as the goroutine ends: the runtime may give its g to another);
	// read by onChip (atomic load), which tells the chip goroutine's Goexit from a caller's by it.
	chipG atomic.Uint64
	// relG and hwG identify the goroutine (goid.Self) that runs the context's Releasers with
	// releaseMu held (a release pass, Disable's flush), and its Sink with hwMu held (a pass of
	// the chip, Disable's egress), on a caller's goroutine; 0 when none does, and on the chip
	// goroutine (whose end a Close's work waits for already: closers.working). Recorded once per
	// hold, before its first callback (releasePass and Disable's flush: at the first Releaser;
	// consumeRec: at the first packet, Sink or not), and cleared before the lock is let go, by
	// the holder that recorded it (atomic stores; the g is read once per Process, before hwMu,
	// and handed down: callerG); read by the Closes' graph (closers.mu held): a Close's work
	// of the context waits for that goroutine's locks, so a Close that goroutine makes from the
	// callback does not wait for the one doing the work (closerSet.lockTargetsLocked). Only
	// where the build has getg (goid.HaveG): elsewhere the identity is a runtime.Stack read,
	// which would allocate on the packet path, and none is recorded (see Close).
	relG, hwG atomic.Uint64

	_ cpu.CacheLinePad

	// Allocator fields (hfi1: the alloc_lock cache line). All under allocMu except where said.
	allocMu   sync.Mutex
	fill      uint64 // blocks ever allocated (fill)
	allocFree uint64 // a copy of free, refreshed only when room runs short (alloc_free)
	fillWrap  uint64 // fill modulo credits: the next block to hand out (fill_wrap)
	hwEnabled bool   // the context's CSR enable bit (SendCtxtCtrl.CtxtEnable): set by Enable, cleared by Disable
	// srHead is the next shadow-ring slot to hand out (sr_head). Written by BufferAlloc under
	// allocMu (atomic store: publishes the slot to the releaser and the chip, smp_wmb + store in
	// the kernel) and by Enable; read by the release pass and the chip (atomic load).
	srHead atomic.Uint32
	// flags are the SCF_* bits. Written under allocMu (atomic store); read anywhere (atomic load).
	flags atomic.Uint32
	// inFlight counts buffers allocated whose copy has not ended (buffers_allocated, per-CPU in
	// the kernel). Added to under allocMu by BufferAlloc, subtracted by the copy's end; read by
	// Disable, which waits for it to reach zero before it flushes the shadow ring.
	inFlight atomic.Int64

	_ cpu.CacheLinePad

	// Releaser fields (hfi1: the release_lock cache line). srTail under releaseMu.
	releaseMu sync.Mutex
	srTail    uint32 // the oldest slot whose callback has not run (sr_tail)
	// free is the number of blocks ever returned (free). Written by the release pass under
	// releaseMu (atomic store, after srTail: smp_wmb in the kernel); read by BufferAlloc
	// (atomic load, READ_ONCE).
	free atomic.Uint64
	// hwFree is the credit return word the chip writes to host memory (*hw_free): the free
	// counter modulo 2048 and the CR_* reason bits. Written by the chip (atomic store), read by
	// the release pass (atomic load).
	hwFree atomic.Uint64
	// releaseSeq counts release passes that returned credits, and flushes. Written under
	// releaseMu (atomic add),
	// read by producers before they try to allocate and again under waitMu before they park
	// (QueueWait): a change means credits may have come back, so they retry instead.
	releaseSeq atomic.Uint32

	_ cpu.CacheLinePad

	// Wait list (hfi1: piowait under waitlock).
	waitMu    sync.Mutex
	waitHead  *Waiter
	waitTail  *Waiter
	waitCount atomic.Int32 // waiters queued: written under waitMu, read by the chip (it returns credits per packet while producers wait)
	// parks counts the parks on the list (the next Waiter.ticket): under waitMu, written by
	// QueueWait, read by a flush (wakeAll) to tell the waiters queued before it began.
	parks uint64
	// wakers are the goroutines running wake-ups of this context's waiters, which they took off
	// the list (wakeBeginLocked, wakeEnd). Under waitMu; read by Close (waitWakers).
	wakers []waker

	_ cpu.CacheLinePad

	// The chip model. All under hwMu.
	hwMu       sync.Mutex
	chipIdx    uint32 // next shadow-ring slot the chip consumes
	chipFree   uint64 // blocks consumed: the chip's free counter
	returned   uint64 // chipFree at the last credit return
	hwHalted   bool   // the chip halted: it consumes nothing until Enable
	hwStopped  bool   // Disable stopped the chip
	faults     faultState
	faultCount uint64    // packets consumed ever (for FaultPlan.HaltAt), never reset
	inDisable  bool      // Disable holds allocMu too: what a Sink's Goexit must release (sinkExited)
	segs       [2][]byte // the sink's segments for the packet being sent (no allocation per packet)
	// threshold is the credit-return threshold in blocks. Written by SetThreshold (atomic
	// store), read by the chip (atomic load).
	threshold atomic.Uint64
	// force asks the chip for a credit return (SendCtxtCreditForce). Written by ReturnCredits,
	// cleared by the chip (atomic swap).
	force atomic.Bool
	// chipAt mirrors chipIdx for the chip goroutine's idle check: written under hwMu (atomic
	// store), read by hasWork without it (atomic load).
	chipAt atomic.Uint32
	// parked is set by the chip goroutine before it blocks on the doorbell and cleared when it
	// wakes; producers ring the doorbell only while it is set. Dekker-style with the state
	// store that publishes a buffer: the producer stores the state then loads parked, the chip
	// stores parked then loads the state (hasWork); Go's atomics are sequentially consistent,
	// so one of the two sees the other and no wake-up is lost.
	parked atomic.Bool
	// chipOff mirrors hwHalted || hwStopped for hasWork: written under hwMu, read without.
	chipOff atomic.Bool

	lastHalt atomic.Pointer[HaltError]
	stats    stats
}

type stats struct {
	packets, blocks, bytes            atomic.Uint64
	creditReturns, releases, flushed  atomic.Uint64
	halts, restarts, noCredits, waits atomic.Uint64
	wakeups, sinkErrors, relPanics    atomic.Uint64
	wakePanics                        atomic.Uint64
}

// Stats are a context's counters.
type Stats struct {
	Packets       uint64 // packets the chip sent
	Blocks        uint64 // blocks the chip consumed
	Bytes         uint64 // bytes delivered to the sink (after the PBC)
	CreditReturns uint64 // credit return write-backs
	Releases      uint64 // release callbacks run with the chip's code
	Flushed       uint64 // release callbacks run with PRCSCDisable by a disable (halt, Disable, Close)
	Halts         uint64 // halts of the chip
	Restarts      uint64 // recoveries (sc_restart)
	NoCredits     uint64 // BufferAlloc calls that found no room
	Waits         uint64 // producers queued on the wait list
	Wakeups       uint64 // producers woken from the wait list
	SinkErrors    uint64 // sink errors and panics
	ReleasePanics uint64 // release callbacks that panicked
	WakeupPanics  uint64 // waiter wake-ups that panicked
}

// New allocates and enables a send context (hfi1: sc_alloc + sc_enable). Bad configuration is an
// error matching ErrInvalid.
func New(cfg Config) (*SendContext, error) {
	if cfg.Type >= NumTypes {
		return nil, errf("New", ErrInvalid, "unknown context type "+cfg.Type.String())
	}
	if cfg.Credits == 0 {
		sz, err := ContextSizes(SizeConfig{SDMA: true, RcvContexts: 2})
		if err != nil {
			return nil, err
		}
		cfg.Credits = sz[cfg.Type].Blocks
	}
	if cfg.Credits < 1 || cfg.Credits > MaxBlocks {
		return nil, errf("New", ErrInvalid, "credits "+itoa(cfg.Credits)+" outside 1.."+itoa(MaxBlocks))
	}
	if cfg.MTU == 0 {
		cfg.MTU = 10240
	}
	if cfg.MTU < 0 || cfg.MTU > 10240 {
		return nil, errf("New", ErrInvalid, "MTU "+itoa(cfg.MTU)+" outside 1..10240 (hfi1_max_mtu)")
	}
	if cfg.Threshold == 0 {
		// At least 1: the kernel's formula gives 0 for a context of one credit (50 % of 1), a
		// threshold the chip model refuses; the kernel never sizes a context that small.
		cfg.Threshold = max(1, DefaultCreditThreshold(cfg.Type, cfg.Credits, cfg.MTU, 32))
	}
	if cfg.Threshold < 1 || cfg.Threshold > cfg.Credits {
		return nil, errf("New", ErrInvalid, "threshold "+itoa(cfg.Threshold)+" outside 1..credits ("+itoa(cfg.Credits)+")")
	}
	if err := cfg.Faults.check(); err != nil {
		return nil, err
	}
	if err := checkSinkEngines(cfg.Sink, cfg.Index); err != nil {
		return nil, err
	}
	sc := &SendContext{
		typ:     cfg.Type,
		index:   cfg.Index,
		credits: uint64(cfg.Credits),
		size:    cfg.Credits * BlockSize,
		buf:     alignedBuf(cfg.Credits * BlockSize),
		sr:      make([]Buf, cfg.Credits+1),
		srSize:  uint32(cfg.Credits + 1),
		sink:    cfg.Sink,
		manual:  cfg.Manual,
		faults:  newFaultState(cfg.Faults, cfg.Index),
	}
	for i := range sc.sr {
		sc.sr[i].sc = sc
	}
	sc.threshold.Store(uint64(cfg.Threshold))
	if err := sc.Enable(); err != nil {
		return nil, err
	}
	if !sc.manual {
		sc.bell = make(chan struct{}, 1)
		sc.quit = make(chan struct{})
		sc.done = make(chan struct{})
		go sc.run()
	}
	return sc, nil
}

// checkSinkEngines refuses a sink that says how many engine numbers it takes (an Engines
// method, internal/sinklanes: udpsink.Sink, verbs' lanes of the SDMA device's sink) and has none
// for index, the number the context delivers as: it would refuse every packet of the context
// after its send succeeded and its credits came back, a loss told only by Stats.SinkErrors. A
// sink without the method (or whose Engines is negative) is taken; a panic in Engines refuses.
func checkSinkEngines(s Sink, index int) error {
	have, ok, err := sinklanes.Of(s)
	switch {
	case err != nil:
		return errf("New", ErrInvalid, "sink: "+err.Error())
	case ok && (index < 0 || index >= have):
		return errf("New", ErrInvalid, "the sink takes "+sinklanes.EngineCount(have)+" (its Engines method), none for Index "+itoa(index)+", the number the context delivers as: it would refuse every packet of the context")
	}
	return nil
}

// Index returns the context's software index (sw_index).
func (sc *SendContext) Index() int { return sc.index }

// Type returns the context's type.
func (sc *SendContext) Type() Type { return sc.typ }

// Credits returns the context's size in blocks (credits).
func (sc *SendContext) Credits() int { return int(sc.credits) }

// Threshold returns the credit-return threshold in blocks.
func (sc *SendContext) Threshold() int { return int(sc.threshold.Load()) }

// SetThreshold changes the credit-return threshold and forces a credit return, as the kernel
// does on a change to avoid a stall (hfi1: sc_set_cr_threshold). It must be in 1..Credits.
func (sc *SendContext) SetThreshold(blocks int) error {
	if blocks < 1 || blocks > int(sc.credits) {
		return errf("SetThreshold", ErrInvalid, "threshold "+itoa(blocks)+" outside 1..credits ("+itoa(int(sc.credits))+")")
	}
	if sc.threshold.Swap(uint64(blocks)) != uint64(blocks) {
		sc.ReturnCredits()
	}
	return nil
}

// Enabled reports whether the context accepts allocations (SCF_ENABLED).
func (sc *SendContext) Enabled() bool { return sc.flags.Load()&scfEnabled != 0 }

// Halted reports whether the chip halted the context and it has not been restarted yet.
func (sc *SendContext) Halted() bool { return sc.flags.Load()&scfHalted != 0 }

// LastHalt returns the most recent halt, or nil.
func (sc *SendContext) LastHalt() *HaltError { return sc.lastHalt.Load() }

// InFlight returns the buffers allocated whose copy has not ended (buffers_allocated).
func (sc *SendContext) InFlight() int { return int(sc.inFlight.Load()) }

// Avail returns the blocks free right now from the allocator's view (credits - (fill - free)).
func (sc *SendContext) Avail() int {
	sc.allocMu.Lock()
	defer sc.allocMu.Unlock()
	return int(sc.credits - (sc.fill - sc.free.Load()))
}

// Stats returns a snapshot of the context's counters.
func (sc *SendContext) Stats() Stats {
	s := &sc.stats
	return Stats{
		Packets: s.packets.Load(), Blocks: s.blocks.Load(), Bytes: s.bytes.Load(),
		CreditReturns: s.creditReturns.Load(), Releases: s.releases.Load(), Flushed: s.flushed.Load(),
		Halts: s.halts.Load(), Restarts: s.restarts.Load(), NoCredits: s.noCredits.Load(),
		Waits: s.waits.Load(), Wakeups: s.wakeups.Load(), SinkErrors: s.sinkErrors.Load(),
		ReleasePanics: s.relPanics.Load(), WakeupPanics: s.wakePanics.Load(),
	}
}

// BufferAlloc reserves the blocks for one packet of dwLen dwords, PBC included (hfi1:
// sc_buffer_alloc). rel, if not nil, is told once when the packet's credits come back. The
// buffer must then be written with Copy, or CopyStart, CopyMid... and CopyEnd.
//
// Not enough room: it refreshes its copy of the free count, then runs a release pass itself, and
// if there is still no room returns ErrNoCredits (bare; nothing changed; see ErrNoCredits for
// how to get credits back: the pass reads only what the chip last wrote back). A context that is not
// enabled (halted, stopped, disabled) gives ErrNotRunning, a closed one ErrClosed. A length
// outside 2..MaxPacketDWs or beyond the context's buffer is an error matching ErrMsgSize.
//
// Allocation is per context under one lock, as in the kernel: a lock-free reservation would save
// the lock but the release pass it sometimes runs, the shadow ring and the halt flags all want
// the same serialisation (see the package doc).
//
// BufferAlloc never runs a Waiter's wake-up. The release pass it runs when room is short returns
// credits and calls release callbacks, but leaves the waiters on the list and asks the chip for a
// credit return (ReturnCredits) if any are queued: the chip's pass that follows wakes them, on the
// chip goroutine at once or, with a manual chip, at the next Process (a chip that halted or was
// disabled meanwhile makes no pass, but the flush of its Restart, Disable or Close wakes every
// waiter). This is the kernel's split: sc_buffer_alloc's sc_release_update runs sc_piobufavail,
// whose hfi1_qp_wakeup only schedules the QP's send work (hfi1_schedule_send, iowait_schedule:
// queue_work_on), which runs later on a workqueue, never on the allocating thread; that thread
// allocates at once, before any woken QP runs. Running the wake-ups here instead ran them on a goroutine that, on success, had already
// counted its new buffer in flight: a wake-up that disabled, restarted or closed the context, or
// met a halt, waited for that unfinished buffer for ever. No wake-up is lost: the chip's pass
// takes every waiter still queued (piobufavail, a batch at a time), and one that QueueWait counts
// after the check sees the releaseSeq of a pass that returned credits and retries (leaveWakeups).
func (sc *SendContext) BufferAlloc(dwLen int, rel Releaser) (*Buf, error) {
	blocks := uint64(dwordsToBlocks(dwLen))
	if dwLen < 2 || dwLen > MaxPacketDWs || blocks > sc.credits {
		if sc.credits == 0 {
			return nil, errNotMade("BufferAlloc")
		}
		return nil, errf("BufferAlloc", ErrMsgSize, "packet of "+itoa(dwLen)+" dwords: want 2.."+itoa(min(MaxPacketDWs, int(sc.credits)*blockDWs)))
	}
	sc.allocMu.Lock()
	if f := sc.flags.Load(); f&scfEnabled == 0 {
		sc.allocMu.Unlock()
		if f&scfInFree != 0 {
			return nil, ErrClosed
		}
		return nil, ErrNotRunning
	}
	passed := false
	if blocks > sc.credits-(sc.fill-sc.allocFree) {
		// Copy from the releaser's cache line and recalculate; still no room: run a release
		// pass now (the kernel's one retry). Its wake-ups are left to the chip's next pass
		// (leaveWakeups), as the kernel's hfi1_qp_wakeup leaves the woken QP's work to a
		// workqueue.
		sc.allocFree = sc.free.Load()
		if blocks > sc.credits-(sc.fill-sc.allocFree) {
			sc.releasePass(true, sc.callerG())
			passed = true
			sc.allocFree = sc.free.Load()
			if blocks > sc.credits-(sc.fill-sc.allocFree) {
				sc.allocMu.Unlock()
				sc.stats.noCredits.Add(1)
				sc.leaveWakeups()
				return nil, ErrNoCredits
			}
		}
	}
	sc.inFlight.Add(1)
	head := sc.srHead.Load()
	sc.fill += blocks
	start := sc.fillWrap
	sc.fillWrap += blocks
	if sc.fillWrap >= sc.credits {
		sc.fillWrap -= sc.credits
	}
	b := &sc.sr[head]
	b.sentAt = sc.fill
	b.rel = rel
	b.start = uint32(start * BlockSize)
	b.blocks = uint32(blocks)
	b.qwWritten = 0
	b.carry = 0
	b.carryBytes = 0
	b.state.Store(bufAllocated)
	next := head + 1
	if next >= sc.srSize {
		next = 0
	}
	// Store-release: the slot's fields above are visible to the release pass and the chip
	// before they see the new head (smp_wmb; sc->sr_head = next).
	sc.srHead.Store(next)
	sc.allocMu.Unlock()
	if passed {
		sc.leaveWakeups()
	}
	return b, nil
}

// leaveWakeups hands the wake-ups of BufferAlloc's release pass to the chip (see BufferAlloc):
// if waiters are queued it asks for a credit return, whose pass (piobufavail) wakes them. The
// count is loaded after the pass stored releaseSeq (both sequentially consistent): a waiter that
// QueueWait counts after this load sees the sequence of a pass that returned credits and retries
// instead of parking (and one parked after a pass that returned none waits for a return as any
// does: the first waiter asks for one, and the chip returns after every packet while any wait).
func (sc *SendContext) leaveWakeups() {
	if sc.waitCount.Load() != 0 {
		sc.ReturnCredits()
	}
}

// ReleaseSeq returns the release sequence count (bumped by each release pass that returned
// credits, and by Disable and Enable): take it before an allocation attempt and hand it to
// QueueWait, which parks only if it has not moved since.
func (sc *SendContext) ReleaseSeq() uint32 { return sc.releaseSeq.Load() }

// ReleaseUpdate runs a release pass now (hfi1: sc_release_update): it reads the chip's credit
// return word, advances the free count, runs the release callback of every packet now sent, in
// order, and wakes up to WaitBatchSize waiters (the top-priority one first: see QueueWaitSent). The
// chip model runs it after each credit return (the credit-return interrupt); BufferAlloc runs the
// pass when room runs short, and leaves its wake-ups to the chip's next pass (see BufferAlloc). The
// wake-ups run on the caller's goroutine: like Process, it must not be called while holding an
// unfinished buffer of this context (a wake-up that disabled the context would wait for that buffer
// for ever).
func (sc *SendContext) ReleaseUpdate() { sc.releaseUpdate(false, sc.callerG()) }

// releaseUpdate is ReleaseUpdate; chip: it runs on the chip goroutine (run), whose wake-ups
// need no record (see piobufavail); g: the caller's goroutine to record as relG (callerG).
func (sc *SendContext) releaseUpdate(chip bool, g uint64) {
	sc.releasePass(false, g)
	sc.piobufavail(chip)
}

// releasePass is the release pass without its wake-ups (sc_release_update up to
// sc_piobufavail): the caller runs piobufavail once it holds no lock.
// alloc: the caller holds allocMu (BufferAlloc), for a Releaser's Goexit. g: the goroutine to
// record as relG while it runs the Releasers (callerG: 0 on the chip goroutine or without getg).
func (sc *SendContext) releasePass(alloc bool, g uint64) {
	sc.releaseMu.Lock()
	hw := sc.hwFree.Load()
	old := sc.free.Load()
	free := old + (hw-old)&crCounterMask
	head := sc.srHead.Load()
	tail := sc.srTail
	code, haveCode := PRCOK, false
	for head != tail {
		b := &sc.sr[tail]
		if int64(free-b.sentAt) < 0 { // sent_before(free, sent_at): not sent yet
			break
		}
		if r := b.rel; r != nil {
			if !haveCode {
				code, haveCode = fillCode(hw), true
				if g != 0 {
					sc.relG.Store(g) // see relG
				}
			}
			b.rel = nil
			sc.stats.releases.Add(1)
			sc.callRelease(r, code, alloc)
		}
		tail++
		if tail >= sc.srSize {
			tail = 0
		}
	}
	sc.srTail = tail
	// The tail is updated before free (smp_wmb): an allocator that sees the new free finds the
	// slots behind it released.
	sc.free.Store(free)
	if free != old {
		sc.releaseSeq.Add(1) // credits came back: a producer about to park retries instead
	}
	if haveCode && g != 0 { // a Releaser ran: g was recorded
		sc.relG.Store(0)
	}
	sc.releaseMu.Unlock()
}

// callRelease runs r (releaseMu held, and allocMu when alloc: a BufferAlloc's pass or Disable's
// flush); a panic is recovered and counted, a Goexit handled (releaseExited).
func (sc *SendContext) callRelease(r Releaser, code ReleaseCode, alloc bool) {
	returned := false
	defer func() {
		if !returned {
			if p := recover(); p != nil {
				sc.stats.relPanics.Add(1)
			} else {
				sc.releaseExited(alloc)
			}
		}
	}()
	r.Released(code)
	returned = true
}

// ReturnCredits asks the chip for a credit return now (hfi1: sc_return_credits, a write of
// SendCtxtCreditForce) and returns: the chip then writes the free counter back with the force
// reason (released packets get PRCSCDisable, as fill_code maps it) and runs a release pass, on
// the chip goroutine or, with a manual chip, at the next Process.
func (sc *SendContext) ReturnCredits() {
	sc.force.Store(true)
	sc.kick()
}

// kick wakes the chip goroutine if it is parked (the doorbell); with a manual chip it does
// nothing.
func (sc *SendContext) kick() {
	if sc.bell != nil && sc.parked.Load() {
		select {
		case sc.bell <- struct{}{}:
		default:
		}
	}
}

// Stop stops allocations (hfi1: sc_stop(sc, SCF_FROZEN)): new BufferAlloc calls get
// ErrNotRunning; the chip goes on sending what was written. Enable does not undo a Stop alone
// (the hardware is still enabled), nor does Restart (ErrInvalid: a stopped context is not
// halted; sc_restart bounces off too); Disable then Enable does (pio_freeze's sc_disable, then
// pio_kernel_unfreeze's sc_enable).
func (sc *SendContext) Stop() {
	sc.stop(scfFrozen)
}

func (sc *SendContext) stop(flag uint32) {
	sc.allocMu.Lock()
	sc.flags.Store(sc.flags.Load()&^scfEnabled | flag)
	sc.allocMu.Unlock()
}

// Disable disables the context (hfi1: sc_disable): allocations stop, it waits for the buffers
// being written to be finished (Copy or CopyEnd; the caller must not hold an unfinished buffer of
// this context), lets the chip send what was fully written unless it halted (a packet that halts
// it then is recorded as any halt: LastHalt, Stats.Halts, Halted until Enable), stops the chip, and
// runs every release callback still pending with PRCSCDisable, in order, exactly once. Then it
// wakes every waiter (they find the context disabled). Disabling a disabled context does it all
// again, harmlessly.
func (sc *SendContext) Disable() {
	sc.allocMu.Lock()
	sc.flags.Store(sc.flags.Load() &^ scfEnabled)
	sc.hwEnabled = false
	for sc.inFlight.Load() != 0 { // producers finish their copies without the alloc lock
		runtime.Gosched()
	}
	sc.hwMu.Lock()
	if !sc.hwHalted && !sc.hwStopped {
		sc.inDisable = true // a Sink's Goexit releases allocMu too (sinkExited)
		// sc_wait_for_packet_egress: what was launched goes out. A packet that halts the chip
		// meanwhile is a halt like any other (the error interrupt's sc_stop(sc, SCF_HALTED)):
		// recorded, and Halted until Enable; the flush below releases it.
		_, h, _ := sc.consumeRec(sc.callerG())
		sc.clearHwG()
		sc.inDisable = false
		if h != nil {
			sc.lastHalt.Store(h)
			sc.stats.halts.Add(1)
			sc.flags.Store(sc.flags.Load() | scfHalted)
		}
	}
	sc.hwStopped = true
	sc.chipOff.Store(true)
	sc.hwMu.Unlock()

	sc.releaseMu.Lock()
	head := sc.srHead.Load()
	g := sc.callerG()
	for sc.srTail != head {
		b := &sc.sr[sc.srTail]
		if r := b.rel; r != nil {
			b.rel = nil
			sc.stats.flushed.Add(1)
			if g != 0 {
				sc.relG.Store(g) // see relG
				g = 0
			}
			sc.callRelease(r, PRCSCDisable, true)
		}
		sc.srTail++
		if sc.srTail >= sc.srSize {
			sc.srTail = 0
		}
	}
	sc.releaseSeq.Add(1)
	sc.clearRelG()
	sc.releaseMu.Unlock()
	sc.allocMu.Unlock()

	// The kernel flushes piowait under alloc_lock; Waiter promises wake-ups without locks held.
	// The context is disabled by now: the woken find it so (or enabled again, after Restart).
	sc.wakeAll()
}

// Enable enables the context (hfi1: sc_enable). If the hardware is already enabled it does
// nothing (the kernel's "only clear free and fill if transitioning 0 -> 1"); otherwise it resets
// the counters, the shadow ring and the chip, clears the flags and allows allocations. A closed
// context gives ErrClosed; one whose chip goroutine a runtime.Goexit ended or is ending (see Sink
// and Restart), the recorded *HaltError.
func (sc *SendContext) Enable() error {
	if sc.credits == 0 {
		return errNotMade("Enable")
	}
	sc.allocMu.Lock()
	defer sc.allocMu.Unlock()
	if sc.flags.Load()&scfInFree != 0 {
		return errf("Enable", ErrClosed, "send context "+itoa(sc.index)+" is closed")
	}
	if sc.gone.Load() {
		return sc.goneErr("Enable")
	}
	if sc.hwEnabled {
		return nil
	}
	sc.hwMu.Lock()
	sc.releaseMu.Lock()
	sc.hwFree.Store(0)
	sc.free.Store(0)
	sc.allocFree, sc.fill, sc.fillWrap = 0, 0, 0
	sc.srHead.Store(0)
	sc.srTail = 0
	for i := range sc.sr {
		sc.sr[i].rel = nil
		sc.sr[i].state.Store(bufFree)
	}
	sc.chipIdx, sc.chipFree, sc.returned = 0, 0, 0
	sc.chipAt.Store(0)
	sc.hwHalted, sc.hwStopped = false, false
	sc.chipOff.Store(false)
	sc.force.Store(false)
	sc.releaseSeq.Add(1)
	sc.releaseMu.Unlock()
	sc.hwMu.Unlock()
	sc.hwEnabled = true
	sc.flags.Store(scfEnabled)
	return nil
}

// Restart recovers a halted context (hfi1: sc_restart): with allocations already stopped by the
// halt, it waits for the buffers being written to be finished, disables the context (every
// pending packet is released with PRCSCDisable, exactly once) and enables it again. A context
// that is not halted, or is closing, gives ErrInvalid (also when Close comes while Restart
// runs: its pending packets are then released once, and it stays closed); one whose chip goroutine a runtime.Goexit
// ended or is ending (see Sink), the recorded *HaltError, and stays halted. The refusal starts
// with the halt itself, which that goroutine records before it ends, and Restart does not wait
// for the end (it would change nothing but the wait: nothing consumes packets after it either).
// A Restart that checked before the halt and disables the context after it gets the *HaltError
// too (from its Enable): the context stays halted, its pending packets released once. The chip
// model calls Restart itself after a halt (the kernel's halt_work); it is exported for a manual
// chip and for tests.
func (sc *SendContext) Restart() error {
	if f := sc.flags.Load(); f&scfInFree != 0 {
		return errf("Restart", ErrInvalid, "send context "+itoa(sc.index)+" is closed")
	} else if f&scfHalted == 0 {
		return errf("Restart", ErrInvalid, "send context "+itoa(sc.index)+" is not halted")
	}
	if sc.gone.Load() { // a Goexit ended the chip goroutine: nothing would consume packets
		return sc.goneErr("Restart")
	}
	if h := testRestartChecked.Load(); h != nil {
		(*h)(sc)
	}
	sc.Disable()
	if err := sc.Enable(); err != nil {
		if errors.Is(err, ErrClosed) {
			// Close came after the check above: the same answer as had it come before.
			return errf("Restart", ErrInvalid, "send context "+itoa(sc.index)+" is closed")
		}
		return err
	}
	sc.stats.restarts.Add(1)
	return nil
}

// Close disables the context for good (hfi1: sc_free): every pending packet is released with
// PRCSCDisable exactly once, every waiter is woken and the chip goroutine stops. Like Disable it
// first waits for every allocated buffer's copy to end: a buffer left unfinished keeps Close
// waiting. Close is idempotent and safe to call concurrently; one that a Goexit in a callback
// interrupted (see Sink) finishes on the next call. Called on the chip goroutine (from a Waiter's
// wake-up, a Sink or a Releaser that it runs) Close would wait for that goroutine to end: it
// returns ErrInvalid there and changes nothing; so does a Close from a Releaser or Sink of the
// context that a caller's goroutine runs with the context's locks held (reached through another
// context's Close from that callback, whose flush runs a callback that Closes this one: it would
// wait for those locks). Such a refusal (this one, or the one below of a
// Close whose work would wait for a chip goroutine that waits for this one) holds for as long as
// the callback runs, each retry from it refused the same way at once: a callback that retries
// until Close succeeds loops for ever (and holds up the chip goroutine, and so every Close of the
// context), a bug of the callback's. It must return, leaving the Close to another goroutine
// (go sc.Close(), say, or the producer that parked the Waiter).
//
// Before it returns, every Close (the one that did the work and any other, also on a closed
// context) waits, besides the chip goroutine's end, for the work of a Close of the context in
// progress on another goroutine, and for the wake-ups of the context's waiters in progress on
// other goroutines: a release pass of a manual chip's Process, of ReleaseUpdate or of a
// BufferAllocWait driving the chip takes its batch off the list and wakes it with no lock held,
// and Close waits until that goroutine has woken the whole batch, also where a wake-up of the
// batch is itself in a Close (of this context or another), so no wake-up of the context starts
// or still runs once Close returned, but on Close's own goroutine and the goroutines below.
//
// A wake-up on a caller's goroutine may call Close. No Close waits for a goroutine that waits,
// directly or through other Closes, for its own (it would wait for itself): each leaves such a
// goroutine out, and no wait goes round. So a Close does not wait for its own goroutine's
// wake-ups (it runs inside one); a Close from a wake-up that a Close on the same goroutine runs
// (its flush) returns nil at once, the outer Close doing the work and the waiting; and of two
// wake-ups on two goroutines whose Closes each wait for the other's goroutine (one context, or
// each closing the other's), the Close that waits first waits for the other goroutine's whole
// batch, the Close in it included, and that second Close does not wait for the first's
// goroutine: it returns once the rest is done (or at once, nil, where the first is doing the
// second's context's work, left to it). A Close on the chip goroutine of another context (from a
// wake-up, Sink or Releaser) likewise leaves out a goroutine whose Close's work waits (from its
// start) for that chip goroutine's end, and a Close from a Sink or Releaser of another context
// run on a caller's goroutine (a manual chip's Process, a release pass of BufferAlloc,
// ReleaseUpdate or Disable), with that context's locks held, leaves out a goroutine doing that
// context's Close work, which waits for those locks (say a wake-up of the context being closed
// whose Close of the other does its work); of two such callbacks (Releasers or Sinks of two
// contexts, each run with its context's locks held) that Close each other's context at once,
// each Close's work would wait for the other's locks: the one that starts its work second
// returns ErrInvalid and changes nothing. Such a wait cannot be left out: a Close on a chip
// goroutine whose work would wait for the end of a chip goroutine that waits, through such
// waits alone, for its own (two chip goroutines' wake-ups, Sinks or Releasers each Closing the
// other's context) returns ErrInvalid and changes nothing, as on the context's own chip
// goroutine; the Close whose work started first goes on once that callback has returned and
// its goroutine has ended. Close tells goroutines apart by goid.Self: on builds without getg
// (purego, 386, ...) that is a runtime.Stack read, microseconds, per Close and per release pass
// on a caller's goroutine that wakes a waiter (the chip goroutine's passes need none: Close
// waits for its end); such builds do not record the goroutine that runs a Releaser or Sink with
// its context's locks held (it would cost that read, and an allocation, per pass on the packet
// path), so there the three cases above of a Close from such a callback (the cycle through a
// Close's work that waits for those locks, the refusal of a Close of the callback's own context,
// and the refusal of the second of two such callbacks' Closes of each other's context) are not
// seen: the Close waits for ever, as a Close of the context from the callback itself would.
//
// After Close: BufferAlloc, BufferAllocWait, SendWait, Enable and InjectHalt return ErrClosed;
// Restart returns ErrInvalid (sc_restart's -EINVAL: a context being freed is never restarted);
// Close returns nil; SetThreshold and SetFaults check and store their argument as before (nil,
// or ErrInvalid for a bad one), to no effect; Process consumes nothing; Stop, Disable,
// ReturnCredits and ReleaseUpdate change nothing that matters; QueueWait returns false (retry:
// the retried allocation gets ErrClosed) and parks nothing, since nothing would wake it, as
// sdma's IOWait refuses a park on a closed device; the accessors report the closed context
// (Enabled false).
func (sc *SendContext) Close() error {
	if sc.quit != nil && sc.onChip() {
		return errf("Close", ErrInvalid, "called on send context "+itoa(sc.index)+"'s chip goroutine (from a wake-up, Sink or Releaser): it would wait for itself"+refusedInCallback)
	}
	self := goid.Self()
	if sc.relG.Load() == self || sc.hwG.Load() == self {
		return errf("Close", ErrInvalid, "called from a Releaser or Sink of send context "+itoa(sc.index)+" that this goroutine runs with the context's locks held (through another context's Close, say): it would wait for itself"+refusedInCallback)
	}
	wait, err := sc.closeWork(self)
	if wait {
		sc.waitWakers(self)
	}
	return err
}

// doClose is Close's work, on the goroutine which closeWork made closingG; it clears closingG
// (and takes sc out of closers.working) when it ends, also on a Goexit in a callback its Disable
// runs, and sets closed when it is done.
func (sc *SendContext) doClose() {
	done := false
	defer func() {
		closers.mu.Lock()
		sc.closed = done
		sc.closingG = 0
		if i := slices.Index(closers.working, sc); i >= 0 {
			closers.working = slices.Delete(closers.working, i, i+1)
		}
		if i := slices.Index(closers.closing, sc); i >= 0 {
			closers.closing = slices.Delete(closers.closing, i, i+1)
		}
		closers.cond.Broadcast()
		closers.mu.Unlock()
	}()
	sc.allocMu.Lock()
	sc.flags.Store(sc.flags.Load()&^scfEnabled | scfInFree)
	sc.allocMu.Unlock()
	sc.Disable()
	if sc.quit != nil {
		close(sc.quit)
		<-sc.done // an edge of the Closes' graph since closeWork (closers.working)
	}
	done = true
}

// chipSpin is how many idle checks the chip goroutine makes before it parks: a packet that
// arrives meanwhile costs no doorbell (a channel send and a goroutine wake-up).
const chipSpin = 256

// run is the chip goroutine: it consumes packets as they are written, spins a little when idle,
// and parks on the doorbell until Close. A Sink or Releaser that ends it with runtime.Goexit
// leaves it to runDone.
func (sc *SendContext) run() {
	sc.chipG.Store(goid.Self())
	returned := false
	defer sc.runDone(&returned)
	for {
		sc.process(true)
		if sc.idle() {
			returned = true
			return
		}
	}
}

// runDone is run's deferred handler: it closes done, and if run did not return, a Goexit in a
// Sink, Releaser or Waiter's wake-up is ending the chip goroutine (a panic there was recovered by
// its helper; one of the library's own goes on to end the program). A Sink's or Releaser's handler
// released the locks, halted the context and marked the goroutine gone, all at once (goexitHalt),
// and so did a wake-up's (callWakeup), so Enable and Restart have refused since. runDone marks
// the goroutine gone again and halts the context should it be enabled: it is not, unless a
// Goexit came from elsewhere on the goroutine.
func (sc *SendContext) runDone(returned *bool) {
	defer func() {
		sc.chipG.Store(0) // the goroutine ends: its g may be another's next (goid.Self)
		close(sc.done)
	}()
	if *returned {
		return
	}
	if p := recover(); p != nil {
		panic(p)
	}
	if h := testRunDone.Load(); h != nil {
		(*h)(sc)
	}
	sc.gone.Store(true)
	sc.allocMu.Lock()
	again := sc.flags.Load()&scfEnabled != 0
	sc.allocMu.Unlock()
	if again {
		sc.goexitHalt("code on the chip goroutine (a Sink, Releaser or Waiter's wake-up)", false, false)
	}
}

// idle waits for work: a short spin, then the doorbell. It reports whether Close asked the
// goroutine to stop.
func (sc *SendContext) idle() bool {
	for i := range chipSpin {
		if sc.hasWork() {
			return false
		}
		if i%32 == 31 {
			runtime.Gosched()
		}
	}
	sc.parked.Store(true)
	if sc.hasWork() { // a producer that saw parked == false published before this check
		sc.parked.Store(false)
		return false
	}
	select {
	case <-sc.bell:
	case <-sc.quit:
		return true
	}
	sc.parked.Store(false)
	return false
}

// hasWork reports whether the chip has a written packet or a forced return to handle.
func (sc *SendContext) hasWork() bool {
	if sc.chipOff.Load() {
		return false
	}
	if sc.force.Load() {
		return true
	}
	i := sc.chipAt.Load()
	return i != sc.srHead.Load() && sc.sr[i].state.Load() == bufWritten
}

// Process runs the chip model once: it consumes every fully written packet in order, hands each
// to the sink, writes the free counter back when the threshold, the PBC, a waiting producer or a
// forced return asks, and then runs the release pass (the credit-return interrupt). A halt it
// detects (or injects) stops allocations and restarts the context before Process returns; like
// Restart, the restart waits for every allocated buffer's copy to end, so a caller holding an
// unfinished buffer of this context must not call Process (a halt would wait for it forever). It
// returns the packets consumed. With Config.Manual it is the only way packets move; otherwise the
// chip goroutine calls it, and calling it too is harmless under the same condition.
func (sc *SendContext) Process() int { return sc.process(false) }

// process is Process; chip: it runs on the chip goroutine (run).
func (sc *SendContext) process(chip bool) int {
	var g uint64 // a caller's goroutine, recorded while it runs the callbacks (relG, hwG)
	if goid.HaveG && !chip {
		g = goid.Self() // one read here, where little is live, not one per callback
	}
	sc.hwMu.Lock()
	n, h, wb := sc.consumeRec(g)
	if g != 0 && (n != 0 || h != nil) { // consumeRec recorded g (hwG) at the first packet
		sc.hwG.Store(0)
	}
	sc.hwMu.Unlock()
	if wb {
		sc.releaseUpdate(chip, g)
	}
	if h != nil {
		sc.halted(h)
	}
	return n
}

// consume is the chip: hwMu held. It records no hwG (tests that drive the chip by hand).
func (sc *SendContext) consume() (n int, h *HaltError, wb bool) { return sc.consumeRec(0) }

// consumeRec is consume; g, unless 0, is recorded as hwG before the first packet taken up (the
// caller's goroutine, which runs the Sink; also with no Sink, where no Close can come from the
// pass, so the record changes nothing), that is where it returns n != 0 or a halt; the caller
// clears it before hwMu goes.
func (sc *SendContext) consumeRec(g uint64) (n int, h *HaltError, wb bool) {
	if sc.hwHalted || sc.hwStopped {
		return 0, nil, false
	}
	head := sc.srHead.Load()
	for sc.chipIdx != head {
		b := &sc.sr[sc.chipIdx]
		if b.state.Load() != bufWritten { // not yet fully written: the chip waits, in order
			break
		}
		if g != 0 {
			sc.hwG.Store(g) // see relG
			g = 0
		}
		if h = sc.check(b); h != nil {
			sc.hwHalted = true
			sc.chipOff.Store(true)
			return n, h, wb
		}
		sc.chipFree += uint64(b.blocks)
		n++
		b.state.Store(bufFree)
		sc.chipIdx++
		if sc.chipIdx >= sc.srSize {
			sc.chipIdx = 0
		}
		sc.chipAt.Store(sc.chipIdx)
		var why uint64
		if PBC(le64(sc.buf[b.start:]))&PBCCreditReturn != 0 {
			why |= crDueToPBC
		}
		if sc.chipFree-sc.returned >= sc.threshold.Load() {
			why |= crDueToThreshold
		}
		if why != 0 || sc.waitCount.Load() != 0 {
			sc.writeBack(why)
			wb = true
		}
	}
	if sc.force.Swap(false) {
		sc.writeBack(crDueToForce)
		wb = true
	}
	return n, nil, wb
}

// check validates the packet's PBC and sends it (hwMu held); it returns a halt instead when the
// fault plan or the PBC says so.
func (sc *SendContext) check(b *Buf) *HaltError {
	n := sc.faultCount // packets taken up before this one over the life: HaltError.Packet
	sc.faultCount++    // counts attempts, so a halted packet is not numbered again after the restart
	if sc.faults.haltNow(sc.faultCount) {
		return &HaltError{Context: sc.index, Cause: CauseInjected, Packet: n}
	}
	pbc := PBC(le64(sc.buf[b.start:]))
	dw := pbc.LengthDWs()
	if dw < 2 {
		return &HaltError{Context: sc.index, Cause: CauseBadPBC, Packet: n, Detail: "PBC length " + itoa(dw) + " dwords"}
	}
	if dwordsToBlocks(dw) != int(b.blocks) {
		return &HaltError{Context: sc.index, Cause: CausePBCLength, Packet: n, Detail: "PBC length " + itoa(dw) + " dwords in " + itoa(int(b.blocks)) + " blocks"}
	}
	// The copy pads only the block it ends in (pio_copy, seg_pio_copy_end: "fill in rest of
	// block"), so a copy shorter than the allocation leaves whole blocks unwritten; the chip,
	// which sends the blocks the PBC counts, would take them from an earlier packet.
	if w := b.qwWritten / blockQWs; w != b.blocks {
		return &HaltError{Context: sc.index, Cause: CausePBCLength, Packet: n, Detail: "PBC length " + itoa(dw) + " dwords but " + itoa(int(w)) + " of " + itoa(int(b.blocks)) + " blocks written"}
	}
	nb := dw*4 - pbcBytes
	off := int(b.start) + pbcBytes // the PBC is in the first block: no wrap before the data
	segs := &sc.segs
	ss := segs[:1]
	if off+nb <= sc.size {
		segs[0] = sc.buf[off : off+nb]
	} else {
		segs[0] = sc.buf[off:sc.size]
		segs[1] = sc.buf[:nb-(sc.size-off)]
		ss = segs[:2]
	}
	sc.stats.packets.Add(1)
	sc.stats.blocks.Add(uint64(b.blocks))
	sc.stats.bytes.Add(uint64(nb))
	sc.deliver(ss)
	segs[0], segs[1] = nil, nil
	return nil
}

func (sc *SendContext) deliver(segs [][]byte) {
	if sc.sink == nil {
		return
	}
	returned := false
	defer func() {
		if !returned {
			if p := recover(); p != nil {
				sc.stats.sinkErrors.Add(1)
			} else {
				sc.sinkExited()
			}
		}
	}()
	err := sc.sink.Deliver(sc.index, segs)
	returned = true
	if err != nil {
		sc.stats.sinkErrors.Add(1)
	}
}

// sinkExited is deliver's handler of a Goexit in the Sink (hwMu held, and allocMu in Disable):
// the chip halts on the packet being delivered, before hwMu goes, so that no other pass delivers
// it again; it stays in the shadow ring for the next flush (PRCSCDisable). Then goexitHalt.
func (sc *SendContext) sinkExited() {
	sc.segs[0], sc.segs[1] = nil, nil
	sc.hwHalted = true
	sc.chipOff.Store(true)
	alloc := sc.inDisable
	sc.inDisable = false
	sc.clearHwG()
	sc.hwMu.Unlock()
	sc.goexitHalt("the Sink's Deliver", alloc, true)
}

// releaseExited is callRelease's handler of a Goexit in a Releaser (releaseMu held, and allocMu
// when alloc): the pass's tail and free are left as they were (the next pass walks the same
// slots again; the exited callback's slot was cleared before the call, so it runs once). Then
// goexitHalt.
func (sc *SendContext) releaseExited(alloc bool) {
	sc.clearRelG()
	sc.releaseMu.Unlock()
	sc.goexitHalt("a Releaser's Released", alloc, false)
}

// goneErr is Enable's and Restart's answer once a Goexit ended the chip goroutine: the recorded
// halt (CauseGoexit), or, should there be none, ErrNotRunning.
func (sc *SendContext) goneErr(op string) error {
	if h := sc.lastHalt.Load(); h != nil {
		return h
	}
	return errf(op, ErrNotRunning, "send context "+itoa(sc.index)+"'s chip goroutine ended in a runtime.Goexit")
}

// goexitHalt halts the context on a Goexit in what, with hwMu and releaseMu not held and allocMu
// held if alloc (released here): allocations stop (scfHalted, not restarted: the goroutine is
// ending), the chip stops, the halt is recorded (CauseGoexit; sink: the packet being delivered
// is the halted one) and every waiter is woken. It runs on the exiting goroutine, in its deferred
// calls. On the chip goroutine (chipG) it also marks the goroutine gone, under allocMu with the
// halt, after the halt's record: a Restart or Enable from then on refuses with it (goneErr), also
// before run's deferred handler has run, where one would have enabled the context again with
// nothing left to consume its packets (runDone then halted it once more).
func (sc *SendContext) goexitHalt(what string, alloc, sink bool) {
	if !alloc {
		sc.allocMu.Lock()
	}
	chip := sc.onChip()
	sc.flags.Store(sc.flags.Load()&^scfEnabled | scfHalted)
	sc.hwMu.Lock()
	sc.hwHalted = true
	sc.chipOff.Store(true)
	n := sc.faultCount
	if sink {
		n--
	}
	sc.hwMu.Unlock()
	detail := what + " called runtime.Goexit: the context stays halted until Restart or Close"
	if chip {
		detail = what + " called runtime.Goexit on the chip goroutine, which is ending: the context stays halted until Close (Restart and Enable refuse)"
	}
	sc.lastHalt.Store(&HaltError{Context: sc.index, Cause: CauseGoexit, Packet: n, Detail: detail})
	if chip {
		sc.gone.Store(true) // after lastHalt: a Restart that sees gone answers with this halt
	}
	sc.stats.halts.Add(1)
	sc.allocMu.Unlock()
	sc.wakeAll()
}

// onChip reports whether the caller runs on the chip goroutine (chipG), by goid.Self: one load
// where the build has getg, else a goroutine id from runtime.Stack (microseconds); only for a
// Goexit's handler and Close, never per packet.
func (sc *SendContext) onChip() bool {
	g := sc.chipG.Load()
	return g != 0 && g == goid.Self()
}

// writeBack writes the credit return word (hwMu held): the free counter modulo 2048 and why.
func (sc *SendContext) writeBack(why uint64) {
	sc.hwFree.Store(sc.chipFree&crCounterMask | why)
	sc.returned = sc.chipFree
	sc.stats.creditReturns.Add(1)
}

// halted is the software reaction to a halt (the error interrupt's sc_stop(sc, SCF_HALTED) and
// the halt_work's sc_restart), run by whoever drove the chip into it.
func (sc *SendContext) halted(h *HaltError) {
	sc.lastHalt.Store(h)
	sc.stats.halts.Add(1)
	sc.stop(scfHalted)
	_ = sc.Restart() // ErrInvalid only when Close got there first: then Close flushes
}

// InjectHalt halts the context now, as a send context error would: allocations stop, the
// pending packets are released with PRCSCDisable and the context is restarted before it
// returns. A context that is not enabled (stopped, disabled, halted) gives ErrNotRunning and is
// left as it is, a closed one ErrClosed. Like Restart, it waits for every allocated buffer's copy
// to end: the caller must not hold an unfinished buffer of this context (it would wait for
// itself forever).
func (sc *SendContext) InjectHalt() error {
	if f := sc.flags.Load(); f&scfEnabled == 0 {
		if f&scfInFree != 0 {
			return ErrClosed
		}
		return ErrNotRunning
	}
	sc.hwMu.Lock()
	if sc.hwHalted || sc.hwStopped {
		sc.hwMu.Unlock()
		return ErrNotRunning
	}
	sc.hwHalted = true
	sc.chipOff.Store(true)
	h := &HaltError{Context: sc.index, Cause: CauseInjected, Packet: sc.faultCount, Detail: "InjectHalt"}
	sc.hwMu.Unlock()
	sc.halted(h)
	return nil
}

// SetFaults replaces the fault plan; HaltRate's draws start again from its Seed. A HaltRate
// outside 0..1 is ErrInvalid (so is one in Config.Faults, from New).
func (sc *SendContext) SetFaults(p FaultPlan) error {
	if err := p.check(); err != nil {
		return err
	}
	sc.hwMu.Lock()
	sc.faults = newFaultState(p, sc.index)
	sc.hwMu.Unlock()
	return nil
}

// SendWait allocates a buffer for the packet made of segs (concatenated; a PBC of CreatePBC(flags,
// 0, vl, length) is put in front), waiting on ctx while the context has no credits, copies it and
// hands it to the chip. rel is told when its credits come back. It drives a manual chip itself
// while it waits (Process: the caller must then hold no unfinished buffer of the context, see
// BufferAllocWait). It returns ctx's error if ctx ends first (nothing was allocated),
// ErrNotRunning if the context is halted or disabled, ErrClosed after Close; a nil ctx is
// ErrInvalid (nothing allocated).
func (sc *SendContext) SendWait(ctx context.Context, flags PBC, vl uint8, segs [][]byte, rel Releaser) error {
	if ctx == nil {
		return errNilContext("SendWait")
	}
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	dw := 2 + (n+3)/4
	b, err := sc.BufferAllocWait(ctx, dw, rel)
	if err != nil {
		return err
	}
	return b.CopySegs(CreatePBC(flags, 0, vl, uint32(dw)), segs)
}

// BufferAllocWait is BufferAlloc that waits on ctx while there are no credits: it parks on the
// context's wait list (QueueWait) and is woken by a release pass; with a manual chip it drives
// the chip itself (Process), so its caller must hold no unfinished buffer of the context: a halt
// met there restarts the context, which waits for every copy to end. A nil ctx is ErrInvalid
// (nothing allocated).
func (sc *SendContext) BufferAllocWait(ctx context.Context, dwLen int, rel Releaser) (*Buf, error) {
	if ctx == nil {
		return nil, errNilContext("BufferAllocWait")
	}
	var w *Waiter
	for {
		seq := sc.ReleaseSeq()
		b, err := sc.BufferAlloc(dwLen, rel)
		if err != ErrNoCredits {
			return b, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if sc.manual {
			if sc.Process() == 0 {
				sc.ReturnCredits()
				sc.Process()
				runtime.Gosched()
			}
			continue
		}
		if w == nil {
			w = newChanWaiter()
		}
		if !sc.QueueWait(w, seq) {
			continue
		}
		select {
		case <-w.ch:
		case <-ctx.Done():
			sc.CancelWait(w)
			return nil, ctx.Err()
		}
	}
}

// testRunDone, if set (by in-package tests), is called by runDone on the chip goroutine after a
// Goexit, before it marks the goroutine gone: a test's window between the Goexit's halt and the
// goroutine's end.
var testRunDone atomic.Pointer[func(*SendContext)]

// testRestartChecked, if set (by in-package tests), is called by Restart after its checks,
// before it disables the context: a test's window for a Close that comes in between.
var testRestartChecked atomic.Pointer[func(*SendContext)]

// callerG is the calling goroutine (goid.Self) for relG and hwG: 0 on the chip goroutine
// (closers.working covers it) and where the build has no getg (see relG).
func (sc *SendContext) callerG() uint64 {
	if !goid.HaveG {
		return 0
	}
	g := goid.Self()
	if g == sc.chipG.Load() {
		return 0
	}
	return g
}

// clearRelG ends relG's record before releaseMu goes (releaseMu held).
func (sc *SendContext) clearRelG() {
	if sc.relG.Load() != 0 {
		sc.relG.Store(0)
	}
}

// clearHwG ends hwG's record before hwMu goes (hwMu held).
func (sc *SendContext) clearHwG() {
	if sc.hwG.Load() != 0 {
		sc.hwG.Store(0)
	}
}
