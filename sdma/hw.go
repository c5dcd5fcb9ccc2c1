package sdma

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/gosdma/gosdma/sdma/internal/sm"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/prefetch"
	"github.com/gosdma/gosdma/internal/relaxed"
)

// The hardware model.
//
// Per engine, one consumer of the ring behaves as the chip's SDMA engine: it reads the published
// descriptors [head, tail), checks each one as the chip would (the slot's generation, FIRST
// opening and LAST closing a packet, at most 64 descriptors and 16384 bytes a packet, a whole
// number of dwords, a defined AHG mode), reads memory only through the mapper's Translate (or its
// TranslateSole, which answers the same, with the handle the txreq recorded: hw_hint.go), applies
// AHG, hands each whole packet to the Sink as segments that alias the mapped memory (no copy),
// advances its head, writes the head back to the ring (ring.StoreHWHead, the chip's head_dma) when
// a descriptor asks with HEAD_TO_HOST or when it raises an interrupt, and raises an interrupt on
// INT_REQ, DescIntr descriptors after its last interrupt (hfi1: sdma_set_desc_cnt, which the
// interrupt handler calls on every interrupt; before the first interrupt the count register holds
// init_sdma_regs's 0, and raises none), and when it goes idle.
//
// A BatchSink holds packets (deferred head write-back): the model queues each packet it gathers
// and goes on reading; the packets' HEAD_TO_HOST, INT_REQ and count interrupts wait until the sink
// has flushed them, and only then does the head move past them, so completion (which unmaps)
// never passes a packet the sink may still read. The batch is flushed when it is full (the sink's
// BatchLimit in packets or bytes), at the end of every pass (nothing more to read: the ring went
// idle, or the pass was stopped), and before a halt; it never outlives the pass.
//
// An interrupt runs the completion pass at once in CompleteInterrupt mode (the kernel's
// sdma_engine_interrupt) and is only counted in CompletePoll mode.
//
// A descriptor the chip would reject halts the engine: the cause is recorded (HaltError), the
// packets before it complete with StatusOK, everything after it in the ring and the flush list
// completes with StatusAborted, every parked waiter is woken (the sw clean), and the engine
// restarts with its ring at index 0 (see recover.go).
//
// AHG. An engine has 32 AHG entries of up to 64 bytes. A packet whose first descriptor has mode
// COPY stores the bytes of that first descriptor (its header fragment; at most 64 bytes) in the
// entry its INDEX names, and is sent as it is. A packet with mode APPLY_UPDATE1..3 has a
// zero-length first descriptor: the model copies HeaderDWs*4 bytes of the entry (HeaderDWs 0
// means 16 dwords, the whole 64-byte entry) into a per-engine
// scratch buffer, applies the update words (word 0 from the first descriptor's qw1 63:32, words
// 1..8 from the edit descriptors, qw0 low, qw0 high, qw1 low, qw1 high; a word without the enable
// bit is skipped; each replaces Bits bits at StartBit of little-endian header dword DWIndex with
// the low bits of its value), and sends the result as the packet's first segment. The stored
// entry is not changed. An empty entry, a header longer than the entry, or an update outside the
// header halts the engine (CauseHeaderLength, CauseHeaderAddress); a mode above APPLY_UPDATE3
// halts it with CauseHeaderSelect.

// hwState is the chip's internal state. Guarded by Engine.hwMu. The fields a pass and a packet
// touch come first, in the order that packs them with hwMu into the engine's hardware group (see
// Engine): the pass's words, then the fault plan, whose first word (active) is read per packet,
// then the segments, of which a packet uses the first one to three.
type hwState struct {
	// head is the chip's head: the next descriptor to read (>= ring.HWHead()). Written by hwMu's
	// holder (each packet's a store-release, relaxed.StoreRelease64's spelled out in process: the
	// plain MOV of a plain store on amd64); read under hwMu (plainly: hwHead), and by
	// ProgressSchedule (an atomic load, no lock), which records where the chip was when it forced
	// the progress interrupt (Engine.progressAt).
	head atomic.Uint64
	// waitTail is the tail the last pass stopped at: until the ring's tail moves past it (or a
	// flush, a stop or a state change comes), another pass can do nothing. The hardware
	// goroutine parks on it. ^0 means "look again at once" (after a halt restarted the ring).
	waitTail  uint64
	sinceIntr int // descriptors since the last interrupt (of any kind: each reloads the count)
	// passes counts hardware passes (process calls); tests read it to prove that an idle
	// engine parks instead of spinning.
	passes uint64
	// completed is the chip's head as of the last completion pass that an interrupt of the
	// current pass ran to its end (CompleteInterrupt mode), valid while intrPass: that pass
	// completed every txreq before it, callbacks included. An idle interrupt at that same head
	// finds nothing to do (see interrupt). intrPass is cleared at the start of every pass.
	completed uint64
	idle      bool // the idle interrupt for the current idle period was raised
	// headToHost: a packet of this pass asked for a HEAD_TO_HOST write-back that is not done
	// yet (finished); the pass does it at its end (writeBackHead clears it).
	headToHost bool
	intrPass   bool
	// countArmed: the count interrupt's register (SendDmaDescCnt) holds DescIntr. hfi1's
	// init_sdma_regs writes 0 to it, and a count of 0 raises no interrupt; the interrupt
	// handler's sdma_set_desc_cnt loads sdma_desct_intr, and nothing writes 0 again (a restart,
	// sdma_hw_start_up, leaves it). Set by the first interrupt (reloadCount).
	countArmed bool
	faults     faultState // the fault plan (setFaults)
	// segs holds the packet being delivered, a packet's most segments: an array, so that a
	// packet's slices of it need no bounds check and no load of a slice header.
	segs  [desc.MaxDesc + 1][]byte
	batch batchState
	ahg   [desc.NumAHGEntries]ahgEntry
	hdr   [ahgEntryBytes]byte // scratch header of an APPLY_UPDATE packet
	// exit is what a runtime.Goexit in a Sink or callback left held and to do, recorded by the
	// handler that saw it for the release (goexit.go); zero otherwise.
	exit hwExit
}

// ahgEntry is one AHG header entry: n bytes of b are valid; n == 0 means never written.
type ahgEntry struct {
	n int
	b [ahgEntryBytes]byte
}

