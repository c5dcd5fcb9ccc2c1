package usdma

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/goid"
	"github.com/gosdma/gosdma/sdma"
)

// IOWaitTimeout is how long a deferred Submit waits for its queue to be activated before it
// tries again (hfi1: SDMA_IOWAIT_TIMEOUT, 1000 ms).
const IOWaitTimeout = time.Second

// DefaultPinLimit is the pin cache's default limit, in pages: 256 MiB of dma.PageSize pages
// (hfi1: user_pages.c's cache_size module parameter, "Send and receive side cache size limit
// (in MB)", 256 by default, which hfi1_can_pin_pages turns into cache_limit_pages =
// cache_size * 1024 * 1024 / PAGE_SIZE). Config.PinLimit 0 picks it.
const DefaultPinLimit = 256 << 20 / dma.PageSize

// NoPinLimit, as Config.PinLimit, lets the pin cache keep every vector pinned until it is
// invalidated or the queue closes (the kernel has no such setting: its cache_size is a number
// of MB, checked on every pin).
const NoPinLimit = -1

// QState is a packet queue's send state (hfi1: enum pkt_q_sdma_state).
type QState uint32

const (
	Active   QState = iota // SDMA_PKT_Q_ACTIVE: sending
	Deferred               // SDMA_PKT_Q_DEFERRED: parked on an engine's wait list for ring room
)

// qDeferring is the state word while deferPacketQueue's sleep has not decided to park (State:
// ACTIVE, as the kernel's pq->state until its xchg after sdma_progress).
const qDeferring = uint32(Deferred) + 1

// String names the state; a value no constant names reads as QState(n).
func (s QState) String() string {
	switch s {
	case Active:
		return "ACTIVE"
	case Deferred:
		return "DEFERRED"
	}
	return "QState(" + utoa(uint64(s)) + ")"
}

// errZeroPktQ refuses a call of the zero PktQ, which has no slots, device or close token.
func errZeroPktQ(op string) error {
	return fmt.Errorf("usdma: %s: the zero PktQ, not made by New: %w", op, ErrInvalid)
}

// TxReq is the packet queue's txreq (hfi1: struct user_sdma_txreq): sdma.TxReq first, then the
// packet's own header (the copy the engine reads, "because the HW needs a cacheline-aligned
// address") and its place in its request. Config.Alloc hands them out.
type TxReq struct {
	sdma.TxReq
	hdr    Header
	req    *request
	seqnum uint16
	flags  uint8
}

// txreq flags (hfi1: TXREQ_FLAGS_*).
const (
	txReqAck       = 1 << 0 // TXREQ_FLAGS_REQ_ACK: set BTH.A (the request's last packet)
	txReqDisableSH = 1 << 1 // TXREQ_FLAGS_REQ_DISABLE_SH: no header suppression (used by EXPECTED only)
)

