package sdma

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/cacheline"
	"github.com/gosdma/gosdma/internal/membarrier"
	"github.com/gosdma/gosdma/ring"
	"github.com/gosdma/gosdma/sdma/internal/sm"
)

// Bits of Engine.gate, the producers' one-word view of the engine: the state machine's "state ==
// s99" and the device's life cycle. Send's fast path runs only when the gate is exactly
// gateRunning.
const (
	gateRunning  int32 = 1 << iota // the state machine is in s99_running (sdma_running)
	gateDraining                   // Device.Shutdown: sends refused, the ring is still processed
	gateDown                       // Device.Close: sends refused, the engine is going down
)

// Bits of Engine.pending: the work a hardware pass does at its start (process).
const (
	pendFlush  uint32 = 1 << iota // the flush list has txreqs to flush (flushFront)
	pendFaults                    // SetFaults left a plan in faultsNext (setFaults)
	pendCount                     // ProgressSchedule's interrupt reloaded the count (reloadCount)
)

// lineSize separates groups of fields written by different parties (internal/cacheline.Pad, the
// module's one definition: a cache line, and at least two 64-byte lines).
const lineSize = cacheline.Pad

// Engine is one SDMA engine (hfi1: struct sdma_engine): a descriptor ring fed by any number of
// goroutines, a hardware model consuming it, and the completion pass. It is safe for concurrent
// use; each method says which side it belongs to. Engines are the Device's (Device.Engine,
// SelectEngine); a zero Engine is none: AHGAlloc and AHGFree refuse it (ErrInvalid), as they
// refuse a nil one, and its other methods may panic, as a nil receiver's do.
//
// The ring's indices are free-running uint64s (see package ring); txRing records each txreq
// against the ring slot of its last descriptor.
type Engine struct {
	// The engine's fields are grouped by who writes them, each group on lines of its own, and
	// the groups that every packet touches are packed into as few cache lines as they fit: a
	// packet's path touches some fifty distinct lines besides its payload, and at 16 KiB a
	// packet's copy fills the L1 data cache (the copy's source and destination are 512 lines,
	// all of a 32 KiB 8-way cache), so that each line more evicts a payload line, which then
	// misses again. The offsets below are for 64-bit targets; the Engine is allocated with the
	// runtime's 8-byte allocation header before it (an object over 512 bytes with pointers), so
	// its field at offset o lies in the cache line of o+8 (TestEngineHotLines pins the groups).
	//
	// The read group: read by every Send and every hardware pass, and written rarely (gate,
	// pending, stopping) or never (the rest, set by newEngine). Send's fields lie in its first
	// line, the pass's in the first two.

	// gate is the atomic mirror of the state machine for producers (gateRunning | gateDraining |
	// gateDown bits). The running bit is written under hwMu and stMu by the state machine (And
	// when it leaves s99, before any clean-up; Or when it enters s99, after sdma_hw_start_up and
	// after the ring is opened again); Shutdown and Close Or in their bits. Read by every Send
	// before it reserves (and again when the ring refuses it as closed: see sendBatch), by
	// flushFront after it raised inflight, by the sleepers, and by the hardware model, which
	// reads the running bit as the state machine's "state == s99" (under hwMu the two agree:
	// both change together, see process).
	gate   atomic.Int32
	parks  bool // a hardware goroutine that may park (not Manual, not WaitBusyPoll): producers ring the doorbell
	manual bool // no hardware goroutine
	// plainSleepers: the completion pass reads the sleepers' announcements with a plain load and
	// a sleeper pays for the fence with a process-wide barrier (descAvail, announceSleeper;
	// internal/membarrier.Available).
	plainSleepers bool
	// batching: the sink is a BatchSink that holds packets (hw.batch.sink != nil), so that the
	// packet's path reads the batch's line only then.
	batching bool
	dev      *Device
	ring     *ring.Ring // descq with its indices and the head seqcount
	mask     uint64     // ring size - 1 (sdma_mask)

	// test holds the test hooks; nil outside in-package tests, which set it before the engine is
	// used. One pointer, so the hooks cost production one load and one word. Read-mostly: it is
	// read by every publish, so it must not share a line with anything written per packet.
	test *engineTestHooks

	// txRing is the software shadow (hfi1: tx_ring): txRing[i&mask] is the txreq whose last
	// descriptor is ring index i, or nil. Written by the producer that reserved i before it
	// publishes the tail past i (plain store, published by the tail's store-release); read and
	// cleared by the completion pass for i below hwHead (plain, after the hwHead load-acquire);
	// the slot is a producer's again after the pass moves swHead past i (store-release).
	txRing []*TxReq

	// pending is the work a hardware pass does at its start before it reads the ring, one bit
	// each, so that the common pass tests one word (process): pendFlush is set (atomic Or) by a
	// Send that put a txreq on the flush list and cleared (atomic And) by whoever then runs the
	// flush; pendFaults is set by SetFaults after it stored faultsNext and cleared by the pass
	// that takes the plan (under hwMu); pendCount is set by ProgressSchedule (its interrupt's
	// reload of the count, which is hwMu's state) and cleared by the pass that does the reload,
	// at its start or at the end of a count window (under hwMu, takeCountReload), or by a ring's
	// restart (dropCountReload). Read by the hardware pass, Poll (pendFlush) and the hardware
	// goroutine before it parks.
	pending atomic.Uint32
	// stopping is set once by stopGoroutine; read by the hardware goroutine each loop.
	stopping atomic.Bool
	descIntr int            // sdma_desct_intr
	mode     CompletionMode // who runs the completion pass
	sink     Sink           // where packets go
	idx      int            // this_idx
	strategy WaitStrategy   // how the hardware goroutine idles
	bell     chan struct{}  // doorbell to a parked hardware goroutine (cap 1)
	stopCh   chan struct{}  // closed by stopGoroutine
	done     chan struct{}  // closed when the hardware goroutine returns (nil if manual)

	_ [lineSize]byte

	// hwSleeping is set by the hardware goroutine just before it parks (seq-cst store, then it
	// re-checks the tail) and cleared when it runs; read by producers after they publish (the
	// doorbell: ring only when it is set). The two seq-cst pairs form a Dekker handshake: either
	// the producer sees the flag or the goroutine sees the new tail.
	hwSleeping atomic.Bool
	// hwGid is the gid (host.go: its runtime g where the build has getg, else its goroutine id)
	// of the hardware-model goroutine; 0: none, not started yet, or ended. Written by run as it
	// starts and cleared by runDone as it ends (the runtime may give its g to a later goroutine);
	// read by Close, Shutdown and Event to refuse a call from it (ownGoroutine) and by a Goexit's
	// handler (onOwnGoroutine).
	hwGid atomic.Uint64

	_ [lineSize]byte

	// inflight counts the producers that put a txreq on the flush list (flushFront), from their
	// gate check until it is there: a producer adds 1, then loads gate (both seq-cst), and
	// subtracts 1 when the txreq is on the list; the sw clean waits for it to drop to 0 (quiesce)
	// before it flushes, so Close finds every such txreq. (The ring's producers are not counted:
	// the sw clean closes the ring instead, see sendBatch and quiesce.) Written (atomic add) by
	// flushFront; read by quiesce.
	inflight atomic.Int64
	// progressAt is the chip's head (hwState.head) when a ProgressSchedule forced the progress
	// interrupt: where its handler's reload of the count took effect. Written (atomic store) by
	// ProgressSchedule before it sets pendCount; read by the pass that takes the reload, under
	// hwMu, after it cleared the bit (takeCountReload). Slow paths only, as inflight.
	progressAt atomic.Uint64

	_ [lineSize + 8]byte // and to a line's start: hwStats begins a line

	// The hardware group, written by hwMu's holder on every packet, in four lines: hwStats and
	// the words of hwMu that a hold touches, then hwMu's other words and hw's per-packet fields
	// (see hwState), then the first segments.

	// hwStats are the hardware side's per-packet counters (hwMu's holder adds; Stats reads).
	hwStats hwCounters
	// hwMu makes one hardware model at a time: the engine's goroutine or a caller's Process.
	// It also excludes the hardware while the sw clean unmaps what is left in the ring.
	// Lock order: hwMu, then headMu, then waitMu; flushMu is a leaf.
	hwMu ticketLock
	hw   hwState // guarded by hwMu

	_ [lineSize + 56]byte // and to a line's start: waitMu begins a line

	// The completion group, one line: what a completion pass touches on every pass (descAvail's
	// check of dmawait's count and sleepers, and passStats), with the wait lock and list.

	// waitMu is sde->waitlock: it guards dmawait and every queued IOWait's list fields. A
	// sleeper holds it across its Progress check and its queueing (the 2019 fix).
	waitMu  sync.Mutex
	dmawait waitList // parked iowaits in wake order; guarded by waitMu
	// sleepers counts the sleepers inside their wait-lock hold (lockUnlessProgress, announced
	// before the Progress check, withdrawn after the queueing). Written (atomic add) by them;
	// read by descAvail (a plain load with plainSleepers, else an atomic add of 0), which skips
	// the wait lock when it and the wait list's count are 0.
	// A plain int32 accessed only through sync/atomic's functions (AddInt32): the method
	// wrapper's inlining cost would keep descAvail's check from inlining into the pass.
	sleepers int32
	// passStats are the completion side's per-pass counters (the head lock's holder adds; Stats
	// reads).
	passStats passCounters

	// headMu is the writer side of head_lock: one completion pass (or flush, or sw clean) at a
	// time; the ring's seqcount is its sequence. A Manual engine does not use it: with no
	// hardware goroutine, its hardware and completion passes both run on callers' goroutines,
	// and hwMu is its head lock too (lockHead), so that a Process whose interrupt runs the
	// completion pass takes one lock, not two. Everything "guarded by headMu" is guarded by
	// hwMu there.
	headMu    ticketLock
	wakeBatch [waitBatchSize]*IOWait // sdma_desc_avail's waits[]; guarded by headMu
	wakeRank  [waitBatchSize]int     // their wake-order keys, taken under waitMu; guarded by headMu
	// wakeFn are their wakeup callbacks, read under waitMu while they were still parked: once
	// off the list a waiter may be Init again by its owner (Unqueue then reports false), which
	// rewrites its callbacks. Guarded by headMu.
	wakeFn [waitBatchSize]func(*IOWait, int)
	unmaps unmapBatch // the completion pass's unmap scratch (complete.go); guarded by headMu

	_ [lineSize]byte

	// flushMu guards flush (sde->flushlist_lock / flushlist): txreqs sent while the engine was
	// not running, completed aborted later by the flush.
	flushMu sync.Mutex
	flush   TxList

	// stMu is the state lock (the kernel holds tail_lock and head_lock in sdma_process_event).
	// sm is written with both hwMu and stMu held (raise); read under either (State, history,
	// the hardware model). stMu is taken after hwMu and is never held across a call out.
	stMu sync.Mutex
	sm   stateMachine

	// faultsNext is the fault plan that SetFaults gave and no pass has taken yet, or nil. Written
	// (atomic store) by setFaults, which then sets pendFaults; taken (atomic swap to nil) by the
	// hardware pass that sees pendFaults, under hwMu (takeFaults).
	faultsNext atomic.Pointer[faultPlan]
	// haltCause is the recorded reason of the last halt, nil while none. Written by the state
	// machine when the engine enters s50_hw_halt_wait (atomic store); read by HaltCause.
	haltCause atomic.Pointer[HaltError]
	// callbackErr is the last completion-side callback that panicked. Written by the completion
	// pass (atomic store); read by CallbackError.
	callbackErr atomic.Pointer[CallbackError]
	// sinkErr is the last failed delivery. Written by the hardware side; read by SinkError.
	sinkErr atomic.Pointer[SinkError]
	// ahgBits is the AHG entry allocation map (hfi1: sde->ahg_bits): bit i set means entry i
	// is taken. Written by AHGAlloc and AHGFree (CAS), read by them; see ahg.go.
	ahgBits atomic.Uint32
	// hwGone is set when a Sink or callback ended the engine's goroutine with runtime.Goexit
	// (goexit.go): the engine stays halted. Written once by the goroutine's release, under hwMu;
	// read by the events (under hwMu) and Shutdown.
	hwGone atomic.Bool
	// exitHalted is set when a Sink's or callback's runtime.Goexit halted the engine (exitHalt,
	// goexit.go), which then waits in s50_hw_halt_wait with no halt worker for a Stop or Close,
	// and cleared by the next sw clean (swCleanLocked). Both under hwMu; read by Shutdown
	// (idleForShutdown), which does not wait for the ring of such an engine to drain.
	exitHalted atomic.Bool
	// flushing holds the txreqs a flush took off the flush list and has not completed yet
	// (flushLocked); guarded by the head lock.
	flushing TxList
	// hosts are the goroutines that run this engine's passes in a call of their own (Stop,
	// SendWait, a direct Process of an engine with a goroutine, ...), for Close and the events to
	// refuse a call from a callback such a pass runs (host.go). Written by those calls (add,
	// remove); read by Close, Shutdown and the events.
	hosts hostSet
	// pollG is the gid (host.go) of the goroutine that runs a direct Poll's pass of an engine with
	// a goroutine (pollDirect), 0 while none: Poll's cheaper registration as a host (hostHead),
	// for the same refusals. Written (store-release, a plain MOV on amd64) only by the head
	// lock's holder, set after it takes the lock and cleared before it releases it (or by the
	// handler of a callback's runtime.Goexit, callerExited); read (atomic load) by ownPass and
	// callerExited, which compare it with their own gid: a goroutine sees its own last store, and
	// no other goroutine stores its gid, so the answer is exact without the lock.
	pollG atomic.Uint64

	_ [lineSize]byte

	// stats are the other counters, on lines of their own grouped by writer (see counters): a
	// word a producer reads on one of their lines would bounce it between the cores.
	stats counters
}