// batchState is the batch a BatchSink holds (see BatchSink). Guarded by hwMu; empty whenever
// hwMu is free.
type batchState struct {
	sink     BatchSink // nil: the sink does not batch, packets go to Deliver
	maxPkts  int       // flush when held reaches it (2..MaxBatch)
	maxBytes int       // flush when bytes reaches it; 0: no byte bound
	held     int       // packets in the batch: queued, or failed by Queue behind queued ones
	queued   int       // packets the sink holds: the length of the next Flush's errs
	bytes    int       // payload bytes of the held packets
	// flags is the OR of the held packets' HEAD_TO_HOST and INT_REQ (a count interrupt
	// counts as INT_REQ): the write-back and interrupt they asked for, raised at the flush.
	flags uint64
	errs  []error // Flush's report; cap maxPkts, all nil between flushes
	// hdrs holds the APPLY_UPDATE headers of the held packets, ahgEntryBytes per batch slot (a
	// held packet's header must outlive the next packet's).
	hdrs []byte
}

// init readies the hardware state of an engine delivering to sink, whose BatchLimit (if it is a
// BatchSink) is lim (batchLimit's answer, read once by NewDevice).
func (h *hwState) init(sink Sink, lim [2]int) {
	h.idle = true
	bs, ok := sink.(BatchSink)
	if !ok {
		return
	}
	pkts, bytes := lim[0], lim[1]
	if pkts < 2 {
		return
	}
	b := &h.batch
	b.sink = bs
	b.maxPkts = min(pkts, MaxBatch)
	b.maxBytes = max(bytes, 0)
	b.errs = make([]error, b.maxPkts)
	b.hdrs = make([]byte, b.maxPkts*ahgEntryBytes)
}

// batchLimit reads a BatchSink's BatchLimit once, for NewDevice: a panic (a sink's bug) is an
// error naming it, not a panic of NewDevice.
func batchLimit(bs BatchSink) (lim [2]int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = configErr("Sink", bs, "BatchLimit panicked: "+fmt.Sprint(p))
		}
	}()
	lim[0], lim[1] = bs.BatchLimit()
	return lim, nil
}

// sinkValidator is a Sink that can check its own settings (Config.Sink; sdmatest.FaultSink).
type sinkValidator interface{ Validate() error }

// validateSink runs a sink's Validate once, for NewDevice: its error as it is if it is a
// *ConfigError, else as one for Sink; a panic (a sink's bug) is an error naming it, as
// batchLimit's.
func validateSink(v sinkValidator) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = configErr("Sink", fmt.Sprintf("%T", v), "Validate panicked: "+fmt.Sprint(p))
		}
	}()
	if err = v.Validate(); err == nil {
		return nil
	}
	if ce := (*ConfigError)(nil); errors.As(err, &ce) {
		return err
	}
	return configErr("Sink", fmt.Sprintf("%T", v), "Validate: "+err.Error())
}

// Process runs one pass of the hardware model on the caller's goroutine: it runs a pending flush,
// then processes every packet published when it starts (at most a ring's worth), raising the
// interrupts they ask for, and returns the number of packets delivered. If the engine halts
// during the pass, the error is the *HaltError (matching ErrHalted): by then the engine has
// recovered (the ring's remainder completed aborted, the ring restarted) and the next Process
// goes on. An engine that is not in s99 returns an error matching ErrNotRunning, a closed device
// ErrClosed. Process is how a Manual engine is driven; it is safe to call concurrently with
// anything (one hardware pass runs at a time), but not from a txreq callback, a wakeup or a Sink.
func (e *Engine) Process() (int, error) {
	n, _, err := e.process(!e.manual)
	return n, err
}

// processDirect is Process of an engine with a goroutine (process with direct set): the caller
// is registered as a host (hostProcess, host.go) while the pass runs, so that a Sink or callback
// of the pass that calls Close, Shutdown or an event is refused and a callback's runtime.Goexit
// has the pass's locks released (callerExited). The engine's own goroutine runs process with
// direct clear.
func (e *Engine) processDirect() (int, uint64, error) {
	defer e.hosts.remove(e.hosts.add(hostProcess))
	return e.process(false)
}

// process is Process: it takes hwMu, runs the pass, and releases hwMu (passDone) before it returns
// the packets delivered, the tail the pass stopped at (hwState.waitTail, for run) and the error.
// The lock is taken here rather than in Process so that Process inlines: the pass is one call.
// direct: Process of an engine with a goroutine, which registers its caller first (processDirect;
// a flag rather than a branch in Process, whose second call would keep it from inlining).
func (e *Engine) process(direct bool) (int, uint64, error) {
	if direct {
		return e.processDirect()
	}
	e.hwMu.Lock()
	e.hw.passes++
	e.hw.intrPass = false
	if p := e.pending.Load(); p != 0 {
		e.runPending(p) // a new fault plan, the flush worker: one load and branch for both
	}
	r := e.ring
	// The chip consumes only while running (else ErrNotRunning; ErrClosed once the device is
	// closing): the gate's running bit, not the state machine's state, whose line the pass would
	// read for this alone. Under hwMu the two agree: the state machine changes both with hwMu
	// held (apply clears the bit in the step that leaves s99 and sets it before it releases hwMu
	// after the step that enters s99; exitHalt clears it with its step), which
	// TestProcessGateIsState checks.
	if g := e.gate.Load(); g&(gateDown|gateRunning) != gateRunning {
		return e.passRefused(g)
	}
	head := *(*uint64)(unsafe.Pointer(&e.hw.head)) // hwHead, spelled out: no inline-mark NOP
	tail := r.Tail()
	e.hw.waitTail = ^uint64(0)
	limit := head + uint64(r.Size())
	pkts := 0
	if head != tail {
		e.touchTx(tail - 1)
	}
	// The loop's tests are at its end, where a pass of one packet leaves at the first (the tail
	// not moved): head != tail and head != limit hold at its start (limit is a ring's size on).
	for run := head != tail && !e.stopping.Load(); run; run = head != limit && !e.stopping.Load() {
		if e.hw.faults.active {
			if h := e.plannedHalt(); h != nil {
				e.halt(h)
				return e.passDone(pkts, h)
			}
		}
		if tail-head > touchAhead {
			e.warmTx(head + touchAhead) // the txreq of a packet further on: see touchAhead
		}
		n, flags, segs, h := e.packet(head, tail)
		if h != nil {
			e.halt(h)
			return e.passDone(pkts, h)
		}
		if n == 0 {
			// The packet's end is not published yet: wait for it, as the chip does. Nothing
			// changes until the tail moves, so the goroutine may park on this tail.
			e.hw.waitTail = tail
			break
		}
		e.deliver(segs, head+n)
		pkts++
		head += n
		// The head's store-release (ProgressSchedule loads it without hwMu: progressAt), as
		// relaxed.StoreRelease64 does it, spelled out: the inlined call left two inline-mark
		// NOPs in the loop. A plain store where that is a store-release (relaxed.Plain: amd64
		// outside -race and purego), the atomic store elsewhere.
		if relaxed.Plain {
			*(*uint64)(unsafe.Pointer(&e.hw.head)) = head
		} else {
			e.hw.head.Store(head)
		}
		e.hw.idle = false
		if e.hw.faults.active {
			e.hw.faults.seen += n // toward the plan's halt (plannedHalt reads it only while one is active)
		}
		flags |= e.countDescs(n)
		if e.batching && e.hw.batch.held > 0 {
			e.heldPacket(flags) // the sink still holds the packet: its write-back waits for Flush
		} else {
			e.finished(flags)
		}
		if head == tail {
			if tail = r.Tail(); head == tail {
				break
			}
			e.touchTx(tail - 1)
		}
	}
	if e.batching && e.hw.batch.held > 0 {
		e.flushBatch() // nothing more to read this pass: send what the sink holds
	}
	if head == tail {
		e.hw.waitTail = tail
	}
	if e.idleIntrDue(head, tail) {
		// The idle interrupt (idle_mask), interrupt's steps without its call (a Manual engine's
		// pass ends in this interrupt for every packet); its write-back does the pass's
		// HEAD_TO_HOST ones too.
		e.writeBackHead()
		e.hw.idle = true
		e.reloadCount() // every interrupt reloads the count (see interrupt)
		e.hwStats.interrupts.Add(1)
		if e.intrRunsPass() {
			// An interrupt's pass (intr), but on a Manual engine a plain one, in this frame
			// (hwMu is its head lock): the pass's last interrupt leaves nothing for a later
			// one to skip (intrPass, completed).
			e.progressPass(!e.manual)
		}
	} else if e.hw.headToHost {
		e.writeBackHead() // the pass's HEAD_TO_HOST write-backs, once
	}
	return e.passDone(pkts, nil)
}