// Config configures a packet queue. Device is required; every other zero value picks the
// kernel's default, but for two capabilities of the kernel's cap_mask, whose default
// (HFI1_CAP_MASK_DEFAULT) gives user contexts no AHG and 31-bit PSNs: the zero Config uses the
// engine's AHG (DisableAHG) and 24-bit PSNs (ExtendedPSN).
type Config struct {
	// Device is the SDMA device the queue sends on, made by sdma.NewDevice (a zero sdma.Device
	// is refused).
	Device *sdma.Device
	// Slots is the number of request slots and completion entries (hfi1_sdma_comp_ring_size),
	// 1..65536; 0 means 128.
	Slots int
	// Ctxt and Subctxt name the queue's context; they feed the engine selector as in the kernel.
	Ctxt, Subctxt uint16
	// Alloc is the queue's txreq allocator (the kernel's per-queue kmem_cache): any of package
	// alloc's. nil means a Slab of 256-object slabs; a nil pointer in a non-nil interface is
	// refused. Allocators must not reset objects by assignment (a TxReq must not be copied once
	// initialised): use no reset hook. A bounded allocator (an alloc.List, a Slab with MaxSlabs)
	// may hold fewer txreqs than a request has packets: Submit waits for the queue's packets in
	// flight to give theirs back, and fails with ErrNoMem only when none is in flight.
	Alloc alloc.Allocator[TxReq]
	// MTU bounds the fragment size, 64..10240; 0 means 10240.
	MTU int
	// NumVLs is the number of operational VLs (vls_operational) a header's VL must be below,
	// 1..Device.NumVLs(); 0 means Device.NumVLs(), the VLs the device maps to engines (the
	// kernel checks the port's vls_operational, which its engine map is built for too).
	NumVLs int
	// DisableAHG sends every packet with a full header (the kernel without HFI1_CAP_SDMA_AHG in
	// the user capabilities, as its default cap_mask has it).
	DisableAHG bool
	// ExtendedPSN makes BTH.PSN 31 bits wide instead of 24 (HFI1_CAP_EXTENDED_PSN, which the
	// kernel's default cap_mask sets).
	ExtendedPSN bool
	// DisableStaticRate zeroes the template's PBC.StaticRateControl (pbc[2]) in every packet
	// (hfi1: "if (!HFI1_CAP_IS_USET(STATIC_RATE_CTRL)) req->hdr.pbc[2] = 0;", the kernel without
	// HFI1_CAP_STATIC_RATE_CTRL in the user capabilities). By default the field is sent as the
	// template has it, as the kernel's default cap_mask (which sets that capability) does.
	DisableStaticRate bool
	// PinLimit caps the pages the pin cache keeps pinned (hfi1_can_pin_pages): a vector that
	// would take the pinned pages past it (pinned + new > PinLimit) first evicts the least
	// recently used vectors no request holds, at least the new vector's page count at a time
	// (sdma_cache_evict's target), and is pinned anyway if that does not make room (the pin
	// goes over the limit, PinStats.OverLimit). 0 means DefaultPinLimit (the kernel's
	// cache_size, 256 MB); NoPinLimit means no limit; other negative values are refused.
	PinLimit int
	// Timeout is how long a deferred Submit waits for room before it tries again
	// (SDMA_IOWAIT_TIMEOUT); 0 means IOWaitTimeout.
	Timeout time.Duration
	// Engine, if set, carries every request of the queue; nil picks the engine per request from
	// the destination LID, the context and the VL, as the kernel does.
	Engine *sdma.Engine
	// Done, if set, is told once when a request ends, with its slot and the entry it ends with:
	// a push notification for Go callers beside the polled ring and Wait. It runs on the
	// completion pass (or in Submit, for a request that ends there) and must not block. It runs
	// before the end is visible: the entry is written, the slot freed for a new request, Wait
	// returns and Close finishes only after Done returned (so, from inside it, Comp still reads
	// the slot QUEUED and Wait on it waits). A Submit on the slot from another goroutine while
	// Done runs (a producer that Done handed the slot to) waits, yielding, until Done has
	// returned and the end is visible, then claims the slot; one from inside Done (on its
	// goroutine) is ErrSlotInUse at once, as it would wait for itself. A Submit on a slot whose
	// request is in flight, its Done not running, is ErrSlotInUse at once. Done's goroutine is
	// told apart by its runtime g (internal/goid), one load per request end; on builds without
	// it (purego, 386, ...) by its goroutine id, a runtime.Stack read: microseconds per request
	// end. A Done that panics still ends the request. A Done that runs inside a Submit (a
	// request that ends there) runs once that Submit is done sending, without the queue's send
	// lock: a Submit on another slot from it is accepted or refused as any other (if it has
	// to wait for ring room or txreqs it blocks, and a Done on the completion pass that blocks
	// holds up the completions it waits for). A Close of the queue from inside Done is
	// ErrInvalid at once, the queue left open: it would wait for Done's own request to end.
	Done func(slot int, e CompEntry)
}