// engineTestHooks are the in-package tests' seams into the engine.
type engineTestHooks struct {
	// sleepWindow runs in park between the Progress check and the queueing; skipWaitLock makes
	// park check Progress without the wait lock, as kernels before the 2019 fix did.
	sleepWindow  func()
	skipWaitLock bool
	// listPublish, if set, is called by the send path (Send, SendList) after each tail publish
	// with the number of txreqs the publish covered (SDMA_TAIL_UPDATE_THRESH: at most 32).
	listPublish func(txreqs int)
	// reserved, if set, is called by the send path after a batch's reservation, before its
	// writes and Publish (quiesce must wait for the Publish through the ring's indices).
	reserved func()
	// admitted, if set, is called by the send path after the gate check and the admission,
	// before the reservation (a sw clean that runs meanwhile closes the ring under it).
	admitted func()
}

func newEngine(dev *Device, idx int, cfg *Config, lim [2]int) (*Engine, error) {
	r, err := ring.New(cfg.RingSize)
	if err != nil {
		return nil, configErr("RingSize", cfg.RingSize, err.Error())
	}
	e := &Engine{
		dev:           dev,
		idx:           idx,
		ring:          r,
		mask:          r.Mask(),
		descIntr:      cfg.DescIntr,
		strategy:      cfg.Wait,
		mode:          cfg.Completion,
		manual:        cfg.Manual,
		parks:         !cfg.Manual && cfg.Wait != WaitBusyPoll,
		plainSleepers: membarrier.Available(),
		sink:          dev.sink,
		bell:          make(chan struct{}, 1),
		stopCh:        make(chan struct{}),
		txRing:        make([]*TxReq, r.Size()),
	}
	if !cfg.Manual {
		e.done = make(chan struct{})
	}
	// The locks' bias needs getg and the barrier (see ticketLock); set before they are shared.
	e.hwMu.biasable = canBias && e.plainSleepers
	e.headMu.biasable = e.hwMu.biasable
	e.hw.init(e.sink, lim)
	e.batching = e.hw.batch.sink != nil
	return e, nil
}