// runPending does the work of the pending bits p at a pass's start: it takes a new fault plan
// (SetFaults) before anything is read and a ProgressSchedule's reload of the count, then runs the
// flush worker (sdma_field_flush), in any state. hwMu held.
func (e *Engine) runPending(p uint32) {
	if p&pendFaults != 0 {
		e.takeFaults()
	}
	if p&pendCount != 0 {
		e.takeCountReload()
	}
	if p&pendFlush != 0 {
		e.runFlushHW()
	}
}

// passRefused ends a pass that reads nothing: the gate g says the device is closing (ErrClosed)
// or the engine is not running (ErrNotRunning). A state change rings the doorbell (apply).
func (e *Engine) passRefused(g int32) (int, uint64, error) {
	e.hw.waitTail = e.ring.Tail()
	if g&gateDown != 0 {
		return e.passDone(0, ErrClosed)
	}
	return e.passDone(0, errProcessNotRunning)
}

// heldPacket records the interrupt flags of a packet that the BatchSink holds (its write-back
// waits for the flush) and flushes the batch once it is full. hwMu held.
func (e *Engine) heldPacket(flags uint64) {
	b := &e.hw.batch
	b.flags |= flags
	if b.held >= b.maxPkts || (b.maxBytes > 0 && b.bytes >= b.maxBytes) {
		e.flushBatch()
	}
}

// countDescs counts n descriptors read toward the count interrupt, due DescIntr descriptors after
// the last interrupt of any kind (each reloads the count: see interrupt), and returns the INT_REQ
// flag when it is due. (The pass counts them toward the fault plan's halt itself, while a plan is
// active: plannedHalt reads that count only then, and a new plan starts it at 0, so no store to
// the plan's words without one; here, it would keep countDescs from inlining.) hwMu held.
//
// At the end of a count window the interrupt is due if the register is armed (countArmed) and no
// ProgressSchedule reloaded the count during the window. A ProgressSchedule's reload (pendCount)
// is a register write the chip sees at once, while it reads on (hfi1: sdma_set_desc_cnt, a CSR
// write): the count restarts at the descriptor the chip had reached then (Engine.progressAt, the
// chip's head as ProgressSchedule read it). The model applies it at the next pass's start or at
// the end of the window it came in, whichever is first, counting the descriptors read since the
// reload (takeCountReload): so the window restarts without an interrupt and the next count
// interrupt comes DescIntr descriptors after the reload, where the chip's comes. The window's
// end is once per DescIntr descriptors: the pending word's load and the reload's arithmetic are
// off the per-packet path, which pays only the head's store-release (a plain MOV on amd64).
func (e *Engine) countDescs(n uint64) uint64 {
	if e.hw.sinceIntr += int(n); e.hw.sinceIntr >= e.descIntr {
		return e.countWindowEnd()
	}
	return 0
}

// countWindowEnd is countDescs at the end of a count window: a call once per DescIntr
// descriptors, so that countDescs stays small enough to inline into the pass. hwMu held.
func (e *Engine) countWindowEnd() uint64 {
	if e.pending.Load()&pendCount != 0 {
		e.takeCountReload()
		if e.hw.sinceIntr < e.descIntr {
			return 0 // the count the reload set runs on: DescIntr descriptors after it
		}
	}
	e.hw.sinceIntr = 0
	if e.hw.countArmed {
		return desc.IntReqFlag
	}
	return 0
}

// reloadCount is the interrupt handler's sdma_set_desc_cnt(sde, sdma_desct_intr): the next count
// interrupt comes DescIntr descriptors on. hwMu held.
func (e *Engine) reloadCount() {
	e.hw.sinceIntr = 0
	e.hw.countArmed = true
}

// hwHead is the chip's head (hwState.head) for hwMu's holder: a plain load, as the field's every
// writer holds hwMu (ProgressSchedule's atomic load is the one read without it). Every reader
// under hwMu uses it: under -race a plain load without hwMu is reported against the pass's
// atomic store, where an atomic load would hide it (and on arm64 it is no LDAR). The atomic
// load's intrinsic kept the compiler from folding the compare of intrRunsPass, once a pass, into
// one instruction. The atomic.Uint64 holds its value at offset 0 (internal/relaxed relies on it
// too). hwMu held.
func (e *Engine) hwHead() uint64 { return *(*uint64)(unsafe.Pointer(&e.hw.head)) }