// PktQ is a user SDMA packet queue (hfi1: struct hfi1_user_sdma_pkt_q with its
// hfi1_user_sdma_comp_q): it sends whole messages as requests of up to 8 data vectors, split
// into packets whose headers the engine's AHG builds from the first, tracks each request in a
// slot of its completion ring, and keeps the vectors pinned across requests.
//
// A PktQ is safe for concurrent use. Submits are serialised (one request is sent at a time, as
// the kernel's process_request blocks its caller until its packets are in the ring); Comp, Wait,
// Stats and Invalidate may run alongside.
//
// Make one with New. The zero PktQ has no slots: Submit, Wait and Close refuse it with an error
// matching ErrInvalid that says so, and its getters answer as an empty queue's (Slots 0, every
// Comp Free).
type PktQ struct {
	// Read-only after New.
	dev      *sdma.Device
	alloc    alloc.Allocator[TxReq]
	outer    func(*sdma.TxReq) *TxReq
	ctxt     uint16
	subctxt  uint16
	mtu      int
	numVLs   int
	ahg      bool
	keepRate bool // !Config.DisableStaticRate: pbc[2] is sent as the template has it
	psnMask  uint32
	timeout  time.Duration
	engine   *sdma.Engine                // Config.Engine
	onDone   func(slot int, e CompEntry) // Config.Done
	comps    []compEntry                 // the completion ring; see compEntry for its memory ordering
	reqs     []request                   // one per slot
	pins     pinCache
	activeCh chan struct{} // cap 1: activate's signal to a deferred Submit

	// busy is the queue's iowait (hfi1: pq->busy), embedded as seed 000 asks. Its sleep is
	// deferPacketQueue and its wakeup activate.
	busy sdma.IOWait
	// state is ACTIVE, DEFERRED or qDeferring (hfi1: pq->state, written with xchg). Written by
	// deferPacketQueue (qDeferring before the engine's progress check; then DEFERRED by a CAS
	// from qDeferring once parked, or ACTIVE), activate (ACTIVE, on the completion pass) and
	// Submit (ACTIVE); read by Submit while it waits and by State.
	state atomic.Uint32

	// sendMu serialises Submit (the sending side of the queue); Close takes it once, after it set
	// closed, to wait for the Submit in progress. No Config.Done runs under it: a request that
	// ends in its Submit ends after Submit released it.
	sendMu sync.Mutex
	closed atomic.Bool // set by Close (before it takes sendMu); read by Submit (under sendMu)
	// closeMu serialises Close (its waits, the pin cache's final unpinning): a token (cap 1)
	// that Close sends to take and receives to give back, so that a Close behind another one
	// gives up when its context ends. Taken before sendMu, never under it. Made by New.
	closeMu chan struct{}

	// getCtx is Alloc's waiting Get (alloc.List.GetCtx) when its Traits say CanWait, else nil.
	// Read-only after New.
	getCtx interface {
		GetCtx(context.Context) (*TxReq, error)
	}
	// txWait is the Submit waiting for a txreq (waitTx), nil when none waits. Stored by the
	// submitter (under sendMu) before it looks at the allocator and the closed flag; loaded, to
	// wake it, by Complete after its Put and by Close after it set closed: store-then-look
	// against change-then-load, sequentially consistent atomics, so no wakeup is lost. (The
	// drain of busy's count wakes it through busy.Drain.)
	txWait atomic.Pointer[txWaiter]
	// spare is the txreq waitTx got, for a packet built when the allocator is empty; Submit puts
	// it back if none was. The submitter's (under sendMu).
	spare *TxReq

	// compMu guards slot ownership (request.inUse), the slot's final state write with its
	// release, and the waiters; it is a leaf lock, taken on the completion pass when a request
	// ends.
	compMu sync.Mutex
	nreqs  int           // requests not ended (hfi1: pq->n_reqs); guarded by compMu
	idle   chan struct{} // closed when nreqs drops to 0 while Close waits; guarded by compMu

	stats counters

	// test holds the test hooks; nil outside in-package tests, which set it before use. One
	// pointer, so the hooks cost production one word and one load.
	test *pqTestHooks
}

// pqTestHooks are the in-package tests' seams into a PktQ.
type pqTestHooks struct {
	// onEnd, if set, is called once per request end with the state written, under compMu,
	// before the waiters are woken.
	onEnd func(slot int, st CompState)
	// onSend, if set, is called by every SendList of a request pass with the number of packets
	// on the list.
	onSend func(n int)
	// deferWindow, if set, is called by deferPacketQueue on entering the sleep, before the
	// engine's progress check (DeferOrRetry).
	deferWindow func()
	// deferred, if set, is called by deferPacketQueue each time the sleep parked the queue on
	// the engine's wait list (DEFERRED, unless its wakeup came first; the deferral counted), on
	// the submitter's goroutine before it waits: a test waits for it instead of polling State.
	deferred func()
	// compWindow, if set, is called by Comp between its load of the entry's status and its
	// load of the errcode.
	compWindow func()
	// endWait, if set, is called by Submit each time it yields waiting for the end of slot's
	// request, whose Done runs on another goroutine (awaitEnd).
	endWait func(slot int)
	// closeIdle, if set, is called by Close once no Submit can run any more, before it waits
	// for the queue's requests to end.
	closeIdle func()
	// closeWait, if set, is called by Close once it found cached vectors whose registrations
	// something else still uses, before it waits for them.
	closeWait func()
}

// counters are the queue's statistics, each an atomic counter written where the event
// happens and read by Stats.
type counters struct {
	requests, completed, failed, packets, ahgPackets, fullHeaders, ahgFallbacks, deferrals, timeouts atomic.Uint64
}

