package usdma

import (
	"context"
	"errors"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/goid"
	"github.com/gosdma/gosdma/sdma"
)

// request is one slot's request (hfi1: struct user_sdma_request).
//
// Ownership: the submitting goroutine owns the send-side fields from the slot claim until
// Submit returns; the completion pass reads pq, slot, npkts and the pins (set before the first
// packet is handed to the engine, which publishes them) and writes fail and pending. inUse,
// outcome and waiters are guarded by pq.compMu.
type request struct {
	pq   *PktQ
	slot int

	// Guarded by pq.compMu.
	inUse   bool      // the slot is claimed (hfi1: req_in_use bit)
	outcome error     // the last ended request's outcome (nil: COMPLETE), for Wait
	waiters []*waiter // Wait calls to wake when the request ends

	// pending counts the request's packets in flight plus one for the submitter (hfi1: the
	// seqcomp/seqsubmitted pair). Whoever brings it to 0 ends the request, exactly once: the
	// last completion callback, or Submit if no packet is in flight by then.
	pending atomic.Int32
	// fail is the request's error (hfi1: has_error, and the errcode set_comp_state writes): set
	// by CAS from nil, by a completion callback (aborted) or by the submitter; stored over by
	// stop when sending stopped with packets unsent (free_req's errno wins); read by the
	// submitter between packets and by whoever ends the request.
	fail atomic.Pointer[reqFail]
	// hdrStored: packet 0 of an AHG request completed OK, so the chip holds its header in the
	// entry whatever sw cleans come after (the entry is the request's until AHGFree). Set by
	// its completion callback (ahgCopyTx); read by the submitter when the engine refuses a batch with
	// sdma.ErrReset (sendList); cleared by start.
	hdrStored atomic.Bool
	// doneG is the goroutine (goid.Self) running Config.Done for the request that is ending, 0
	// when none: stored by end before it calls Done, cleared by publishEnd under compMu as it
	// releases the slot (within that goroutine's life, so a g reused later is never seen here);
	// read by Submit (lockSlot, awaitEnd), which waits for another goroutine's Done to return and
	// refuses a Submit from inside it.
	doneG atomic.Uint64

	// Send side: the submitter's.
	info      struct{ NPkts, FragSize uint16 } // the request's (ReqInfo's, without Message's pointer)
	hdr       Header                           // the template (hfi1: req->hdr); updated at packet 2 as set_txreq_header does
	eng       *sdma.Engine
	ahgIdx    int    // the AHG entry, or -1
	epoch     uint64 // with an AHG entry: the engine's epoch packet 0 was sent in (sendList)
	dataLen   int
	sent      int // payload bytes built into packets
	koffset   uint32
	seqnum    uint16 // packets built
	submitted uint16 // packets taken by the engine (hfi1: seqsubmitted)
	vecs      [MaxVectorsPerReq][]byte
	pins      [MaxVectorsPerReq]*pinNode
	nvecs     int
	iovIdx    int
	iovOff    int
	txps      sdma.TxList // packets built and not yet taken by the engine (hfi1: req->txps)
	// building is the txreq buildPkt is building, not yet on txps (nil between packets): the
	// one a panic inside the build (the device's Mapper, say) leaves nowhere else, which
	// leaveSend gives back.
	building *TxReq
}

// reqFail is a request's error: the errcode its completion entry gets and the cause.
type reqFail struct {
	errcode uint32
	cause   error
}

var failAborted = &reqFail{errcode: ErrcodeAborted, cause: errors.New("usdma: a packet completed aborted (the engine halted, stopped or closed)")}

func (r *request) setFail(f *reqFail) { r.fail.CompareAndSwap(nil, f) }