// Index returns the engine's index in its device (sde->this_idx).
func (e *Engine) Index() int { return e.idx }

// Device returns the engine's device (sde->dd).
func (e *Engine) Device() *Device { return e.dev }

// Empty reports whether the ring holds nothing: every reserved descriptor was completed
// (hfi1: sdma_empty).
func (e *Engine) Empty() bool { return e.ring.Empty() }

// Running reports whether the engine is running (hfi1: sdma_running, s99_running) on a device
// that is not closed. During a Shutdown's drain it still runs, finishing what it holds, but Send
// refuses new txreqs with ErrClosed.
func (e *Engine) Running() bool { return e.gate.Load()&(gateRunning|gateDown) == gateRunning }

// Closed reports whether the engine's device is closed or closing (Device.Close, or Shutdown from
// its start): Send refuses with ErrClosed from then on and never takes a txreq again. During a
// Shutdown's drain the engine is Closed and still Running, finishing what it holds; once Close
// ran it never runs again. A halted or stopped engine of a live device is not Running and not
// Closed: it may run again.
func (e *Engine) Closed() bool { return e.gate.Load()&(gateDraining|gateDown) != 0 }

// DescqFreeCnt returns the descriptors that can be reserved now (hfi1: sdma_descq_freecnt).
func (e *Engine) DescqFreeCnt() int { return e.ring.FreeCnt() }

// HeadSeq snapshots the head seqcount for a later Progress (hfi1: raw_seqcount_begin of
// sde->head_lock, as sdma_check_progress takes it). It never waits; a pass in progress counts
// as progress.
func (e *Engine) HeadSeq() uint32 { return e.ring.HeadSeq() }

// Progress reports whether a completion pass ran since seq was taken and tx now fits in the
// ring (hfi1: sdma_progress). true: the sleeper should retry (ErrAgain); false: no progress, or
// not enough, so park. On its own it leaves a window before the queueing: ParkOrRetry and
// DeferOrRetry check it under the wait lock together with the queueing, which closes it. A nil
// tx reports false (the kernel would dereference it).
func (e *Engine) Progress(seq uint32, tx *TxReq) bool {
	if e.ring.HeadRetry(seq) && tx != nil {
		return tx.NumDesc() <= e.ring.FreeCnt()
	}
	return false
}

// HaltCause returns why the engine last halted (the *HaltError recorded on entering
// s50_hw_halt_wait), or nil if it never did. It stays set after the engine recovers.
func (e *Engine) HaltCause() error {
	if h := e.haltCause.Load(); h != nil {
		return h
	}
	return nil
}