// Stats is a snapshot of a queue's counters.
type Stats struct {
	Requests     uint64 // requests accepted (set QUEUED)
	Completed    uint64 // requests that ended COMPLETE
	Failed       uint64 // requests that ended ERROR
	Packets      uint64 // packets handed to the engine
	AHGPackets   uint64 // of which built by the engine's AHG (USE_AHG)
	FullHeaders  uint64 // of which carried a full header (AHG_COPY first packets included)
	AHGFallbacks uint64 // multi-packet requests sent with full headers because no AHG entry was free
	Deferrals    uint64 // times the queue was parked on an engine's wait list (DEFERRED)
	Timeouts     uint64 // deferred waits that ran out the timeout and retried
	// Pins are the counters of the queue's pinned-page cache (hfi1: mmu_rb.c and
	// pin_vector_pages): hits, new pins, evictions, and the pages pinned now.
	Pins PinStats
}

// New returns a packet queue on cfg.Device (hfi1: hfi1_user_sdma_alloc_queues). A bad field is
// ErrInvalid naming it; nothing is allocated then.
func New(cfg Config) (*PktQ, error) {
	bad := func(reason string) (*PktQ, error) {
		return nil, &ReqError{Slot: -1, Reason: reason, Err: ErrInvalid, config: true}
	}
	switch {
	case cfg.Device == nil:
		return bad("Device is nil")
	case cfg.Device.NumEngines() == 0:
		// The zero sdma.Device: no engines, no VLs; every Submit would be refused for its
		// header's VL ("VL must be below 0"), and a Config.Engine of it is nil.
		return bad("Device is the zero sdma.Device, not made by sdma.NewDevice")
	case cfg.Engine != nil && cfg.Engine.Device() != cfg.Device:
		return bad("Engine is not one of Device's")
	case cfg.Slots < 0 || cfg.Slots > 1<<16:
		return bad("Slots " + itoa(cfg.Slots) + " out of 1..65536")
	case cfg.MTU != 0 && (cfg.MTU < PIOBlockSize || cfg.MTU > DefaultMTU):
		return bad("MTU " + itoa(cfg.MTU) + " out of 64..10240")
	case cfg.NumVLs < 0 || cfg.NumVLs > cfg.Device.NumVLs():
		return bad("NumVLs " + itoa(cfg.NumVLs) + " out of 1.." + itoa(cfg.Device.NumVLs()) + " (the device's VLs)")
	case cfg.PinLimit < NoPinLimit:
		return bad("PinLimit " + itoa(cfg.PinLimit) + " is negative and not NoPinLimit (-1)")
	case cfg.Timeout < 0:
		return bad("Timeout " + cfg.Timeout.String() + " is negative")
	case cfg.Alloc != nil && reflect.ValueOf(cfg.Alloc).Kind() == reflect.Pointer && reflect.ValueOf(cfg.Alloc).IsNil():
		return bad("Alloc is a nil pointer in a non-nil interface (use a nil Alloc for the default Slab)")
	}
	pq := &PktQ{
		dev:      cfg.Device,
		alloc:    cfg.Alloc,
		outer:    alloc.OuterFunc[TxReq, sdma.TxReq](),
		ctxt:     cfg.Ctxt,
		subctxt:  cfg.Subctxt,
		mtu:      or(cfg.MTU, DefaultMTU),
		numVLs:   or(cfg.NumVLs, cfg.Device.NumVLs()),
		ahg:      !cfg.DisableAHG,
		keepRate: !cfg.DisableStaticRate,
		psnMask:  psnMask,
		timeout:  cfg.Timeout,
		activeCh: make(chan struct{}, 1),
		closeMu:  make(chan struct{}, 1),
		engine:   cfg.Engine,
		onDone:   cfg.Done,
	}
	if cfg.ExtendedPSN {
		pq.psnMask = psnMaskExt
	}
	if pq.timeout == 0 {
		pq.timeout = IOWaitTimeout
	}
	if pq.alloc == nil {
		slab, err := alloc.NewSlab(alloc.SlabConfig[TxReq]{ObjectsPerSlab: 256})
		if err != nil {
			return nil, err
		}
		pq.alloc = slab
	}
	n := or(cfg.Slots, DefaultSlots)
	pq.comps = make([]compEntry, n)
	pq.reqs = make([]request, n)
	for i := range pq.reqs {
		pq.reqs[i].pq = pq
		pq.reqs[i].slot = i
	}
	pq.pins = pinCache{dev: cfg.Device, limit: or(cfg.PinLimit, DefaultPinLimit), nodes: make(map[uintptr]*pinNode)}
	if g, ok := pq.alloc.(interface {
		GetCtx(context.Context) (*TxReq, error)
	}); ok && pq.alloc.Traits().CanWait {
		pq.getCtx = g
	}
	pq.busy.Init(pq.deferPacketQueue, pq.activate, nil)
	return pq, nil
}

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// State returns the queue's send state.
func (pq *PktQ) State() QState {
	if s := pq.state.Load(); s == uint32(Deferred) {
		return Deferred
	}
	return Active // ACTIVE, or deferring: not parked yet
}