// Submit sends one request: the data vectors vecs, split into info.NPkts packets of the header
// template hdr (hfi1: hfi1_user_sdma_process_request). It validates the request first, in the
// kernel's order (before all, a value Message could not fit in ReqInfo's 16-bit fields;
// completion index, vector count, a zero fragment size; then a slot in use, ErrSlotInUse, but
// for a slot whose request is ending, its Config.Done running on another goroutine, which Submit
// waits for (see Config.Done); then the rest: the packet count, fragment size against 64-byte
// blocks, the MTU and MAX_SDMA_PKT_SIZE, the template's opcode, SC/VL, LNH and length): any failure is a
// *ReqError and changes nothing. EXPECTED requests are refused with
// ErrExpected: they need receive-side TID entries, which gosdma does not model.
//
// A Submit is one request: the io vector count in info.Ctrl must be 1 + len(vecs) (the header's
// vector and the data vectors; Message and Ctrl make it so). The kernel's writev may carry
// several requests, each one's vectors (its sdma_req_info and header, then req_iovcnt - 1 data
// vectors) after the last one's: hfi1_user_sdma_process_request refuses only a count over the
// vectors left (-EINVAL), and hfi1_write_iter makes the vectors past the count the next request.
// Submit refuses a count below 1 + len(vecs) too (ErrInvalid, saying that the vectors past it
// would be the next request): that request is a Submit of its own.
//
// An accepted request claims its slot and sets its completion entry QUEUED. Submit pins the
// vectors (through the pin cache), takes an AHG entry of the engine for a multi-packet request,
// and builds and sends at most MaxPktsPerQueue packets at a time until all are in the engine's
// ring; when the ring is full the queue goes DEFERRED on the engine's wait list until room
// comes (or the timeout passes, and it tries again). Like the kernel it returns once every
// packet is in the ring, without waiting for completions; the slot becomes COMPLETE, or ERROR
// exactly once, when the last packet completes: poll Comp or call Wait.
// The vectors must not change until then.
//
// When the queue's allocator runs empty (a bounded one: an alloc.List, a Slab with MaxSlabs),
// Submit hands the packets built so far to the engine and waits for a txreq to come back as the
// queue's packets in flight complete, as the kernel's kmem_cache_alloc(GFP_KERNEL) sleeps for
// memory rather than fail: with the allocator's GetCtx if it has one (Traits().CanWait), else
// until the queue's next completion. Only when the allocator is empty and none of the queue's
// packets is in flight does it stop with ErrNoMem (errcode ENOMEM).
//
// If sending stops early (the engine stopped, the device or the queue closed, a mapping failed,
// no txreq could be had, a packet already completed aborted), Submit returns the error; the slot
// still ends exactly once, ERROR, when the packets already handed over complete. A nil ctx is
// ErrInvalid before the slot is claimed (the slot is untouched). ctx bounds only the wait for
// the slot's ending Done (ErrSlotInUse with ctx's error as Cause, nothing changed) and the waits
// for ring room and for txreqs; a request cut short by ctx ends ERROR too, and
// Submit's error matches ctx's (errors.Is; see ReqError.Cause). A panic inside Submit after the
// claim (the queue's allocator's, say) goes on to the caller, and the request still ends, ERROR
// (EFAULT) unless all its packets were handed over, once its packets in flight complete; every
// txreq Submit took and no packet in flight holds goes back to the allocator once (also when the
// allocator's Put panics after taking it), and no goroutine Submit started is left running.
// Room comes only as the engine runs: on a Manual engine (or one in CompletePoll mode) another
// goroutine must drive it (Process, Poll) while a request larger than the free ring, or than a
// bounded allocator, waits, as the chip and its interrupts do for the kernel.
func (pq *PktQ) Submit(ctx context.Context, info ReqInfo, hdr *Header, vecs ...[]byte) error {
	if ctx == nil {
		return reqErr(int(info.CompIdx), ErrInvalid, "nil context") // before the slot is claimed
	}
	if info.bad != nil {
		return info.bad // Message could not fit a value in ReqInfo's 16-bit fields
	}
	if err := pq.validateClaim(&info, hdr, len(vecs)); err != nil {
		return err
	}
	r := &pq.reqs[info.CompIdx]
	if err := pq.lockSlot(ctx, r); err != nil {
		return err
	}
	claimed, err := pq.submitLocked(ctx, r, &info, hdr, vecs)
	if claimed {
		// The submitter's hold goes after the send lock: a request that ends here runs its
		// Config.Done with the lock free, so that Done may Submit on another slot (it would wait
		// for the lock its own goroutine holds) and Close's wait does not hold up that Submit.
		// Nothing of the send side is left to do: the completion pass ends requests without
		// the lock too.
		r.done()
	}
	return err
}

// submitLocked is Submit under sendMu, which it releases (also on a panic, leaveSend): the checks
// after the slot's, the claim, and the sending. claimed reports whether the request was accepted:
// the caller then drops the submitter's hold on r (request.done) once sendMu is released. A panic
// after the claim (the queue's allocator's, say) still ends the request (leaveSend).
func (pq *PktQ) submitLocked(ctx context.Context, r *request, info *ReqInfo, hdr *Header, vecs [][]byte) (claimed bool, err error) {
	sending := false // the request is claimed and submitLocked has not returned
	defer pq.leaveSend(r, &sending)
	dataLen, err := pq.validate(info, hdr, vecs)
	if err != nil {
		return false, err
	}
	if !pq.claim(r) {
		return false, reqErr(r.slot, ErrSlotInUse, "entry "+itoa(r.slot)+" is in use")
	}
	// From here the request is accepted: it ends exactly once, through r.done.
	pq.start(r, info, hdr, dataLen)
	sending = true // cleared at the return below: a panic leaves it set
	err = pq.pin(r, vecs)
	if err == nil {
		err = pq.selectEngine(r)
	}
	if err == nil {
		err = pq.sendAll(ctx, r)
	}
	pq.endSend(r)
	sending = false
	return true, err
}