// takeCountReload does the reload of a ProgressSchedule (pendCount, cleared first: a later
// ProgressSchedule's bit is not lost) where it took effect: the count armed, sinceIntr the
// descriptors read since the chip's head was at progressAt (read after the bit is cleared: a
// later ProgressSchedule's position is taken by the next window's end or pass, at worst once
// more, which counts from the same point). A position past the head (of the ring's numbering
// before a restart, or read by a ProgressSchedule that raced the restart) or at least sinceIntr
// back (read before this window's start, as the chip passed it) is taken as the window's start:
// the count then runs from there. At a pass's start sinceIntr stays below DescIntr; at a
// window's end, at DescIntr or more means the count the reload set ran out here (countWindowEnd).
// hwMu held.
func (e *Engine) takeCountReload() {
	e.pending.And(^pendCount)
	head, at := e.hwHead(), e.progressAt.Load()
	if since := head - at; at <= head && since < uint64(e.hw.sinceIntr) {
		e.hw.sinceIntr = int(since)
	}
	e.hw.countArmed = true
}

// dropCountReload takes a ProgressSchedule's reload at a ring's restart (the sw clean's reset,
// hwStartUp), which restarts the count at index 0 itself: the register armed, as the forced
// interrupt's handler left it, and no position of the old numbering left pending. hwMu held.
func (e *Engine) dropCountReload() {
	if e.pending.Load()&pendCount != 0 {
		e.pending.And(^pendCount)
		e.hw.countArmed = true
	}
}

// idleIntrDue reports whether a pass that stopped at head with the ring's tail at tail raises
// the idle interrupt: it caught up, and the engine was not idle already. hwMu held.
func (e *Engine) idleIntrDue(head, tail uint64) bool { return head == tail && !e.hw.idle }

// passDone ends process: it reads the tail the pass stopped at and releases hwMu.
func (e *Engine) passDone(n int, err error) (int, uint64, error) {
	waitTail := e.hw.waitTail
	e.hwMu.Unlock()
	return n, waitTail, err
}

// touchAhead is how far ahead of the packet it reads, in descriptors, a pass that is behind
// the tail prefetches a txreq (touchTx): the txreq whose last descriptor is touchAhead slots on,
// two packets ahead for packets of two descriptors. Each packet's processing reads its txreq
// (the mapping handles, packetTx) after the shadow-ring entry that names it, two dependent
// loads of lines the producer's core wrote; touched ahead, the txreq's line is on its way while
// the packets before it are processed. Measured on hw=goroutine, registered memory (2 vCPUs,
// quiet, 4 interleaved processes): 356 -> 300 ns/pkt at 5 slots, 321 at 3, 307 at 9.
const touchAhead = 5

// touchTx loads, as a prefetch, the shadow-ring entry of ring index last (the last descriptor
// published, last >= the chip's head) and the first word of its txreq, so that the transfers of
// their cache lines from the producer's core overlap the transfers of the descriptors' and the
// mapping table's lines that the packet's processing waits for, instead of following them in
// the completion pass. A packet that a busy-polling engine picks up alone (the latency case, or
// an engine that keeps up) is the one at last. hwMu held.
//
// Both loads are race-free (last is in [head, tail)): the producer wrote txRing[last] before
// its tail store-release, which the pass loaded (an entry that is not a packet's last
// descriptor's is nil, cleared by the completion pass before the producer reserved the slot);
// no completion pass writes it before the head passes last, and no producer before the
// completion pass frees its slot. The txreq is in flight, the engine's; its state is an atomic.
func (e *Engine) touchTx(last uint64) {
	if tx := e.txRing[last&e.mask]; tx != nil {
		_ = tx.state.Load()
	}
}

// warmTx is touchTx for the pass's loop, at the packet touchAhead slots ahead of the one it
// reads (still before the tail): it prefetches the txreq's first txLines cache lines for
// writing (internal/prefetch: PREFETCHW on amd64; touchTx's load where prefetch has no
// instruction). The completion pass writes the first (state, the cleaned fields, the
// allocator's link when the callback puts the txreq back) and reads the descriptors and their
// handles after, and a line only loaded would come shared and need a second transfer for those
// stores. Measured on BenchmarkPacketPath list+direct hw=goroutine (2 vCPUs, interleaved,
// medians of 5, with alloc's prefetch of the next free cell for writing): 3.39x inline
// without, 2.63x with; alone 4.66x (4.70x before both). The pass's first touch (touchTx, the
// one packet of a Manual engine's pass) stays a load: the call's spills cost the one-packet
// pass more than they save. hwMu held; race-free as touchTx's loads (a prefetch reads nothing
// into the program).
func (e *Engine) warmTx(last uint64) {
	if tx := e.txRing[last&e.mask]; tx != nil {
		if prefetch.Enabled {
			prefetch.WriteLines(unsafe.Pointer(tx), txLines)
		} else {
			_ = tx.state.Load()
		}
	}
}

// txLines is how many cache lines of a txreq warmTx prefetches: the completion group, the
// first descriptors and their Sole handles (TxReq's first 256 bytes; 3 lines measured 2.74x
// inline, 5 lines 2.66x, 4 lines 2.53-2.64x).
const txLines = 4

// finished raises the interrupt and the head write-back that the packets up to the chip's head
// asked for (flags: INT_REQ, HEAD_TO_HOST), now that the sink has finished with them. hwMu held.
//
// An interrupt is raised at once (it writes the head back too). A HEAD_TO_HOST write-back is
// coalesced: the pass writes the head back once, at its end (or with its next interrupt, or its
// halt), not once per packet, as a chip coalesces its head_dma writes. Nothing but the completion
// pass reads the written-back head, and a pass is bounded (a ring's worth), so this only batches
// the completions a caller's Poll would see in the middle of a pass.
func (e *Engine) finished(flags uint64) {
	if flags&desc.IntReqFlag != 0 {
		e.interrupt() // writes the head back too
	} else if flags&desc.HeadToHostFlag != 0 {
		e.hw.headToHost = true // HEAD_TO_HOST: written back by the pass's end
	}
}

// flushBatch has the BatchSink send the packets it holds, records the ones it failed, and then
// writes back the head and raises the interrupts the batch asked for. hwMu held; the batch is
// not empty.
func (e *Engine) flushBatch() {
	b := &e.hw.batch
	if b.queued > 0 {
		errs := b.errs[:b.queued]
		e.flushSink(b.sink, errs)
		for i, err := range errs {
			if err != nil {
				e.sinkFailed(err, nil)
				errs[i] = nil
			}
		}
	}
	e.stats.flushes.Add(1)
	flags := b.flags
	b.held, b.queued, b.bytes, b.flags = 0, 0, 0, 0
	e.finished(flags)
}