// Stats returns a snapshot of the queue's counters.
func (pq *PktQ) Stats() Stats {
	s := &pq.stats
	return Stats{
		Requests: s.requests.Load(), Completed: s.completed.Load(), Failed: s.failed.Load(),
		Packets: s.packets.Load(), AHGPackets: s.ahgPackets.Load(), FullHeaders: s.fullHeaders.Load(),
		AHGFallbacks: s.ahgFallbacks.Load(), Deferrals: s.deferrals.Load(), Timeouts: s.timeouts.Load(),
		Pins: pq.pins.snapshot(),
	}
}

// Invalidate tells the queue that the memory of buf is going away (munmap, free, reuse for
// something else): every pinned vector overlapping it is dropped from the pin cache (hfi1: the
// MMU notifier's invalidate). A vector that requests in flight still use stays mapped until
// the last of them ends, so the engine never reads unmapped memory, but it leaves the cache at
// once: a later vector at its address is pinned anew. (The kernel's sdma_rb_invalidate keeps a
// node a request holds in the tree, refcount > 0, so that a later vector at the same address
// and length reuses the pages pinned before the memory went away; TestPinCacheInvalidateInFlight
// checks the difference.) It returns the number of cached vectors dropped.
func (pq *PktQ) Invalidate(buf []byte) int {
	if len(buf) == 0 {
		return 0
	}
	return pq.pins.invalidate(addrOf(buf), len(buf))
}

// deferPacketQueue is the queue's sleep callback (hfi1: defer_packet_queue): unless the ring
// made progress meanwhile, the queue parks on the engine's wait list, with the txreq left at the
// head of the request's list, and becomes DEFERRED. sdma's DeferOrRetry holds the wait lock
// across its progress check and the queueing (the 2019 sleep-window fix).
//
// The kernel sets DEFERRED under the wait lock after sdma_progress said park, and
// sdma_send_txlist holds tail_lock across the sleep, so no halt comes between: a queue seen
// DEFERRED is parked (or was woken, ACTIVE again), and a halt after that wakes it only after the
// flush completed the ring's txreqs aborted (has_error, -EFAULT). DeferOrRetry does the check and
// the queueing inside sdma, with no halt excluded meanwhile (a halt there is one before the send:
// the retry finds the engine stopped, -ECOMM, or the recovered ring). So the state goes
// deferring (State reports ACTIVE) before the check, and DEFERRED only once DeferOrRetry parked
// the queue: by a CompareAndSwap from deferring, which fails if the queue's wakeup (activate,
// ACTIVE) came between the queueing and the swap, so that no wakeup is lost.
func (pq *PktQ) deferPacketQueue(e *sdma.Engine, w *sdma.IOWait, tx *sdma.TxReq, seq uint32, pktsSent bool) error {
	pq.state.Store(qDeferring)
	if pq.test != nil && pq.test.deferWindow != nil {
		pq.test.deferWindow()
	}
	err := e.DeferOrRetry(w, tx, seq, pktsSent)
	if errors.Is(err, sdma.ErrBusy) {
		pq.state.CompareAndSwap(qDeferring, uint32(Deferred))
		pq.stats.deferrals.Add(1)
		if pq.test != nil && pq.test.deferred != nil {
			pq.test.deferred()
		}
	} else {
		pq.state.Store(uint32(Active)) // retry (or a sleeper's error): not parked
	}
	return err
}

// activate is the queue's wakeup (hfi1: activate_packet_queue): ACTIVE, and wake the sender.
// It runs on the completion pass and does not block.
func (pq *PktQ) activate(*sdma.IOWait, int) {
	pq.state.Store(uint32(Active))
	select {
	case pq.activeCh <- struct{}{}:
	default:
	}
}