// SinkError returns the last failed delivery on this engine (a *SinkError), or nil.
func (e *Engine) SinkError() error {
	if s := e.sinkErr.Load(); s != nil {
		return s
	}
	return nil
}

// CallbackError returns the last completion-side callback on this engine that panicked (a
// *CallbackError: which callback, the value, the stack), or nil. Such a panic is recovered so
// that it cannot wedge the engine; see CallbackError.
func (e *Engine) CallbackError() error {
	if c := e.callbackErr.Load(); c != nil {
		return c
	}
	return nil
}

// Send submits tx to the ring (hfi1: sdma_send_txreq).
//
// Results, as the kernel's:
//   - nil: tx is in flight; its callback runs once when it completes.
//   - ErrInvalid (a *TxError): tx is unfinished (bytes missing), uninitialised, cleaned, already
//     in flight, built for another device, or has more descriptors than the ring holds; nothing
//     changed.
//   - ErrBusy: no room and w is nil (or has no sleep callback); tx is still the caller's.
//   - with room lacking and w's sleep set: whatever sleep returns — ErrBusy or ErrQueued (tx was
//     parked by the sleeper), nil (the sleeper dropped tx) — after retrying while it says ErrAgain.
//   - ErrNotRunning: the engine is not in s99 (stopped, idle, frozen, or recovering from a halt);
//     tx went to the flush list and completes later with StatusAborted (a caller may count it
//     as sent, as verbs does).
//   - ErrClosed: the device is shutting down or closed; tx is still the caller's.
//
// pktsSent tells the sleeper whether the caller sent packets in this burst (iowait_queue's
// fairness). Any number of goroutines may Send to one engine at once: the fast path is a
// lock-free reservation, and tx's descriptors are contiguous in the ring. Packets leave in
// reservation order. Send does not allocate.
//
// tx must not be on a TxList (an IOWait's TxHead, say): take it off first (PopFront). The flush
// list links it through its own list link, as the kernel's list_add_tail(&tx->list, &flushlist)
// does, so an ErrNotRunning would cut the caller's list after tx.
func (e *Engine) Send(w *IOWait, tx *TxReq, pktsSent bool) error {
	// The common case, sendOne's without its test hooks and its call: one call into the ring
	// for the reservation and one for the Publish. sendable's test is written out here: the bool
	// an inlined call returns is materialised and tested again (a SETcc, a jump and a test), and
	// its numDesc is loaded again for hwDescs, with ds[0]'s bounds check.
	if e.gate.Load() == gateRunning && tx != nil && tx.state.Load() == txBuilding && tx.tlen == 0 &&
		tx.numDesc != 0 && (tx.dev == e.dev || tx.dev == nil) && e.test == nil {
		ds, skip := tx.hwDescs()
		if res, err := e.ring.ReserveWrite(ds, skip); err == nil {
			e.launch(w, tx, res.Start()+uint64(len(ds))-1)
			if e.parks {
				e.publishParked(&res)
			} else if !res.TryPublishRelease() { // its common case inline: no call
				res.PublishRelease()
			}
			return nil
		}
	}
	return e.sendSlow(w, tx, pktsSent)
}

// sendSlow is Send past its common case: sendOne with the test hooks, else the general path
// (a ring refused, the gate not running, a txreq not sendable). Out of line.
//
//go:noinline
func (e *Engine) sendSlow(w *IOWait, tx *TxReq, pktsSent bool) error {
	if e.test != nil && e.gate.Load() == gateRunning && e.sendable(tx) && e.sendOne(w, tx) {
		return nil
	}
	src := txSource{one: tx}
	// send's first batch, made here: the common case, a txreq that goes in, costs no call more.
	_, err := e.sendBatch(w, &src, pktsSent)
	if err == nil {
		return nil
	}
	if stop, _, err := e.batchErr(w, &src, err); stop {
		return err
	}
	_, _, err = e.send(w, &src, pktsSent) // tx is still src's: look again
	return err
}

// SendList submits the txreqs of l in order (hfi1: sdma_send_txlist) and returns how many it
// took off the list: submitted, or flushed because the engine is not running. The rest stay at the
// head of l. Descriptors are reserved for up to 32 txreqs at a time and the tail is published
// after each such batch (SDMA_TAIL_UPDATE_THRESH). Errors as Send's, for the txreq at the head
// of what is left: ErrInvalid stops at a txreq that is not ready (checked before the room,
// where the kernel checks it after); no room runs w's sleeper with tx still on l (so the sleeper
// must leave tx where it is: use DeferOrRetry, not ParkOrRetry; a sleeper's nil stops SendList
// with a nil error, tx and the rest still on l, as the kernel's 0 does), pktsSent being whether
// this call submitted anything; ErrNotRunning after
// flushing every remaining ready txreq; ErrClosed. Send and SendList share one send path (send):
// a Send is a batch of one.
//
// A halt (or Stop) cannot split the list: once a batch of it is in the ring, a sw clean that
// aborts that batch makes SendList flush the rest of the list (ErrNotRunning, every remaining
// txreq completes aborted) rather than send it into the recovered ring after the aborted ones,
// as the kernel's tail_lock, held across the whole list, keeps the clean before or after it
// (txSource). Between two SendList calls (after ErrBusy, say) the caller decides; SendListIn
// keeps several calls to one epoch.
func (e *Engine) SendList(w *IOWait, l *TxList) (int, error) { return e.sendList(w, l, 0, false) }

// Epoch returns the engine's epoch: a count of the sw cleans that reset its ring (ring.Epoch;
// one per halt, Stop or freeze recovered). Hand it to SendListIn to send several lists in one
// epoch.
func (e *Engine) Epoch() uint64 { return e.ring.Epoch() }

// SendListIn is SendList in the epoch epoch (Epoch) only (hfi1: sdma_send_txlist, with the
// guarantee the kernel's callers lack between two calls): if a sw clean reset the ring since
// epoch was read, it refuses the list with ErrReset and changes nothing (the list, its txreqs
// and the ring are as they were; a sw clean that comes once a batch of this call is in the ring
// flushes the rest as SendList does). A caller whose later lists depend on an earlier one
// reaching the chip sends them all in the epoch it read before the first: a user_sdma request
// whose packet 0 stores its header in an AHG entry (FlagAHGCopy) and whose later packets only
// patch it (FlagUseAHG) must not send those into a ring the clean emptied of packet 0, or the
// chip builds their headers from what the entry held before. An engine not running still
// flushes (ErrNotRunning) as SendList does, and a closing device is ErrClosed whatever the epoch.
// An epoch ahead of the engine's (not one Epoch returned) is ErrInvalid.
func (e *Engine) SendListIn(w *IOWait, l *TxList, epoch uint64) (int, error) {
	return e.sendList(w, l, epoch, true)
}