// endSend gives back what the sending of r held beyond its packets: the spare txreq and the AHG
// entry, each exactly once: its reference is cleared before the call that gives it back, so that
// when that call panics (the allocator's Put, after it took the txreq), leaveSend's endSend does
// not give it back again. sendMu held.
func (pq *PktQ) endSend(r *request) {
	if tx := pq.spare; tx != nil { // waitTx got one that no packet needed in the end
		pq.spare = nil
		_ = pq.alloc.Put(tx)
	}
	if i := r.ahgIdx; i >= 0 {
		// All packets using the entry are in the ring (or never will be): the engine processes
		// them in order, so the entry can serve the next request (hfi1: sdma_ahg_free once
		// seqsubmitted == npkts).
		r.ahgIdx = -1
		_ = r.eng.AHGFree(i)
	}
}

// errSubmitPanicked is the cause of a request whose Submit panicked after claiming its slot.
var errSubmitPanicked = errors.New("usdma: Submit panicked while sending the request")

// leaveSend releases sendMu as submitLocked ends. When it ends in a panic (or runtime.Goexit)
// after the claim, sending still set, it first ends the sending as stop does (the packets built
// and not handed to the engine go back, the request fails EFAULT with errSubmitPanicked unless
// all its packets were handed over), gives back the spare txreq and the AHG entry, and after the
// release drops the submitter's hold, which Submit's return would have: the request ends once
// its packets in flight complete, and Close does not wait for it for ever. The panic then goes on.
func (pq *PktQ) leaveSend(r *request, sending *bool) {
	if !*sending {
		pq.sendMu.Unlock()
		return
	}
	defer r.done()           // after the release: Done runs without the lock
	defer pq.sendMu.Unlock() // even if the clean-up below panics too
	pq.txWait.Store(nil)
	// Each step deferred, so that an allocator's Put panicking in one skips none of the others:
	// stop records the failure before its Puts, so the request never ends as sent.
	defer pq.endSend(r)
	defer pq.putBuilding(r)
	_ = pq.stop(r, errSubmitPanicked)
}

// putBuilding gives back the txreq whose build panicked (r.building: on no list), if any.
func (pq *PktQ) putBuilding(r *request) {
	if tx := r.building; tx != nil {
		r.building = nil // before the Put: one that panics after taking tx is not followed by another
		_ = tx.Clean()
		tx.req = nil
		_ = pq.alloc.Put(tx)
	}
}

// lockSlot takes sendMu for a Submit on slot r, found free: nil with sendMu held, else the
// refusal with sendMu not held (ErrClosed; ErrSlotInUse for a request in flight). The slot is
// checked before the later checks, as the kernel claims it before them: a busy slot is -EBADSLT
// whatever else is wrong. Only Submit claims, under sendMu, so a slot free here is still free at
// the claim. A request that is ending, its Config.Done running, is waited for (awaitEnd), with
// sendMu not held: Close takes it. Its doneG is looked at before sendMu too, so that a Submit on
// the slot from inside its Done is refused at once.
func (pq *PktQ) lockSlot(ctx context.Context, r *request) error {
	for {
		if g := r.doneG.Load(); g != 0 {
			if err := pq.awaitEnd(ctx, r, g); err != nil {
				return err
			}
		}
		pq.sendMu.Lock()
		if pq.closed.Load() {
			pq.sendMu.Unlock()
			return reqErr(r.slot, ErrClosed, "the queue is closed")
		}
		inUse, ending := pq.slotState(r)
		if !inUse {
			return nil
		}
		pq.sendMu.Unlock()
		if !ending {
			return reqErr(r.slot, ErrSlotInUse, "entry "+itoa(r.slot)+" is in use")
		}
	}
}

// slotState reports whether slot r holds a request that has not ended, and whether that request
// is ending (its Config.Done runs).
func (pq *PktQ) slotState(r *request) (inUse, ending bool) {
	pq.compMu.Lock()
	defer pq.compMu.Unlock()
	return r.inUse, r.doneG.Load() != 0
}

// awaitEnd waits, yielding, until the request on slot r whose Config.Done runs on goroutine g
// has ended: Done must not block, so the wait is the rest of its run and publishEnd's. It
// returns nil then. It refuses at once (ErrSlotInUse) when g is the calling goroutine (a Submit
// from inside that Done would wait for itself), and with ctx's error as Cause (ErrSlotInUse too:
// the slot is still taken) if ctx ends first.
func (pq *PktQ) awaitEnd(ctx context.Context, r *request, g uint64) error {
	if g == goid.Self() {
		return reqErr(r.slot, ErrSlotInUse, "entry "+itoa(r.slot)+" is ending and Config.Done runs on this goroutine: a Submit on it from inside its Done would wait for itself")
	}
	for r.doneG.Load() == g {
		if err := ctx.Err(); err != nil {
			return &ReqError{Slot: r.slot, Reason: "entry " + itoa(r.slot) + " is ending (its Config.Done runs) and the context ended first: " + err.Error(), Err: ErrSlotInUse, Cause: err}
		}
		if pq.test != nil && pq.test.endWait != nil {
			pq.test.endWait(r.slot)
		}
		runtime.Gosched()
	}
	return nil
}