// waitActive waits until the queue is ACTIVE again, the timeout passes (hfi1:
// wait_event_interruptible_timeout on pq->busy.wait_dma), or ctx ends; in the last two cases the
// queue's iowait leaves the wait list it was parked on (flush_pq_iowait).
func (pq *PktQ) waitActive(ctx context.Context, t *time.Timer) error {
	t.Reset(pq.timeout)
	defer t.Stop()
	for pq.State() != Active {
		select {
		case <-pq.activeCh:
		case <-t.C:
			pq.stats.timeouts.Add(1)
			// hfi1: flush_pq_iowait: off the wait list, so that the retry, finding no room,
			// queues the queue anew (its starved count grown, at the list's head), on the engine
			// it then sends to.
			pq.unqueue()
			return nil // try again; the engine's answer decides
		case <-ctx.Done():
			pq.unqueue()
			return ctx.Err()
		}
	}
	return nil
}

// unqueue takes the queue off the wait list it is parked on (hfi1: flush_pq_iowait) and, as it
// is parked nowhere then, makes it ACTIVE: State shows DEFERRED only while the queue is parked
// (the kernel's pq->state stays DEFERRED, but nothing reads it until the next sleep sets it
// again). Only the submitter parks the queue, so none parks it between the two; a wakeup that
// came first made it ACTIVE already.
func (pq *PktQ) unqueue() {
	pq.busy.Unqueue()
	pq.state.CompareAndSwap(uint32(Deferred), uint32(Active))
}

// txWaiter is one waitTx round's wakeup.
type txWaiter struct {
	ch     chan struct{}      // cap 1: a txreq came back
	cancel context.CancelFunc // ends the round's wait: nothing is in flight any more, or the queue closed
}

// wake wakes the waiter: a txreq came back, or, with stop, the wait must end (a GetCtx wait
// too). It does not block.
func (w *txWaiter) wake(stop bool) {
	select {
	case w.ch <- struct{}{}:
	default:
	}
	if stop {
		w.cancel()
	}
}

// waitTx waits until the queue's allocator has a txreq for the next packet and keeps it in
// pq.spare (hfi1: kmem_cache_alloc(GFP_KERNEL) in user_sdma_send_pkts sleeps for memory rather
// than fail). It waits while the queue has packets in flight, whose txreqs come back as they
// complete: with GetCtx when the allocator can wait (a Put by anyone wakes it), else for the
// queue's next completion. It fails with ErrNoMem once nothing is in flight that could bring one
// back, with ErrClosed if the queue closes, with ctx's error if ctx ends first.
func (pq *PktQ) waitTx(ctx context.Context, r *request) error {
	for {
		if tx, err := pq.waitTxRound(ctx, r); tx != nil || err != nil {
			pq.spare = tx
			return err
		}
	}
}

// waitTxRound is one round of waitTx: it publishes the round's waiter and takes a txreq (takeTx).
// The round's context is cancelled as the round ends, also when the allocator's GetCtx panics (or
// calls runtime.Goexit) in it: the goroutine the round started to watch for the drain ends then,
// not once the queue's packets in flight complete.
func (pq *PktQ) waitTxRound(ctx context.Context, r *request) (*TxReq, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &txWaiter{ch: make(chan struct{}, 1), cancel: cancel}
	pq.txWait.Store(w)
	defer pq.txWait.Store(nil)
	return pq.takeTx(ctx, wctx, w, r)
}

// takeTx is one round of waitTx, with w published: a txreq, an error, or neither (look again).
func (pq *PktQ) takeTx(ctx, wctx context.Context, w *txWaiter, r *request) (*TxReq, error) {
	// The count first: one read as 0 before an empty Get means no txreq of the queue can come
	// back (a completion puts its txreq back before the count drops).
	inFlight := pq.busy.Busy()
	tx, err := pq.alloc.Get()
	switch {
	case err == nil:
		return tx, nil
	case !errors.Is(err, alloc.ErrEmpty):
		return nil, noTx(r.slot, err.Error(), err)
	case pq.closed.Load():
		return nil, ErrClosed
	case inFlight == 0:
		return nil, noTx(r.slot, "the allocator is empty and no packet of the queue is in flight to give one back", err)
	}
	// The iowait's drain (hfi1: iowait_drain_wakeup) ends the round when the last packet in
	// flight completed, so that an empty allocator is then looked at once more, and refused.
	// On a goroutine of the round's own, gone with it: the completion pass pays nothing.
	go func() {
		if pq.busy.Drain(wctx) == nil {
			w.wake(true)
		}
	}()
	if pq.getCtx != nil {
		tx, err = pq.getCtx.GetCtx(wctx)
		switch {
		case err == nil:
			return tx, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case wctx.Err() != nil:
			return nil, nil // drained or closed: look again
		}
		return nil, noTx(r.slot, err.Error(), err)
	}
	select {
	case <-w.ch:
		return nil, nil
	case <-wctx.Done():
		return nil, ctx.Err() // nil unless ctx ended: drained or closed, look again
	}
}