// sendList is SendList (strict false: the list is sent in the epoch read here) and SendListIn
// (strict: in epoch only).
func (e *Engine) sendList(w *IOWait, l *TxList, epoch uint64, strict bool) (int, error) {
	if l == nil {
		op := "SendList"
		if strict {
			op = "SendListIn"
		}
		return 0, txErr(op, ErrInvalid, "nil list")
	}
	cur := e.ring.Epoch()
	if strict && epoch != cur {
		if err := e.staleEpoch(epoch, cur); err != nil {
			return 0, err
		}
	}
	src := txSource{list: l, epoch: cur, strict: strict}
	submitted, flushed, err := e.send(w, &src, false)
	if w != nil && submitted > 0 {
		w.starved.Store(0) // iowait_starve_clear (sdma_send_txlist only, as in the kernel)
	}
	return submitted + flushed, err
}

// staleEpoch is SendListIn's answer to an epoch other than the engine's cur: ErrInvalid if it is
// ahead (not one Epoch returned); nil on a closing device, whose sw clean reset the ring (the send
// path answers ErrClosed, as SendList's); else ErrReset.
func (e *Engine) staleEpoch(epoch, cur uint64) error {
	if epoch > cur {
		return txErr("SendListIn", ErrInvalid, "epoch "+strconv.FormatUint(epoch, 10)+" is ahead of the engine's "+strconv.FormatUint(cur, 10))
	}
	if e.Closed() {
		return nil
	}
	return ErrReset
}

// txSource is what the send path takes txreqs from, front first: SendList's list, or Send's one
// txreq (not on a list: flushFront links it onto the flush list, see Send). It lives on the
// sender's stack.
//
// A list is sent in one epoch of the ring (ring.Epoch: the ring's Resets, one per sw clean):
// SendList reads it before its first reservation and reserves with ring.ReserveIn, which fails
// atomically once a sw clean reset the ring. Until a batch of the list is in the ring the epoch
// is read again (SendListIn: ErrReset, see reset); after that (pinned) a reset means that the sw clean aborted what the list
// published, and the rest of the list is flushed (completes aborted) rather than sent into the
// fresh ring after it: in the kernel, sdma_send_txlist holds tail_lock, which the clean-up
// takes too, so a clean comes before the whole list or after it, never between two txreqs of one.
type txSource struct {
	list   *TxList // SendList's list; nil for Send
	one    *TxReq  // Send's txreq
	done   bool    // Send's txreq was taken
	pinned bool    // a batch of the list was reserved in epoch: the list keeps to it
	strict bool    // SendListIn: a reset before the first batch is ErrReset, not a new epoch
	epoch  uint64  // the ring epoch the list is sent in (SendList only)
}

// more reports whether a txreq is left (Send's may be nil: the checks refuse it).
func (s *txSource) more() bool {
	if s.list != nil {
		return s.list.Len() > 0
	}
	return !s.done
}

func (s *txSource) front() *TxReq {
	if s.list != nil {
		return s.list.Front()
	}
	return s.one
}

// next returns the txreq after tx, or nil.
func (s *txSource) next(tx *TxReq) *TxReq {
	if s.list != nil {
		return s.list.Next(tx)
	}
	return nil
}

// pop takes the front txreq.
func (s *txSource) pop() *TxReq {
	if s.list != nil {
		return s.list.PopFront()
	}
	s.done = true
	return s.one
}

// errDropped is the no-room path's answer when the sleeper dropped the txreq (it returned nil).
var errDropped = errors.New("sdma: txreq dropped by the sleeper")

// send is the one send path under Send and SendList (hfi1: sdma_send_txreq, sdma_send_txlist):
// it takes the txreqs of src in order, in batches (sendBatch), until none is left or an error
// stops it, and returns how many it submitted and how many it flushed. Once it finds the engine
// not running it flushes every txreq left (the kernel's unlock_noconn) and says ErrNotRunning.
func (e *Engine) send(w *IOWait, src *txSource, pktsSent bool) (submitted, flushed int, err error) {
	for src.more() {
		k, err := e.sendBatch(w, src, pktsSent || submitted > 0)
		if err == nil {
			submitted += k
			continue
		}
		if stop, flushed, err := e.batchErr(w, src, err); stop {
			return submitted, flushed, err
		}
	}
	return submitted, 0, nil
}

// batchErr is the send path's answer to a batch's error (sendBatch's, for the txreq at the front
// of src): stop, with the txreqs flushed and the error to return, or look again.
func (e *Engine) batchErr(w *IOWait, src *txSource, err error) (stop bool, flushed int, _ error) {
	switch {
	case errors.Is(err, ErrAgain): // a sleeper's answer may wrap the sentinel
		return false, 0, nil
	case err == ErrNotRunning:
		flushed, err = e.flushAll(w, src)
		return true, flushed, err
	case err == errDropped:
		// Send: the sleeper dropped tx. SendList: stop, tx and the rest still on the list, no
		// error (sdma_send_txlist's nodesc path: descq_full_count++, goto update_tail, ret 0).
		return true, 0, nil
	}
	return true, 0, err
}