// flushSink calls the sink's Flush; a panic fails every packet of the batch, a runtime.Goexit
// drops it (sinkExited).
func (e *Engine) flushSink(s BatchSink, errs []error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if p := recover(); p != nil {
			err := &SinkError{Engine: e.idx, Panic: p}
			for i := range errs {
				errs[i] = err
			}
			return
		}
		e.sinkExited("Flush", e.hw.batch.held)
	}()
	s.Flush(e.idx, errs)
	returned = true
}

// interrupt is an SDMA interrupt: the head is written back, and the completion pass runs in
// CompleteInterrupt mode (hfi1: sdma_engine_interrupt). hwMu held.
//
// An interrupt raised at the head at which an earlier interrupt of the same pass ran its
// completion pass to the end (the idle interrupt after the INT_REQ of the pass's last packet,
// the latency case) is counted but runs no second pass: nothing has reached the head since, so
// the pass would walk nothing and free nothing, only take headMu and bump the seqcount. It is
// the chip's coalescing of interrupt causes: both status bits are seen by one run of
// sdma_engine_interrupt, which makes progress once.
//
// Every interrupt reloads the count interrupt's descriptor count: hfi1's sdma_engine_interrupt
// calls sdma_set_desc_cnt(sde, sdma_desct_intr) whatever the interrupt's source (INT_REQ, the
// count, idle, progress), so the next count interrupt comes DescIntr descriptors after this one.
// The progress interrupt is ProgressSchedule's, which does not hold hwMu: it counts itself
// (counters.forcedIntrs) and leaves its reload to the hardware pass (pendCount, countDescs).
//
// process's idle interrupt runs these steps inline: keep the two alike.
func (e *Engine) interrupt() {
	e.hwStats.interrupts.Add(1)
	e.reloadCount()
	e.writeBackHead()
	if e.intrRunsPass() {
		e.progressPass(true)
	}
}

// intrRunsPass reports whether an interrupt runs a completion pass: in CompleteInterrupt mode,
// unless an earlier interrupt of the same pass ran one to its end at the same head (see
// interrupt). hwMu held.
func (e *Engine) intrRunsPass() bool {
	return e.mode == CompleteInterrupt && (!e.hw.intrPass || e.hw.completed != e.hwHead())
}

// writeBackHead writes the chip's head back to the ring (head_dma) if it moved, which also
// does every HEAD_TO_HOST write-back due. hwMu held.
func (e *Engine) writeBackHead() {
	e.hw.headToHost = false
	if r, h := e.ring, e.hwHead(); r.HWHead() != h {
		r.StoreHWHead(h) // h is the chip's head: in [HWHead(), Tail()]
	}
}

// packet checks and gathers the packet that starts at ring index start, in three steps as the
// chip reads it: parseHead (the first descriptor and the AHG edit descriptors), gather (the data
// descriptors, through the mapper's Translate) and applyAHG (store or build the header), and
// counts it. It returns the number of descriptors the packet spans, the OR of its descriptors'
// qw1 interrupt flags and its segments (in hw.segs), for process to deliver (deliver); n == 0
// means the packet's LAST is not published yet. A non-nil *HaltError means the chip rejects it.
//
// The delivery is not packet's: the sink's call (and whatever it calls: the copy of a sink that
// copies) then runs below process's frame, not below packet's, which holds what the gathering
// keeps across its calls: a packet's stack reaches some 0x100 bytes (four cache lines) less deep.
func (e *Engine) packet(start, tail uint64) (n uint64, flags uint64, segs [][]byte, h *HaltError) {
	r := e.ring
	d0 := r.Slot(start)
	var total int
	switch {
	case !plainHead(d0, r.Generation(start)):
		return e.packetMulti(start, tail, d0)
	case d0.Last():
		// A packet of one descriptor (no AHG): gather's checks, without its call and its loop.
		// It cannot be too long (a descriptor's byte count is below maxPacketBytes) and has no
		// second descriptor to check.
		segs = e.hw.segs[:0] // cap MaxDesc+1: no append's growth check
		if total = d0.Len(); total > 0 {
			buf, err := e.dev.hints.TranslateSole(dma.Addr(d0.Addr()), total, dma.ToDevice, soleOf(e.packetTx(start), 0))
			if err != nil || len(buf) != total {
				return 0, 0, nil, e.readErr(start, d0, total, len(buf), err)
			}
			segs = e.hw.segs[:1]
			segs[0] = buf
		}
		n, flags = 1, d0.Qw1&(desc.HeadToHostFlag|desc.IntReqFlag)
	case start+1 != tail && plainPair(d0, r.Slot(start+1), r.Generation(start+1)):
		// A packet of two descriptors, both with bytes (a header and a payload, no AHG):
		// gather's checks and reads, without its call and its loop. plainPair checked what
		// gather checks of the second descriptor before it reads anything of it, so the reads
		// here fail as gather's would, in its order (the first descriptor's, then the
		// second's); any other packet takes gather (TestPacketTwoDescPath covers both).
		d1 := r.Slot(start + 1)
		l0, l1 := d0.Len(), d1.Len()
		tx := e.packetTx(start + 1)
		b0, err := e.dev.hints.TranslateSole(dma.Addr(d0.Addr()), l0, dma.ToDevice, soleOf(tx, 0))
		if err != nil || len(b0) != l0 {
			return 0, 0, nil, e.readErr(start, d0, l0, len(b0), err)
		}
		b1, err := e.dev.hints.TranslateSole(dma.Addr(d1.Addr()), l1, dma.ToDevice, soleOf(tx, 1))
		if err != nil || len(b1) != l1 {
			return 0, 0, nil, e.readErr(start+1, d1, l1, len(b1), err)
		}
		segs = e.hw.segs[:2] // cap MaxDesc+1: no append's growth check
		segs[0], segs[1] = b0, b1
		total = l0 + l1
		n, flags = 2, (d0.Qw1|d1.Qw1)&(desc.HeadToHostFlag|desc.IntReqFlag)
	default:
		return e.packetMulti(start, tail, d0)
	}
	if total&3 != 0 {
		return 0, 0, nil, e.wrongDW(start+n, total)
	}
	e.countPacket(n, total)
	return n, flags, segs, nil
}