// claim takes slot r for a new request and sets it QUEUED (hfi1: test_and_set_bit on
// req_in_use, then set_comp_state QUEUED), under compMu so that a poller never sees a slot
// go back from QUEUED to the previous request's end.
func (pq *PktQ) claim(r *request) bool {
	pq.compMu.Lock()
	defer pq.compMu.Unlock()
	if r.inUse {
		return false
	}
	r.inUse = true
	pq.nreqs++
	pq.comps[r.slot].set(Queued, 0)
	return true
}

func (pq *PktQ) start(r *request, info *ReqInfo, hdr *Header, dataLen int) {
	r.info.NPkts, r.info.FragSize = info.NPkts, info.FragSize
	r.hdr = *hdr
	if !pq.keepRate {
		r.hdr.setPBC(2, 0) // hfi1: without static rate control, "sanitize the header"
	}
	r.eng = nil
	r.ahgIdx = -1
	r.dataLen = dataLen
	r.sent = 0
	r.koffset = r.hdr.Offset()
	r.seqnum = 0
	r.submitted = 0
	r.nvecs = 0
	r.iovIdx, r.iovOff = 0, 0
	r.fail.Store(nil)
	r.hdrStored.Store(false)
	r.pending.Store(1) // the submitter's hold
	pq.stats.requests.Add(1)
	pq.state.Store(uint32(Active))
}

// pin gets every vector's pin-cache node (hfi1: pin_vector_pages per iovec).
func (pq *PktQ) pin(r *request, vecs [][]byte) error {
	for i, v := range vecs {
		n, err := pq.pins.get(v)
		if err != nil {
			r.setFail(&reqFail{errcode: ENOSPC, cause: err})
			return &ReqError{Slot: r.slot, Reason: "pinning data vector " + itoa(i) + ": " + err.Error(), Err: ErrNoMem, Cause: err}
		}
		r.vecs[i], r.pins[i] = v, n
		r.nvecs = i + 1
	}
	return nil
}

// selectEngine picks the engine from the destination LID, the context and the VL (hfi1:
// dlid_to_selector + ctxt + subctxt, sdma_select_user_engine) and an AHG entry for a
// multi-packet request (hfi1: sdma_ahg_alloc; none free means full headers). The selector is the
// device's first-come number of the DLID's hash (sdma.Device.DLIDSelector) plus the context and
// subcontext.
func (pq *PktQ) selectEngine(r *request) error {
	selector := uint32(pq.dev.DLIDSelector(r.hdr.DLID())) + uint32(pq.ctxt) + uint32(pq.subctxt)
	r.eng = pq.engine
	if r.eng == nil {
		r.eng = pq.dev.SelectEngine(selector, uint8(r.hdr.VL()))
	}
	if r.eng != nil && r.eng.Closed() {
		r.setFail(&reqFail{errcode: ESHUTDOWN, cause: sdma.ErrClosed})
		return &ReqError{Slot: r.slot, Reason: "the device is closed", Err: ErrClosed, Cause: sdma.ErrClosed}
	}
	if r.eng == nil || !r.eng.Running() {
		r.setFail(&reqFail{errcode: ECOMM, cause: sdma.ErrNotRunning})
		return &ReqError{Slot: r.slot, Reason: "the engine for VL " + itoa(r.hdr.VL()) + " is not running", Err: ErrNotRunning, Cause: sdma.ErrNotRunning}
	}
	if r.info.NPkts > 1 && pq.ahg {
		if i, err := r.eng.AHGAlloc(); err == nil {
			r.ahgIdx = i
		} else {
			pq.stats.ahgFallbacks.Add(1)
		}
	}
	return nil
}

// sendAll sends the request's packets, MaxPktsPerQueue at a time, waiting for room while the
// queue is deferred (the loop of hfi1_user_sdma_process_request).
func (pq *PktQ) sendAll(ctx context.Context, r *request) error {
	var t *time.Timer
	for r.submitted != r.info.NPkts {
		err := pq.sendPkts(r, MaxPktsPerQueue)
		if err == nil {
			continue
		}
		if err == errNoTx {
			if err := pq.waitTx(ctx, r); err != nil {
				return pq.stop(r, err)
			}
			continue
		}
		if !errors.Is(err, sdma.ErrBusy) {
			return pq.stop(r, err)
		}
		if pq.closed.Load() {
			return pq.stop(r, ErrClosed)
		}
		if t == nil {
			t = time.NewTimer(pq.timeout)
		}
		if err := pq.waitActive(ctx, t); err != nil {
			return pq.stop(r, err)
		}
	}
	return nil
}