// Close shuts the queue (hfi1: hfi1_user_sdma_free_queues): new Submits get ErrClosed (also one
// from a Config.Done that Close waits for), a Submit in progress finishes, Close waits until
// every packet in flight completed and every request ended (its slot COMPLETE or ERROR), then
// unpins every cached vector, waiting for a vector's registration that txreqs other than the
// queue's still use (Stats and Invalidate run meanwhile: the wait is made without the pin
// cache's lock). Closes are serialised. It returns ctx's error if ctx ends first, also while it
// waits for another Close (the queue is closed to new requests
// either way; call Close again to finish the wait). Packets in flight complete only as the engine runs them: close the device to
// abort them instead. A nil ctx is ErrInvalid, and the queue stays open; so is a Close from
// inside a Config.Done of the queue, which would wait for that Done's own request to end (hand
// it to another goroutine). A Close inside a pass of an engine on which a request of the queue
// has not ended (from another queue's Config.Done that the pass runs, or a Sink) would wait for
// the rest of that pass: it is ErrInvalid too (sdma.Engine.InPass), the queue then closed to new
// requests as when ctx ends (call Close again from another goroutine). So is a Close inside a
// pass of any engine of the device while a cached vector's registration is still used by other
// txreqs; the registration is kept for the next Close. That refusal is per device, not per
// engine: a registration's uses are counted per P (dma.Registration), not per txreq or engine,
// so Close cannot tell whether the pass it is in is the one that would clean them, and it refuses
// also a Close that would not hang: one whose other uses are all held by txreqs on other engines
// than the pass's (their own completions clean them) or by txreqs built and not sent (their
// owners' Clean ends them). Telling them apart would cost the packet path a write per add (the
// use's engine). Both refusals are made at once also while another Close of the queue waits
// (whose wait may be the one that needs the pass); there the registration refusal is made on what
// that Close may come to wait for, whether or not other txreqs use it now: a cached vector that
// holds a registration, a registration kept by an earlier Close, or a vector dropped from the
// cache that a request of the queue still holds. Where the build has no getg (purego, other
// ports), InPass may answer true outside that pass (its doc says when: the caller in a pass of
// another Manual engine while another goroutine holds the request's): such a Close is refused too.
func (pq *PktQ) Close(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("usdma: Close: nil context: %w", ErrInvalid) // the queue stays open
	}
	if pq.closeMu == nil {
		return errZeroPktQ("Close") // its nil close token would block Close for ever
	}
	if pq.inDone() {
		// Close would wait for the end of the request whose Done runs on this goroutine, which
		// comes only once Done returned (as sdma refuses a Close from its own callbacks).
		return fmt.Errorf("usdma: Close: called from inside a Config.Done, it would wait for that Done's own request to end (hand the Close to another goroutine): %w", ErrInvalid)
	}
	pq.closed.Store(true)
	pq.activate(nil, 0) // a deferred Submit stops waiting and sees the close
	if w := pq.txWait.Load(); w != nil {
		w.wake(true) // and so does one waiting for a txreq
	}
	select {
	case pq.closeMu <- struct{}{}: // free: taken whatever ctx (a select of two ready cases picks at random)
	default:
		if err := pq.inPassBehindClose(); err != nil {
			return err
		}
		select { // another Close's wait may last: this one is bounded by its own ctx
		case pq.closeMu <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-pq.closeMu }()
	// The Submit in progress, if any, finishes, and every later one finds the queue closed (it
	// looks under sendMu): no Submit runs from here on. The lock is not held across the waits
	// below: a Submit from a Config.Done, which they wait for, is then ErrClosed at once rather
	// than a wait for the lock that Done's return would end.
	pq.sendMu.Lock()
	//lint:ignore SA2001 a barrier: see above
	pq.sendMu.Unlock()
	if pq.test != nil && pq.test.closeIdle != nil {
		pq.test.closeIdle()
	}
	if err := pq.inPassOfRequest(); err != nil {
		return err
	}
	pq.busy.Unqueue()                          // hfi1_user_sdma_free_queues' flush_pq_iowait: nothing is left parked
	if err := pq.busy.Drain(ctx); err != nil { // hfi1: iowait_sdma_drain
		return err
	}
	pq.compMu.Lock()
	var idle chan struct{}
	if pq.nreqs > 0 {
		if pq.idle == nil {
			pq.idle = make(chan struct{})
		}
		idle = pq.idle
	}
	pq.compMu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The wait for registrations something else still uses is made without the cache's lock:
	// Stats and Invalidate run meanwhile.
	stuck := pq.pins.invalidateAll()
	if len(stuck) > 0 && pq.inAnyPass() {
		// The uses are other txreqs', on any engine: one this pass completes is cleaned only
		// after the caller returned. Those gone already are deregistered; the rest are kept for
		// the next Close.
		if err := pq.pins.drainStuck(canceled, stuck); err != nil {
			return errRegInPass("a cached vector's registration is still used by other txreqs")
		}
		return nil
	}
	if pq.test != nil && pq.test.closeWait != nil && len(stuck) > 0 {
		pq.test.closeWait()
	}
	return pq.pins.drainStuck(ctx, stuck)
}