// packetMulti is packet for a packet that is neither of one plain descriptor nor of two: AHG
// (ahgGather) or more descriptors (gather). d0 is the descriptor at start. Out of packet, whose
// frame (below which the mapper's Translate runs) then holds only the common packets' values.
func (e *Engine) packetMulti(start, tail uint64, d0 desc.Desc) (n uint64, flags uint64, segs [][]byte, h *HaltError) {
	segs = e.hw.segs[:0] // cap MaxDesc+1, a packet's most segments: no append reallocates it
	var total int
	if !plainHead(d0, e.ring.Generation(start)) {
		segs, n, flags, total, h = e.ahgGather(start, tail, segs)
	} else {
		// The common packet (no AHG): its first descriptor is all of its head, and there is no
		// header to build; parseHead and applyAHG would find the same.
		segs, n, flags, total, h = e.gather(start, tail, d0, start+1, segs)
	}
	if n == 0 || h != nil {
		return 0, 0, nil, h
	}
	if total&3 != 0 {
		return 0, 0, nil, e.wrongDW(start+n, total)
	}
	e.countPacket(n, total)
	return n, flags, segs, nil
}

// countPacket counts a packet of n descriptors and total bytes that the chip read in full.
func (e *Engine) countPacket(n uint64, total int) {
	e.hwStats.packets.Add(1)
	e.hwStats.descs.Add(n)
	e.hwStats.bytes.Add(uint64(total))
}

// wrongDW is the halt record of a packet of total bytes, not a whole number of dwords, whose
// descriptors end before ring index end. Out of line: packet's frame holds no string to build.
//
//go:noinline
func (e *Engine) wrongDW(end uint64, total int) *HaltError {
	return e.haltErr(CauseWrongDW, end-1, e.ring.Slot(end-1), "packet of "+itoa(total)+" bytes is not a whole number of dwords", nil)
}

// deliver hands the packet that process gathered (packet), its segments segs ending before ring
// index end, to the sink: to a BatchSink's Queue if a batch is held or more is published after
// it (queue), else to Deliver. The deferred function calls recover only if the sink did not
// return, and then drops the segments' references itself and, for a panic, lets the pass go on
// as if the sink had returned. A runtime.Goexit cannot be stopped: the engine halts and hwMu is
// released (sinkPanicked, sinkExited). hwMu held.
func (e *Engine) deliver(segs [][]byte, end uint64) {
	returned := false
	defer func() {
		if !returned {
			clear(e.hw.segs[:])
			e.sinkPanicked(recover())
		}
	}()
	var err error
	if b := &e.hw.batch; e.batching && (b.held > 0 || e.ring.Tail() != end) {
		err = e.queue(b, segs)
	} else {
		err = e.sink.Deliver(e.idx, segs)
	}
	returned = true
	if err != nil {
		e.sinkFailed(err, nil)
	}
	// Drop the references to the caller's memory. An indexed loop, not clear (or the range
	// loop the compiler turns into it): a packet has one to three segments, and clear is a
	// call into the runtime's memclrHasPointers, a few nanoseconds per packet.
	for i := 0; i < len(segs); i++ {
		segs[i] = nil
	}
}

// ahgGather is packet's gather for a packet whose first descriptor is not a plain head
// (plainHead): parseHead, gather and applyAHG. It returns what gather does, the built header's
// bytes counted in total.
func (e *Engine) ahgGather(start, tail uint64, segs [][]byte) (_ [][]byte, n, flags uint64, total int, h *HaltError) {
	var ph pktHead
	if ok, h := e.parseHead(start, tail, &ph); !ok || h != nil {
		return segs, 0, 0, 0, h
	}
	if ph.mode >= desc.AHGApplyUpdate1 {
		segs = append(segs, nil) // the header, built by applyAHG
	}
	if segs, n, flags, total, h = e.gather(start, tail, ph.d0, ph.next, segs); n == 0 || h != nil {
		return segs, 0, 0, 0, h
	}
	hb, h := e.applyAHG(start, &ph, segs)
	if h != nil {
		return segs, 0, 0, 0, h
	}
	return segs, n, flags, total + hb, nil
}

// plainHead reports whether d0, read at an index of generation gen, opens a packet without AHG:
// the generation matches, FIRST is set, the header mode is none (parseHead's checks all pass,
// and there are no edit descriptors to read).
func plainHead(d0 desc.Desc, gen desc.Generation) bool {
	return d0.Generation() == gen && d0.First() && d0.HeaderMode() == desc.AHGNoAHG
}

// plainPair reports whether d0, a plainHead without LAST, and d1, read at the next ring index
// (published, of generation gen1), make a packet that gather would read in full: d1 is of its
// generation, not FIRST, and LAST; both have bytes, and together at most maxPacketBytes.
func plainPair(d0, d1 desc.Desc, gen1 desc.Generation) bool {
	l0, l1 := d0.Len(), d1.Len()
	return d1.Generation() == gen1 && !d1.First() && d1.Last() && l0 > 0 && l1 > 0 && l0+l1 <= maxPacketBytes
}

// pktHead is what parseHead reads of a packet: its first descriptor, its AHG mode and update
// words, and where its data descriptors continue.
type pktHead struct {
	d0    desc.Desc
	mode  desc.HeaderMode
	words [desc.MaxAHGWords]uint32
	nw    int    // update words in words
	next  uint64 // ring index after the edit descriptors (start+1 without AHG updates)
}

// parseHead checks the packet's first descriptor (generation, FIRST, a defined AHG mode) and
// reads its AHG update words: word 0 from the first descriptor, words 1..8 from the edit
// descriptors that follow it (raw words, not generation-stamped). false with a nil *HaltError:
// the edit descriptors are not all published yet.
func (e *Engine) parseHead(start, tail uint64, ph *pktHead) (bool, *HaltError) {
	r := e.ring
	d0 := r.Slot(start)
	if d0.Generation() != r.Generation(start) {
		return false, e.genErr(start, d0)
	}
	if !d0.First() {
		return false, e.haltErr(CauseFirstDesc, start, d0, "packet does not start with FIRST", nil)
	}
	mode := d0.HeaderMode()
	if mode > desc.AHGApplyUpdate3 {
		return false, e.haltErr(CauseHeaderSelect, start, d0, "AHG mode "+itoa(int(mode)), nil)
	}
	ph.d0, ph.mode = d0, mode
	if mode >= desc.AHGApplyUpdate1 {
		ph.words[0] = d0.Update1()
		ph.nw = 1
	}
	i := start + 1
	for k := desc.EditDescs(mode); k > 0; k-- {
		if i == tail {
			return false, nil
		}
		ed := r.Slot(i)
		w := ph.words[ph.nw:]
		w[0], w[1], w[2], w[3] = uint32(ed.Qw0), uint32(ed.Qw0>>32), uint32(ed.Qw1), uint32(ed.Qw1>>32)
		ph.nw += 4
		i++
	}
	ph.next = i
	return true, nil
}