// stop ends sending early: the packets built but not taken by the engine are cleaned and freed
// (hfi1: user_sdma_free_request's txps loop), and the error is recorded as the kernel's
// free_req does: with packets left unsent (seqsubmitted < npkts) the slot ends ERROR with this
// error's errno, whatever the packets handed over complete with (set_comp_state(ERROR, ret)
// after they did; their callbacks return early); with every packet taken (the last ones flushed
// by an engine that stopped) the completions decide, as user_sdma_txreq_cb does for the last one.
func (pq *PktQ) stop(r *request, err error) error {
	f := &reqFail{errcode: EFAULT, cause: err}
	switch {
	case errors.Is(err, sdma.ErrNotRunning):
		f.errcode = ECOMM
	case errors.Is(err, sdma.ErrMapping):
		f.errcode = ENOSPC
	case errors.Is(err, ErrNoMem):
		f.errcode = ENOMEM
	case errors.Is(err, sdma.ErrClosed), errors.Is(err, ErrClosed):
		f.errcode = ESHUTDOWN
	case errors.Is(err, sdma.ErrInvalid):
		f.errcode = EINVAL
	}
	if r.submitted < r.info.NPkts {
		r.fail.Store(f) // overrides an aborted packet's errcode: the submitter holds r until it ends
	}
	// After the failure is recorded: an allocator's Put that panics leaves the request failed.
	for stx := r.txps.PopFront(); stx != nil; stx = r.txps.PopFront() {
		_ = stx.Clean()
		tx := pq.outer(stx)
		tx.req = nil
		_ = pq.alloc.Put(tx)
	}
	if re := (*ReqError)(nil); errors.As(err, &re) {
		return err
	}
	return &ReqError{Slot: r.slot, Reason: "sending stopped after " + itoa(int(r.submitted)) + " of " + itoa(int(r.info.NPkts)) + " packets: " + err.Error(), Err: errFor(f.errcode), Cause: err}
}

func errFor(errcode uint32) error {
	switch errcode {
	case ECOMM:
		return ErrNotRunning
	case ENOSPC, ENOMEM:
		return ErrNoMem
	case ESHUTDOWN:
		return ErrClosed
	case EINVAL:
		return ErrInvalid
	}
	return ErrFault
}

// errNoTx is buildPkt's report of an empty allocator: sendAll waits for a txreq (waitTx).
var errNoTx = errors.New("usdma: no free txreq")

// sendPkts builds up to maxpkts packets of r and hands them to the engine (hfi1:
// user_sdma_send_pkts). Packets the engine did not take (no room) stay on r.txps for the next
// call. If the allocator runs empty, the packets built so far are sent and sendPkts returns
// errNoTx (unless the send failed): their completions, and those of the packets before them,
// bring txreqs back.
func (pq *PktQ) sendPkts(r *request, maxpkts int) error {
	if f := r.fail.Load(); f != nil {
		return f.cause // a packet already failed: do not go on (hfi1: has_error, -EFAULT)
	}
	if left := int(r.info.NPkts - r.seqnum); maxpkts > left {
		maxpkts = left
	}
	var short error
	for range maxpkts {
		if err := pq.buildPkt(r); err != nil {
			if err != errNoTx {
				return err
			}
			short = err
			break
		}
	}
	if f := r.fail.Load(); f != nil {
		// Checked again just before the packets go: a packet that completed aborted means the
		// engine halted and restarted, and its AHG entry may no longer hold this request's
		// header (the kernel checks has_error only per packet built). A halt between this check
		// and the send cannot slip through: sendList sends in packet 0's epoch.
		return f.cause
	}
	if err := pq.sendList(r); err != nil {
		return err
	}
	return short
}

// sendList hands r.txps to the engine (hfi1: sdma_send_txlist) and counts what it took. The
// pending count is raised for every packet on the list first: a packet's callback may run
// before SendList returns.
func (pq *PktQ) sendList(r *request) error {
	n := r.txps.Len()
	if n == 0 {
		return nil
	}
	if pq.test != nil && pq.test.onSend != nil {
		pq.test.onSend(n)
	}
	r.pending.Add(int32(n))
	var took int
	var err error
	if r.ahgIdx < 0 {
		took, err = r.eng.SendList(&pq.busy, &r.txps)
	} else {
		// Every batch in packet 0's epoch: see sendListAHG.
		if r.submitted == 0 {
			r.epoch = r.eng.Epoch() // packet 0 is on the list: its epoch, if the engine takes it
		}
		if took, err = r.eng.SendListIn(&pq.busy, &r.txps, r.epoch); err != nil && err == sdma.ErrReset {
			took, err = pq.sendListAHG(r)
		}
	}
	r.pending.Add(-int32(n - took)) // never 0 here: the submitter holds one
	pq.countTaken(r, took)
	r.submitted += uint16(took)
	return err
}