// sendBatch admits, reserves and publishes one batch: the txreqs at the front of src that fit,
// at most 32, under one tail update. It returns how many it published (at least one), or no
// txreq taken and: ErrAgain (look again), ErrNotRunning (flush: the engine is not running, or a
// sw clean reset the ring under a list, see txSource), ErrClosed, the front txreq's ErrInvalid,
// or the no-room path's answer.
//
// A producer that passed the gate may race a sw clean (a halt, Stop, Close): the clean clears the
// gate's running bit and then closes the ring (quiesce: ring.Close, an atomic add on the
// reservation word that this producer's CAS also works on). The two are ordered on that word:
// either the reservation's CAS came first, and the clean waits for its Publish (the ring's tail
// reaching the reservation index) and then aborts what was published, or the CAS fails and
// Reserve says ring.ErrClosed, and the producer looks at the gate again (notRunning) and backs
// off as if it had seen the engine stopped at first: nothing of the batch touched the ring. The
// ring stays closed until the engine runs again (apply opens it before it sets the running bit).
// So the send path's only locked instruction is the reservation's CAS, as the kernel's is its
// tail_lock (no in-flight count to raise and drop around the reservation).
func (e *Engine) sendBatch(w *IOWait, src *txSource, pktsSent bool) (int, error) {
	if g := e.gate.Load(); g != gateRunning {
		return 0, e.notRunning(g, src)
	}
	var k, total int
	var err error
	if tx := src.one; src.list == nil && e.sendable(tx) && e.fits(tx) { // Send's common case: admit's, with no call
		tx.moveState(txInFlight)
		k, total = 1, tx.NumDesc()
	} else {
		k, total, err = e.admit(src)
	}
	if err != nil {
		return 0, err
	}
	if e.test != nil && e.test.admitted != nil {
		e.test.admitted() // past the gate, before the reservation
	}
	res, err := e.reserve(src, total)
	if err != nil { // no room for the batch, the ring closed or reset: give it back
		e.release(src, k)
		if err == ring.ErrReset {
			return 0, e.reset(src)
		}
		if err == ring.ErrClosed {
			if g := e.gate.Load(); g != gateRunning {
				return 0, e.notRunning(g, src)
			}
			return 0, ErrAgain // stopped and running again since: look again
		}
		return 0, e.noRoom(w, src.front(), pktsSent)
	}
	if e.test != nil && e.test.reserved != nil {
		e.test.reserved() // between the reservation and the Publish
	}
	e.publish(w, src, k, &res)
	return k, nil
}

// reserve reserves total descriptors for src's next batch: in the list's epoch for SendList
// (txSource), in any for Send.
func (e *Engine) reserve(src *txSource, total int) (ring.Reservation, error) {
	if src.list == nil {
		return e.ring.Reserve(total)
	}
	res, err := e.ring.ReserveIn(total, src.epoch)
	if err == nil {
		src.pinned = true
	}
	return res, err
}

// reset is the send path's answer to a ring reset under a SendList (ring.ErrReset): before the
// list put anything in the ring, look again in the new epoch (ErrAgain; SendListIn: ErrReset,
// the caller's epoch is over); after, the sw clean
// aborted the list's earlier batches, and the rest is flushed (ErrNotRunning), as the kernel's
// tail_lock would have had the whole list in the ring before the clean.
func (e *Engine) reset(src *txSource) error {
	if src.pinned {
		return ErrNotRunning
	}
	if src.strict {
		return ErrReset // SendListIn: the caller's epoch is over; nothing of the list was taken
	}
	src.epoch = e.ring.Epoch()
	return ErrAgain
}

// sendOne is sendBatch for Send's one txreq in the common case, the gate running and tx
// sendable, with the test hooks (Send runs the same steps inline when there are none): it reserves and writes tx's descriptors in one ring call (ring.ReserveWrite), then
// claims tx, records it in txRing and publishes, as publish does for a batch of one. It reports
// false when the ring refused the reservation (no room, or closed by a sw clean that raced the
// gate check): nothing changed, tx is still the caller's, and Send takes the general path, which
// looks at the gate and the room again and answers (sendBatch's protocol against the sw clean
// holds: the reservation's CAS either came before the ring's Close, and the clean waits for this
// Publish, or it failed). The state moves to in flight after the reservation, before the Publish
// that hands tx to the hardware side: until then no other goroutine can reach tx.
func (e *Engine) sendOne(w *IOWait, tx *TxReq) bool {
	if e.test != nil && e.test.admitted != nil {
		e.test.admitted() // past the gate, before the reservation
	}
	ds, skip := tx.hwDescs()
	res, err := e.ring.ReserveWrite(ds, skip)
	if err != nil {
		return false
	}
	if e.test != nil && e.test.reserved != nil {
		e.test.reserved() // between the reservation and the Publish
	}
	e.launch(w, tx, res.Start()+uint64(len(ds))-1)
	if e.parks {
		e.publishParked(&res)
	} else {
		res.PublishRelease()
	}
	if e.test != nil && e.test.listPublish != nil {
		e.test.listPublish(1)
	}
	return true
}

// notRunning is the send path's answer to a gate g that is not exactly gateRunning: ErrClosed
// (or the front txreq's own error) once the device is closing, else ErrNotRunning (flush).
func (e *Engine) notRunning(g int32, src *txSource) error {
	if g&(gateDraining|gateDown) != 0 {
		return e.refuseClosed(src.front())
	}
	return ErrNotRunning
}

// admit claims the txreqs at the front of src for one batch: the front one always (the
// reservation says whether it fits), then each next one while the batch fits the room seen now,
// at most 32 (SDMA_TAIL_UPDATE_THRESH). A txreq that cannot be sent ends the batch before it; at
// the front its error is returned and nothing is claimed. It returns the txreqs claimed and
// their descriptors.
func (e *Engine) admit(src *txSource) (k, total int, err error) {
	if src.list == nil { // Send: a batch of its one txreq (sendBatch tried the common case)
		if err := e.claim(src.one); err != nil {
			return 0, 0, err
		}
		return 1, src.one.NumDesc(), nil
	}
	free := -1 // read once, and only for a batch of more than one
	for tx := src.front(); k < tailUpdateBatch; tx = src.next(tx) {
		if k > 0 {
			if tx == nil {
				break
			}
			if free < 0 {
				free = e.ring.FreeCnt()
			}
			if total+tx.NumDesc() > free {
				break
			}
		}
		if err := e.claim(tx); err != nil {
			if k == 0 {
				return 0, 0, err
			}
			break
		}
		k++
		total += tx.NumDesc()
	}
	return k, total, nil
}

// claim checks that tx may be sent to this engine and hands it from the caller to the engine.
// claim and release are the send path's only writes of a txreq's state (moveState).
func (e *Engine) claim(tx *TxReq) error {
	if err := e.check(tx); err != nil {
		return err
	}
	tx.moveState(txInFlight) // check saw txBuilding (ready); see moveState
	return nil
}