// inPassBehindClose refuses a Close that would wait behind another Close (ErrInvalid) when that
// Close may wait for the rest of a pass the caller is in: for a request of the queue on its
// engine (inPassOfRequest, after the barrier on sendMu: no Submit runs any more), or, inside a
// pass of any engine of the device, for a registration that other txreqs use (pinCache.mayWait).
func (pq *PktQ) inPassBehindClose() error {
	pq.sendMu.Lock()
	//lint:ignore SA2001 a barrier: see Close
	pq.sendMu.Unlock()
	if err := pq.inPassOfRequest(); err != nil {
		return err
	}
	if pq.pins.mayWait() && pq.inAnyPass() {
		return errRegInPass("another Close of the queue may wait for a cached vector's registration that other txreqs use")
	}
	return nil
}

// errRegInPass is Close's refusal inside a pass of an engine of the device while what names a
// wait for a registration's uses.
func errRegInPass(what string) error {
	return fmt.Errorf("usdma: Close: called inside a pass of an engine of the device (from a Sink or callback it runs: another queue's Config.Done, say) while %s, which that pass may be the one to complete: it would wait for itself (the queue is closed to new requests; Close again from another goroutine): %w", what, ErrInvalid)
}

// inAnyPass reports whether the caller runs inside a pass of an engine of the queue's device
// (sdma.Engine.InPass): a registration's uses do not say which engine their txreqs are on (they
// are per-P counts, dma.Registration, one add per packet piece), nor whether they are on one at
// all (built and not sent), so the refusal it decides is per device: also where the pass's engine
// holds none of them and the wait would end without it (see Close). Close only, when a
// registration is still in use or may be.
func (pq *PktQ) inAnyPass() bool {
	for i := range pq.dev.NumEngines() {
		if pq.dev.Engine(i).InPass() {
			return true
		}
	}
	return false
}

// inPassOfRequest refuses Close (ErrInvalid) when the caller runs inside a pass of an engine
// (sdma.Engine.InPass: a Config.Done of another queue, say, that its completion pass runs) on
// which a request of the queue has not ended: the waits below would wait for completions that
// only the rest of that pass brings. No Submit runs any more (Close's barrier on sendMu), so the
// requests looked at are all the queue will have; each engine is asked once. Close only.
func (pq *PktQ) inPassOfRequest() error {
	var asked [4]*sdma.Engine
	n := 0
	for i := range pq.reqs {
		r := &pq.reqs[i]
		pq.compMu.Lock()
		eng := r.eng
		if !r.inUse {
			eng = nil
		}
		pq.compMu.Unlock()
		if eng == nil || slices.Contains(asked[:n], eng) {
			continue
		}
		if n < len(asked) {
			asked[n] = eng
			n++
		}
		if eng.InPass() {
			return fmt.Errorf("usdma: Close: called inside a pass of engine %d (from a Sink or callback it runs: another queue's Config.Done, say), which the request in slot %d waits for: it would wait for itself (the queue is closed to new requests; Close again from another goroutine): %w", eng.Index(), r.slot, ErrInvalid)
		}
	}
	return nil
}

// inDone reports whether the calling goroutine runs a Config.Done of the queue (a slot's doneG is
// its own: end stores it before Done runs, publishEnd clears it before that goroutine goes on,
// so no other goroutine's g or id is seen equal). One load per slot, and the caller's g or id
// only if some Done runs: Close only.
func (pq *PktQ) inDone() bool {
	if pq.onDone == nil {
		return false
	}
	var self uint64
	for i := range pq.reqs {
		g := pq.reqs[i].doneG.Load()
		if g == 0 {
			continue // no Done runs for this slot (and 0 is no goroutine's)
		}
		if self == 0 {
			self = goid.Self()
		}
		if g == self {
			return true
		}
	}
	return false
}