// sendListAHG is sendList's answer to a refusal of a batch of a request with an AHG entry
// (sdma.ErrReset, nothing taken). Every batch goes in the engine's epoch of packet 0
// (sdma.Engine.SendListIn): packet 0 stores the request's header in the entry (AHG_COPY) when
// the chip reads it, and the later packets only patch it (USE_AHG). A sw clean that aborted
// packet 0 before the chip read it, and came after the request's last look at its failure,
// would otherwise let a later batch into the recovered ring, where the chip builds its headers
// from what the entry held before (the previous request's: its payload goes to the previous
// request's destination). The kernel's user_sdma_send_pkts has that window. So the refusal
// stands (the request ends ERROR), unless packet 0 is not sent yet or had completed OK (the
// entry holds its header through any clean): then the batch goes in the new epoch.
//
//go:noinline
func (pq *PktQ) sendListAHG(r *request) (int, error) {
	for {
		if r.submitted != 0 && !r.hdrStored.Load() {
			return 0, sdma.ErrReset
		}
		r.epoch = r.eng.Epoch()
		took, err := r.eng.SendListIn(&pq.busy, &r.txps, r.epoch)
		if err != sdma.ErrReset {
			return took, err
		}
	}
}

// countTaken counts the took packets the engine just took from r (the ones after r.submitted),
// by kind: with an AHG entry packet 0 carries the full header (AHG_COPY) and every later one is
// USE_AHG; without one every packet carries a full header. Counted here, not when built, so that
// packets built and then freed unsent (stop) are not counted.
func (pq *PktQ) countTaken(r *request, took int) {
	if took == 0 {
		return
	}
	full := took
	if r.ahgIdx >= 0 {
		full = 0
		if r.submitted == 0 {
			full = 1
		}
		pq.stats.ahgPackets.Add(uint64(took - full))
	}
	pq.stats.fullHeaders.Add(uint64(full))
	pq.stats.packets.Add(uint64(took))
}

// buildPkt builds r's next packet onto r.txps: a txreq (from the queue's allocator, else the
// one waitTx got: errNoTx if there is neither), its header (AHG_COPY for the first packet of an
// AHG request, USE_AHG update words for the later ones, else a full header) and its payload
// pieces (one descriptor per page piece).
func (pq *PktQ) buildPkt(r *request) error {
	tx, err := pq.alloc.Get()
	if err != nil {
		if tx, err = pq.spareTx(r, err); err != nil {
			return err
		}
	}
	r.building = tx
	tx.req = r
	tx.flags = 0
	tx.seqnum = r.seqnum
	if r.seqnum == r.info.NPkts-1 {
		tx.flags |= txReqAck | txReqDisableSH // the last packet asks for an ACK
	}
	datalen := pq.dataLen(r)
	switch {
	case r.ahgIdx >= 0 && r.seqnum == 0:
		err = pq.txaddAHG(r, tx, datalen)
	case r.ahgIdx >= 0:
		err = pq.setHeaderAHG(r, tx, datalen)
	default:
		err = pq.setHeader(r, tx, datalen)
	}
	if err == nil {
		err = pq.addPayload(r, tx, datalen)
	}
	if err != nil {
		r.building = nil // before the Put: one that panics after taking tx is not followed by another
		_ = tx.Clean()
		tx.req = nil
		_ = pq.alloc.Put(tx)
		return err
	}
	r.koffset += uint32(datalen)
	r.seqnum++
	r.txps.PushBack(&tx.TxReq)
	r.building = nil
	return nil
}

// spareTx is buildPkt's txreq when the allocator's Get failed with err: the one waitTx got, or
// errNoTx (the allocator is empty), or err as ErrNoMem.
func (pq *PktQ) spareTx(r *request, err error) (*TxReq, error) {
	if tx := pq.spare; tx != nil {
		pq.spare = nil
		return tx, nil
	}
	if errors.Is(err, alloc.ErrEmpty) {
		return nil, errNoTx
	}
	return nil, noTx(r.slot, err.Error(), err)
}

// noTx is a Submit's ErrNoMem for want of a txreq (hfi1: -ENOMEM from kmem_cache_alloc), with
// the allocator's error that refused it as Cause (alloc.ErrEmpty for an empty one).
func noTx(slot int, reason string, cause error) error {
	return &ReqError{Slot: slot, Reason: "no txreq: " + reason, Err: ErrNoMem, Cause: cause}
}

// dataLen is the payload of r's next packet (hfi1: compute_data_length, EAGER).
func (pq *PktQ) dataLen(r *request) int {
	if r.seqnum == 0 {
		return firstLen(&r.hdr, r.dataLen)
	}
	return min(r.dataLen-r.sent, int(r.info.FragSize))
}

// txaddAHG starts the first packet of an AHG request: its full header, which the engine also
// stores in the request's AHG entry (hfi1: user_sdma_txadd_ahg, SDMA_TXREQ_F_AHG_COPY).
func (pq *PktQ) txaddAHG(r *request, tx *TxReq, datalen int) error {
	tx.hdr = r.hdr
	lrhlen := lrhLen(padLen(datalen))
	if pbc := tx.hdr.pbc(0); pbcToLRH(pbc) != lrhlen {
		tx.hdr.setPBC(0, pbc&0xf000|lrhToPBC(lrhlen))
	}
	if err := tx.InitAHG(sdma.FlagAHGCopy, HeaderSize+datalen, sdma.AHG{Entry: r.ahgIdx}, (*ahgCopyTx)(tx)); err != nil {
		return err
	}
	return tx.AddKVAddr(pq.dev, tx.hdr[:])
}