// gather walks the packet's descriptors from the first to LAST (skipping the edit descriptors),
// checking each as the chip does (generation, no FIRST inside, at most MaxDesc descriptors and
// maxPacketBytes bytes) and reading each one's memory through the mapper's Translate into segs.
// It returns segs, the descriptors spanned (0: LAST not published yet), the OR of their interrupt
// flags and the bytes read.
//
// d0 is the packet's first descriptor (read and checked by the caller), next the ring index of its
// second data descriptor (past the edit descriptors).
func (e *Engine) gather(start, tail uint64, d0 desc.Desc, next uint64, segs [][]byte) (_ [][]byte, n, flags uint64, bytes int, h *HaltError) {
	d, at := d0, start
	for {
		// d, at ring index at, is checked: read it. Its flags and LAST are taken before the
		// read (the call spills what lives across it).
		flags |= d.Qw1 & (desc.HeadToHostFlag | desc.IntReqFlag)
		last := d.Last()
		if l := d.Len(); l > 0 {
			if bytes += l; bytes > maxPacketBytes {
				return segs, 0, 0, 0, e.haltErr(CauseTooLong, at, d, "packet reads more than "+itoa(maxPacketBytes)+" bytes", nil)
			}
			buf, err := e.dev.mapper.Translate(dma.Addr(d.Addr()), l, dma.ToDevice)
			if err != nil || len(buf) != l {
				return segs, 0, 0, 0, e.readErr(at, d, l, len(buf), err)
			}
			segs = append(segs, buf)
		}
		if last {
			return segs, at - start + 1, flags, bytes, nil
		}
		if at == start {
			at = next // past the edit descriptors
		} else {
			at++
		}
		if at == tail {
			return segs, 0, 0, 0, nil
		}
		r := e.ring
		d = r.Slot(at)
		if d.Generation() != r.Generation(at) {
			return segs, 0, 0, 0, e.genErr(at, d)
		}
		if d.First() {
			return segs, 0, 0, 0, e.haltErr(CauseFirstDesc, at, d, "FIRST inside a packet (previous packet has no LAST)", nil)
		}
		if at-start >= desc.MaxDesc {
			return segs, 0, 0, 0, e.haltErr(CauseDescOverflow, at, d, "more than "+itoa(desc.MaxDesc)+" descriptors in one packet", nil)
		}
	}
}

// readErr is the halt record of descriptor d at ring index at whose l bytes the mapper's Translate
// would not read (memory not mapped: err) or read short (got bytes).
func (e *Engine) readErr(at uint64, d desc.Desc, l, got int, err error) *HaltError {
	if err != nil {
		return e.haltErr(CauseMemRead, at, d, "reading "+itoa(l)+" bytes", err)
	}
	return e.haltErr(CauseLengthMismatch, at, d, "read "+itoa(got)+" bytes for a "+itoa(l)+"-byte descriptor", nil)
}

// applyAHG carries out the packet's AHG mode: COPY stores the first descriptor's bytes (segs[0])
// in the entry it names; APPLY_UPDATE builds the header from its entry and the update words into
// segs[0]. It returns the bytes it added to the packet (the built header's length).
func (e *Engine) applyAHG(start uint64, ph *pktHead, segs [][]byte) (int, *HaltError) {
	switch {
	case ph.mode == desc.AHGCopy:
		if ph.d0.Len() == 0 {
			return 0, e.haltErr(CauseHeaderLength, start, ph.d0, "AHG COPY of an empty first descriptor", nil)
		}
		ent := &e.hw.ahg[ph.d0.HeaderIndex()]
		ent.n = copy(ent.b[:], segs[0])
	case ph.mode >= desc.AHGApplyUpdate1:
		hdr, h := e.buildHeader(start, ph.d0, ph.words[:ph.nw])
		if h != nil {
			return 0, h
		}
		segs[0] = hdr
		return len(hdr), nil
	}
	return 0, nil
}

// genErr is the halt record of descriptor d at ring index i, whose generation is not the one
// of the ring's pass over its slot.
func (e *Engine) genErr(i uint64, d desc.Desc) *HaltError {
	return e.haltErr(CauseGenMismatch, i, d, "generation "+itoa(int(d.Generation()))+", the slot's pass wants "+itoa(int(e.ring.Generation(i))), nil)
}

// buildHeader makes an APPLY_UPDATE packet's header in the scratch buffer.
func (e *Engine) buildHeader(start uint64, d0 desc.Desc, words []uint32) ([]byte, *HaltError) {
	ent := &e.hw.ahg[d0.HeaderIndex()]
	hlen := d0.HeaderDWs() * 4
	if hlen == 0 {
		hlen = ahgEntryBytes // HEADER_DWS 0 is 16 dwords: user_sdma's 64-byte header (sdma_txinit_ahg masks 16 to 0)
	}
	if ent.n == 0 {
		return nil, e.haltErr(CauseHeaderAddress, start, d0, "AHG entry "+itoa(d0.HeaderIndex())+" is empty", nil)
	}
	if hlen == 0 || hlen > ent.n {
		return nil, e.haltErr(CauseHeaderLength, start, d0, "AHG header of "+itoa(hlen)+" bytes from an entry of "+itoa(ent.n), nil)
	}
	hdr := e.hw.hdr[:hlen]
	if b := &e.hw.batch; b.sink != nil {
		hdr = b.hdrs[b.held*ahgEntryBytes:][:hlen] // the batch slot this packet will take
	}
	copy(hdr, ent.b[:hlen])
	for _, w := range words {
		u := desc.DecodeAHG(w)
		if !u.Enable {
			continue
		}
		if int(u.DWIndex)*4 >= hlen {
			return nil, e.haltErr(CauseHeaderAddress, start, d0, "AHG update of dword "+itoa(int(u.DWIndex))+" past a "+itoa(hlen)+"-byte header", nil)
		}
		if int(u.StartBit)+int(u.Bits) > 32 {
			return nil, e.haltErr(CauseHeaderAddress, start, d0, "AHG update field runs past its dword", nil)
		}
		mask := uint32(1)<<u.Bits - 1
		p := hdr[4*int(u.DWIndex):]
		v := binary.LittleEndian.Uint32(p)
		v = v&^(mask<<u.StartBit) | (uint32(u.Value)&mask)<<u.StartBit
		binary.LittleEndian.PutUint32(p, v)
	}
	return hdr, nil
}