// refuseClosed is the answer to a send on a closing device: the txreq's own error first, as the
// kernel checks the txreq before the engine's state, else ErrClosed.
func (e *Engine) refuseClosed(tx *TxReq) error {
	if err := e.check(tx); err != nil {
		return err
	}
	return ErrClosed
}

// launch hands tx, reserved and written at ring index last (its last descriptor's), to the
// engine before its Publish: the state moves to in flight (sendable saw txBuilding, ready; see
// moveState), w is recorded and counted (iowait_sdma_inc, before the completion can run), and
// tx is recorded in txRing at last, where the completion pass finds it. tx.wait is nil (a txreq
// not in flight has none: the completion clears it), so without w there is nothing to store.
func (e *Engine) launch(w *IOWait, tx *TxReq, last uint64) {
	tx.moveState(txInFlight)
	e.txRing[last&e.mask] = tx
	if w != nil {
		tx.wait = w
		w.busy.Add(1)
	}
}

// publishParked publishes res, one txreq's reservation, for an engine whose hardware goroutine
// parks: seq-cst, then the doorbell (their Dekker pair, see publish). Without parking a
// store-release is enough (PublishRelease).
func (e *Engine) publishParked(res *ring.Reservation) {
	res.Publish()
	e.afterPublish()
}

// sendable is check's common case but the ring's capacity, in one test that inlines (Send has
// its own copy, written out): true means check returns nil if tx fits the ring (fits): tx is
// ready, built for this device or for none; false says nothing, check tells. Send's common case
// needs no fits: ring.ReserveWrite refuses a batch past the ring's capacity, changing nothing,
// and Send takes the general path, whose check says why.
func (e *Engine) sendable(tx *TxReq) bool {
	return tx != nil && tx.state.Load() == txBuilding && tx.tlen == 0 && tx.numDesc != 0 &&
		(tx.dev == nil || tx.dev == e.dev)
}

// fits reports whether tx's descriptors fit in the ring at all (check's last test).
func (e *Engine) fits(tx *TxReq) bool { return int(tx.numDesc) < e.ring.Size() }

// check is claim's checks: tx is ready, built for this device, and fits the ring.
func (e *Engine) check(tx *TxReq) error {
	if err := tx.ready(); err != nil {
		return err
	}
	if tx.dev != nil && tx.dev != e.dev {
		return txErr("Send", ErrInvalid, "txreq built for another device")
	}
	if n := tx.NumDesc(); n > e.ring.Size()-1 {
		return txErr("Send", ErrInvalid, "txreq of "+itoa(n)+" descriptors exceeds the ring's capacity "+itoa(e.ring.Size()-1))
	}
	return nil
}

// release hands the first k txreqs of src, claimed by admit, back to the caller.
func (e *Engine) release(src *txSource, k int) {
	for tx, j := src.front(), 0; j < k; tx, j = src.next(tx), j+1 {
		tx.moveState(txBuilding)
	}
}

// noRoom is the no-room path (hfi1: sdma_check_progress) for tx, the caller's: ErrAgain if room
// appeared; else ErrBusy without a sleeper, or the sleeper's answer (its nil is errDropped). Every
// answer but ErrAgain counts as a full ring.
//
// Unlike the kernel, the seqcount is snapshot before the free count is read: a completion pass
// that ends between the two then still shows as progress to the sleeper, where the kernel's
// order would let the sleeper park behind a pass that already freed the room.
func (e *Engine) noRoom(w *IOWait, tx *TxReq, pktsSent bool) error {
	seq := e.ring.HeadSeq()
	if tx.NumDesc() <= e.ring.FreeCnt() {
		return ErrAgain
	}
	err := ErrBusy
	if w != nil && w.sleep != nil {
		if err = w.sleep(e, w, tx, seq, pktsSent); err == nil {
			err = errDropped
		}
	}
	if !errors.Is(err, ErrAgain) { // the sleeper's error: it may wrap the sentinel
		e.stats.ringFull.Add(1)
	}
	return err
}

// publish writes the batch's k txreqs into its reservation, records each against the slot of
// its last descriptor, adds the batch to w's busy count, publishes the tail once (hfi1: submit_tx
// for each, then sdma_update_tail). A sw clean that starts meanwhile waits for this Publish through
// the ring's indices (sendBatch, quiesce).
// The reservation is ours: nothing may fail between Reserve and Publish, or the ring would block
// (Publish of one's own reservation has no error to return).
func (e *Engine) publish(w *IOWait, src *txSource, k int, res *ring.Reservation) {
	off := 0
	for j := 0; j < k; j++ {
		tx := src.pop()
		tx.wait = w
		ds, skip := tx.hwDescs()
		res.Write(off, ds, skip)
		off += len(ds)
		e.txRing[(res.Start()+uint64(off)-1)&e.mask] = tx
	}
	if w != nil {
		w.busy.Add(int32(k)) // iowait_sdma_inc/add, before the completion can run
	}
	if e.parks {
		// The doorbell's Dekker pair needs the tail store sequentially consistent before
		// afterPublish loads hwSleeping (ring.Reservation.Publish: XCHG on amd64).
		res.Publish()
		e.afterPublish()
	} else {
		// No hardware goroutine that parks (busy-poll, or Manual): no doorbell, and the tail
		// store needs only release semantics (a plain MOV on amd64), so that nothing after it
		// waits for the stores of the batch to reach the engine's core.
		res.PublishRelease()
	}
	if e.test != nil && e.test.listPublish != nil {
		e.test.listPublish(k)
	}
}

// afterPublish runs after every Publish to an engine whose goroutine parks: the doorbell. (A
// send that raced a halt or a close needs nothing here: the sw clean waited for its Publish, see
// sendBatch and quiesce, and aborted it.)
//
// The producer's half of the Dekker pair is the tail store then the load of hwSleeping. On
// amd64 the store is an XCHG, a full fence, so a plain load follows. Elsewhere the store is a
// store-release (arm64's STLR), and the load is made a read-modify-write (Swap, clearing the
// flag: the goroutine sets it again before it next parks), which no emulator lets pass the
// store: qemu-aarch64 on an x86 host translates STLR then LDAR into a store and a load that the
// host reorders, so that the producer read the flag clear while the goroutine, having set it,
// read the old tail and parked with the packets unread (usdma's
// TestBoundedAllocatorCloseAndCtxRace hung in Close, 1 run in 2-6 under qemu).
func (e *Engine) afterPublish() {
	if tailStoreFences {
		if e.hwSleeping.Load() {
			e.ringBell()
		}
		return
	}
	if e.hwSleeping.Swap(false) {
		e.ringBell()
	}
}