// ahgCopyTx is packet 0 of an AHG request as its own Completer: its completion records that the
// chip read it (request.hdrStored) before Complete's, so that the other packets' completions pay
// nothing for it.
type ahgCopyTx TxReq

// Complete is packet 0's completion: see ahgCopyTx.
func (tx *ahgCopyTx) Complete(stx *sdma.TxReq, st sdma.Status) {
	if r := tx.req; r != nil && st == sdma.StatusOK {
		r.hdrStored.Store(true)
	}
	(*TxReq)(tx).Complete(stx, st)
}

// setHeader gives a packet its full header from the template (hfi1: set_txreq_header, EAGER):
// the lengths if they differ from the template's, and past the first packet the PSN, the ACK
// request on the last packet and the eager offset.
func (pq *PktQ) setHeader(r *request, tx *TxReq, datalen int) error {
	if err := tx.Init(0, HeaderSize+datalen, tx); err != nil {
		return err
	}
	h := &tx.hdr
	*h = r.hdr
	lrhlen := lrhLen(padLen(datalen))
	if pbc := h.pbc(0); pbcToLRH(pbc) != lrhlen {
		h.setPBC(0, pbc&0xf000|lrhToPBC(lrhlen))
		h.setLRH(2, uint16(lrhlen>>2))
		if r.seqnum == 2 {
			// The third packet is the first of the run of full fragments (packet 0's length
			// is the template's, packet 1 may be the short last one): keep its lengths in the
			// template so the next ones need no change.
			r.hdr.setPBC(0, h.pbc(0))
			r.hdr.setLRH(2, h.lrh(2))
		}
	}
	if r.seqnum != 0 {
		psn := (r.hdr.bth(2) + uint32(r.seqnum)) & pq.psnMask // hfi1: set_pkt_bth_psn
		if tx.flags&txReqAck != 0 {
			psn |= bthAckReq
		}
		h.setBTH(2, psn)
		h.setOffset(r.koffset)
	}
	return tx.AddKVAddr(pq.dev, h[:])
}

// setHeaderAHG initialises a later packet of an AHG request with the update words the engine
// applies to the stored header (hfi1: set_txreq_header_ahg, EAGER): PBC.LengthDWs and
// LRH.PktLen when the length differs from the template's, BTH.PSN with BTH.A, and the KDETH
// eager offset. Each word patches 16 bits (12 for the PBC length) of a little-endian header
// dword; the big-endian LRH and BTH halves go in byte-swapped, as the kernel's cpu_to_be16.
func (pq *PktQ) setHeaderAHG(r *request, tx *TxReq, datalen int) error {
	var ahg [desc.MaxAHGWords]uint32
	n := 0
	lrhlen := lrhLen(padLen(datalen))
	if pbcToLRH(r.hdr.pbc(0)) != lrhlen {
		ahg[0] = ahgPBCLen | uint32(lrhToPBC(lrhlen))                       // PBC.PbcLengthDWs
		ahg[1] = ahgLRHLen | uint32(bits.ReverseBytes16(uint16(lrhlen>>2))) // LRH.PktLen (all 16 bits: byte swap)
		n = 2
	}
	psn := (r.hdr.bth(2) + uint32(r.seqnum)) & pq.psnMask
	if tx.flags&txReqAck != 0 {
		psn |= bthAckReq
	}
	ahg[n] = ahgPSNHigh | uint32(bits.ReverseBytes16(uint16(psn>>16))) // BTH.A and PSN high half
	ahg[n+1] = ahgPSNLow | uint32(bits.ReverseBytes16(uint16(psn)))    // PSN low half
	ahg[n+2] = ahgOffLow | uint32(uint16(r.koffset))                   // KDETH.Offset (swdata[6]) low
	ahg[n+3] = ahgOffHigh | uint32(uint16(r.koffset>>16))              // and high
	n += 4
	if err := tx.InitAHG(sdma.FlagUseAHG, datalen, sdma.AHG{Entry: r.ahgIdx, Words: ahg[:n], HeaderLen: HeaderSize}, tx); err != nil {
		return err
	}
	return nil
}

// The AHG update words of set_txreq_header_ahg without their 16-bit values (ahg_header_set's
// dword, start bit and width, which never change): a packet's word is one of these ORed with
// its value.
var (
	ahgPBCLen  = ahgField(dwPBC, 0, 12)
	ahgLRHLen  = ahgField(dwLRHLen, 0, 16)
	ahgPSNHigh = ahgField(dwBTHPSN, 0, 16)
	ahgPSNLow  = ahgField(dwBTHPSN, 16, 16)
	ahgOffLow  = ahgField(dwKOffset, 0, 16)
	ahgOffHigh = ahgField(dwKOffset, 16, 16)
)