// queue hands a packet to a BatchSink's Queue (packet's delivery of a packet that is not lone: a
// batch is held, or more is published after it; a lone packet goes to Deliver at once, exactly as
// to a sink that does not batch, so that batching costs an idle engine nothing). The packet is in
// the batch even if Queue fails: the head passes it with the others.
func (e *Engine) queue(b *batchState, segs [][]byte) error {
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	b.held++
	b.bytes += n
	err := b.sink.Queue(e.idx, segs)
	if err == nil {
		b.queued++
	}
	return err
}

// sinkPanicked records the value a sink panicked with (packet's deferred handler, the sink did
// not return); nil is no panic: the sink called runtime.Goexit, which goes on unwinding
// (sinkExited, goexit.go): Queue if a batch is held (queue counted the packet), else Deliver.
func (e *Engine) sinkPanicked(p any) {
	if p != nil {
		e.sinkFailed(nil, p)
		return
	}
	if held := e.hw.batch.held; held > 0 {
		e.sinkExited("Queue", held-1)
		return
	}
	e.sinkExited("Deliver", 0)
}

// sinkFailed records a failed packet: the sink's error, or the value it panicked with.
func (e *Engine) sinkFailed(err error, p any) {
	e.stats.sinkErrors.Add(1)
	if se, ok := err.(*SinkError); ok {
		e.sinkErr.Store(se)
		return
	}
	e.sinkErr.Store(&SinkError{Engine: e.idx, Err: err, Panic: p})
}

func (e *Engine) haltErr(c HaltCause, idx uint64, d desc.Desc, detail string, err error) *HaltError {
	return &HaltError{Engine: e.idx, Cause: c, Index: idx, Desc: d, Detail: detail, Err: err}
}

// halt stops the engine on a rejected descriptor or an injected halt (hfi1: sdma_engine_error →
// e60_hw_halted), which runs the recovery: s50_hw_halt_wait, the sw clean (s30), the hw clean
// (s40) and back to s99. The packets before the halt were delivered (a BatchSink's held ones are
// flushed first): their head is written back so that the clean completes them OK. hwMu held.
func (e *Engine) halt(h *HaltError) {
	clear(e.hw.segs[:])
	if e.hw.batch.held > 0 {
		e.flushBatch()
	}
	e.writeBackHead()
	e.raise(sm.E60HwHalted, h.Cause.String(), h)
}

// run is the hardware-model goroutine of a non-manual engine: a pass under hwMu, and when it
// delivered nothing, the wait its strategy says (idle). A Sink or callback that ends the
// goroutine with runtime.Goexit leaves it to runDone (goexit.go).
func (e *Engine) run() {
	returned := false
	defer e.runDone(&returned)
	e.hwGid.Store(gid())
	for !e.stopping.Load() {
		n, waitTail, _ := e.process(false)
		if n > 0 && e.ring.Tail() != waitTail {
			continue // more to read (or the pass stopped short: waitTail is ^0)
		}
		// Caught up with nothing new (or nothing delivered): the idle wait, without a pass
		// that would find nothing (a hold of hwMu, a locked instruction).
		switch e.strategy {
		case WaitBusyPoll:
			e.spin(waitTail, -1, busyYieldMask)
		case WaitSpinPark:
			if !e.spin(waitTail, spinLimit, 15) {
				e.park(waitTail)
			}
		default:
			e.park(waitTail)
		}
	}
	returned = true
}

// spinLimit is how many empty polls WaitSpinPark makes before it parks (a few microseconds).
const spinLimit = 128

// busyYieldMask spaces a busy-polling goroutine's yields (runtime.Gosched) to one every 2048
// polls, some ten microseconds: a yield with nothing else to run costs a trip through the
// scheduler, and a packet published meanwhile waits for it.
const busyYieldMask = 2047

// spin polls, without hwMu, until a pass may have something to do: the tail moved past
// waitTail (the tail the last pass stopped at, hwState.waitTail), a flush or a fault plan is
// pending (Engine.pending), the
// doorbell rang (a state change: see park) or the engine is stopping. It makes at most limit
// polls (no limit if negative), yielding every yieldMask+1, and reports whether it saw work.
//
// The poll reads only what park re-checks before it sleeps (the producers' tail line, two flags
// and the doorbell channel's count): an idle busy-polling engine no longer takes and releases
// hwMu (two locked instructions) per poll, and a producer's publish is picked up by the next
// load of the tail.
func (e *Engine) spin(waitTail uint64, limit, yieldMask int) bool {
	r := e.ring
	for i := 1; limit < 0 || i <= limit; i++ {
		if r.Tail() != waitTail || e.pending.Load() != 0 || e.stopping.Load() {
			return true
		}
		if i&15 == 0 {
			// The doorbell, every 16 polls: it only brings state changes and flushes here (a
			// spinning goroutine sees publishes on the tail), and even len of a channel is a
			// runtime call.
			if len(e.bell) != 0 {
				select {
				case <-e.bell:
				default:
				}
				return true
			}
			if i&yieldMask == 0 {
				runtime.Gosched() // stay polite to the other goroutines on this P
			}
		}
	}
	return false
}

// park sleeps until the doorbell rings or the engine is stopped. waitTail is the tail the last
// pass stopped at (hwState.waitTail): the goroutine parks while the tail is still there, which
// covers an empty ring, a packet whose LAST is not published yet, and a ring held while the
// engine is not running (frozen, say) — none of them can progress until a producer publishes,
// a flush is queued, or an event changes the state, and each of those rings the doorbell. The
// seq-cst store of hwSleeping before the re-check of the tail pairs with the producer's
// seq-cst tail store (Reservation.Publish) before its load of hwSleeping (publish,
// afterPublish): one of the two sees the other. A busy-polling goroutine never parks, and its
// producers skip the doorbell (Engine.parks).
func (e *Engine) park(waitTail uint64) {
	// A Swap, not a Store: a read-modify-write, so that the re-check's load of the tail cannot
	// pass it even where a store-release and a load-acquire are reordered (qemu-aarch64 on an
	// x86 host; see afterPublish). On amd64 both are the same XCHG.
	e.hwSleeping.Swap(true)
	if e.ring.Tail() != waitTail || e.pending.Load() != 0 || e.stopping.Load() {
		e.hwSleeping.Store(false)
		return
	}
	select {
	case <-e.bell:
	case <-e.stopCh:
	}
	e.hwSleeping.Store(false)
}