// tailStoreFences says that the ring's seq-cst tail store is a full fence (XCHG on amd64), so
// that afterPublish's load of hwSleeping cannot pass it.
const tailStoreFences = runtime.GOARCH == "amd64"

// ringBell wakes a parked hardware goroutine; it never blocks.
func (e *Engine) ringBell() {
	select {
	case e.bell <- struct{}{}:
	default:
	}
}

// flushAll moves every txreq left in src to the flush list (hfi1: the unlock_noconn path of
// sdma_send_txreq and sdma_send_txlist): each completes with StatusAborted when the flush runs.
// It returns how many it took, and ErrNotRunning, or the error it stopped at (ErrClosed, the
// front txreq's ErrInvalid).
func (e *Engine) flushAll(w *IOWait, src *txSource) (int, error) {
	n := 0
	for src.more() {
		if err := e.flushFront(w, src); err != nil {
			return n, err
		}
		n++
	}
	return n, ErrNotRunning
}

// flushFront moves the front txreq of src to the flush list, as a producer: in flight
// (inflight) from its gate check until it is on the list, so that Close's sw clean, which
// quiesces before it flushes, finds it there. ErrClosed if the device is closing, the txreq's
// ErrInvalid if it cannot be sent; src is unchanged then.
func (e *Engine) flushFront(w *IOWait, src *txSource) error {
	e.inflight.Add(1)
	defer e.inflight.Add(-1)
	if e.gate.Load()&(gateDraining|gateDown) != 0 {
		return e.refuseClosed(src.front())
	}
	if err := e.claim(src.front()); err != nil {
		return err
	}
	tx := src.pop()
	tx.wait = w
	if w != nil {
		w.busy.Add(1)
	}
	e.flushMu.Lock()
	e.flush.PushBack(tx)
	e.flushMu.Unlock()
	e.pending.Or(pendFlush)
	e.ringBell()
	return nil
}

// SendWait submits tx, waiting for room in the ring until ctx is done: the blocking send for Go
// callers, built on the iowait protocol (the waiter parks on the engine's wait list and the
// completion pass wakes it). It returns nil once tx is in flight, ctx's error if ctx ended first
// (tx is then still the caller's), and Send's other errors (ErrInvalid, ErrNotRunning,
// ErrClosed) as they are; a nil ctx is ErrInvalid (tx not sent). On a Manual engine or one with CompletePoll, SendWait drives the
// engine itself while it waits (Process and Poll). The fast path does not allocate.
func (e *Engine) SendWait(ctx context.Context, tx *TxReq) error {
	if ctx == nil {
		return errNilContext("SendWait")
	}
	var bw *blockWaiter
	var host uint64 // the registration as a host (host.go) while SendWait drives e or gives back a wakeup
	defer func() {
		if bw != nil {
			blockWaiters.Put(bw)
		}
		if host != 0 {
			e.hosts.remove(host)
		}
	}()
	for {
		seq := e.ring.HeadSeq() // before Send reads the room: any pass after it shows as progress
		err := e.Send(nil, tx, true)
		if err != ErrBusy {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if host == 0 {
			host = e.hosts.add(hostHead) // the passes below run callbacks on this goroutine
		}
		if e.selfDriven() {
			if e.drive() == 0 {
				runtime.Gosched()
			}
			continue
		}
		if bw == nil {
			bw = blockWaiters.Get().(*blockWaiter)
		}
		if err := e.parkBlocking(ctx, bw, tx, seq); err != nil {
			return err
		}
	}
}

// selfDriven reports whether nothing but the caller makes this engine progress.
func (e *Engine) selfDriven() bool { return e.manual || e.mode == CompletePoll }

// drive runs what a self-driven engine needs: a hardware pass if manual, a completion pass if
// polled. It returns the txreqs completed plus the packets processed.
func (e *Engine) drive() int {
	n := 0
	if e.manual {
		n, _ = e.Process()
	}
	if e.mode == CompletePoll {
		n += e.Poll()
	}
	return n
}

// driveHosted is drive with the caller registered as e's host (host.go) while the passes run
// (Shutdown's drain).
func (e *Engine) driveHosted() int {
	defer e.hosts.remove(e.hosts.add(hostHead))
	return e.drive()
}

// idleForShutdown reports whether the engine holds nothing more that it will send: ring and
// flush list empty, or the engine frozen (s80_hw_freeze, after FreezeNotify or a link down: the
// hardware model consumes nothing until an unfreeze, so the ring cannot drain, and the flush
// list waits for the sw clean behind it, see flushDeferred; Close aborts both), down (s00, after
// Stop: its sw clean emptied the ring, unless a callback's runtime.Goexit cut it short, and
// nothing but Start or Close cleans it then), or halted by a runtime.Goexit (hwGone,
// exitHalted: it waits for Stop or Close, and nothing else drains it).
func (e *Engine) idleForShutdown() bool {
	if st := e.state(); e.hwGone.Load() || e.exitHalted.Load() || st == sm.S80HwFreeze || st == sm.S00HwDown {
		return true
	}
	if !e.ring.Empty() {
		return false
	}
	e.flushMu.Lock()
	n := e.flush.Len()
	e.flushMu.Unlock()
	return n == 0
}

// stopAccepting sets a life-cycle bit of the gate (gateDraining or gateDown): from then on
// Send refuses with ErrClosed.
func (e *Engine) stopAccepting(bit int32) { e.gate.Or(bit) }

// stopGoroutine stops the hardware goroutine, if any, and waits for it to return.
func (e *Engine) stopGoroutine() {
	if e.stopping.Swap(true) {
		if e.done != nil {
			<-e.done
		}
		return
	}
	close(e.stopCh)
	if e.done != nil {
		<-e.done
	}
}

// Stats returns a snapshot of the engine's counters. Each counter is read atomically; the
// snapshot as a whole is not (counters may move between reads).
func (e *Engine) Stats() EngineStats { return e.snapshot() }