func ahgField(dw, bit, width uint8) uint32 {
	w, err := desc.AHGUpdate(0, dw, bit, width)
	if err != nil {
		panic("usdma: AHG update word: " + err.Error()) // constant fields: a bug if it fails
	}
	return w
}

// addPayload adds datalen bytes of the request's vectors to tx, one descriptor per page
// piece: a piece ends at a page end of the vector's memory, at the vector's end, or at the
// packet's end (hfi1: user_sdma_txadd, sdma_txadd_page per piece). A pinned vector is
// registered with the device, so AddKVAddr adds each piece by its computed bus address, with
// no mapping.
func (pq *PktQ) addPayload(r *request, tx *TxReq, datalen int) error {
	for queued := 0; queued < datalen; {
		v := r.vecs[r.iovIdx]
		if r.iovOff == len(v) {
			r.iovIdx++
			r.iovOff = 0
			continue
		}
		addr := addrOf(v) + uintptr(r.iovOff)
		k := min(dma.PageSize-int(addr%dma.PageSize), datalen-queued, len(v)-r.iovOff)
		if err := tx.AddKVAddr(pq.dev, v[r.iovOff:r.iovOff+k]); err != nil {
			return err
		}
		r.iovOff += k
		queued += k
		r.sent += k
	}
	return nil
}

// Complete is every packet's completion (hfi1: user_sdma_txreq_cb), as an sdma.Completer:
// record a failure, give the txreq back to the queue's allocator, and end the request with its
// last packet. It runs on the completion pass and does not block.
func (tx *TxReq) Complete(_ *sdma.TxReq, st sdma.Status) {
	r := tx.req
	if r == nil {
		return
	}
	if st != sdma.StatusOK {
		r.setFail(failAborted)
	}
	tx.req = nil
	pq := r.pq
	_ = pq.alloc.Put(tx)
	if w := pq.txWait.Load(); w != nil {
		w.wake(false) // a Submit waits for a txreq: here is one
	}
	r.done()
}

// done drops one hold on r: a packet's or the submitter's. The last one ends the request.
func (r *request) done() {
	if r.pending.Add(-1) == 0 {
		r.pq.end(r)
	}
}

// end ends r exactly once (hfi1: user_sdma_free_request, set_comp_state, pq_update): the pins
// are released (and the nodes taken out of the cache if r stopped with packets unsent, as the
// kernel's free_req does with user_sdma_free_request(req, true)), Config.Done is told, and then the slot gets COMPLETE or ERROR with the request's
// errcode (see stop), is released for a new request, and the waiters wake. Done runs first so
// that nothing sees the end before it (a Wait or Close returning, a new request on the slot: a
// Submit on it meanwhile waits, awaitEnd, for the goroutine doneG names); the
// rest is deferred, so that a Done that panics (or calls runtime.Goexit) still ends r.
func (pq *PktQ) end(r *request) {
	unsent := r.submitted < r.info.NPkts // the submitter's last write came before its hold went
	for i := range r.nvecs {
		if unsent {
			pq.pins.drop(r.pins[i])
		} else {
			pq.pins.put(r.pins[i])
		}
		r.pins[i], r.vecs[i] = nil, nil
	}
	r.nvecs = 0
	st, code, outcome := Complete, uint32(0), error(nil)
	if f := r.fail.Load(); f != nil {
		st, code = Error, f.errcode
		outcome = &CompError{Slot: r.slot, Errcode: code, Cause: f.cause}
		pq.stats.failed.Add(1)
	} else {
		pq.stats.completed.Add(1)
	}
	if pq.onDone != nil {
		r.doneG.Store(goid.Self()) // a Submit on the slot meanwhile waits for the end (awaitEnd)
		defer pq.publishEnd(r, st, code, outcome)
		pq.onDone(r.slot, CompEntry{Status: st, Errcode: code})
		return
	}
	pq.publishEnd(r, st, code, outcome)
}

// publishEnd is end's last step: r's entry is written and its slot released, Close's wait for
// idle and the waiters are woken.
func (pq *PktQ) publishEnd(r *request, st CompState, code uint32, outcome error) {
	pq.compMu.Lock()
	pq.comps[r.slot].set(st, code)
	r.doneG.Store(0)
	r.inUse = false
	r.outcome = outcome
	ws := r.waiters
	r.waiters = nil
	pq.nreqs--
	if pq.nreqs == 0 && pq.idle != nil {
		close(pq.idle)
		pq.idle = nil
	}
	if pq.test != nil && pq.test.onEnd != nil {
		pq.test.onEnd(r.slot, st) // before anyone can see the end through Wait or Close
	}
	pq.compMu.Unlock()
	for _, w := range ws {
		w.err = outcome
		close(w.ch)
	}
}
