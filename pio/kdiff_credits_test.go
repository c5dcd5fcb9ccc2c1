package pio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// A literal model of hfi1's send context accounting (pio.c): sc_buffer_alloc's credit math
// (blocks from the PBC length, fill, fill_wrap, alloc_free refreshed from free and then by an
// sc_release_update, the one retry), the shadow ring (sr_size = credits + 1, sr_head, sr_tail,
// sent_at), sc_release_update (free advanced by the credit return word's 11-bit counter,
// sent_before, fill_code once per pass, the callbacks in ring order), sc_return_credits,
// sc_set_cr_threshold, sc_stop, sc_disable (egress, then every pending callback with
// PRC_SC_DISABLE, then the wait list), sc_enable (only on the 0 -> 1 transition), sc_restart,
// sc_free, pio_wait's queueing and its forced return, sc_piobufavail's batch and its forced
// return when waiters are left, credit_intr_count (hfi1_sc_wantpiobuf_intr); the copy is
// pio_copy.c's model (kdiff_copy_test.go). Its constants are the kernel headers' own. It runs
// against a model of the chip as this package documents it (whole packets in allocation order
// once written, a halt on a PBC that does not match its blocks, the free counter written back
// when the threshold, the PBC or a forced return asks, the credit-return interrupt's pass after
// each write-back, or later: chipAlone). The tests drive the model and a SendContext (a manual
// one, or its chip goroutine) with the same sequences and compare, after every step, the
// allocator's and releaser's fields, the chip's, the credit return word, the flags, Avail,
// Stats, every error class, each buffer's address and sent_at, the release callbacks' order and
// codes, the wake-ups and the wait list, the send buffer's bytes and every packet the chip sent.
//
// Deliberate, documented differences, taken into the model as the package states them:
//   - BufferAlloc refuses a length outside 2..MaxPacketDWs or larger than the context with
//     ErrMsgSize and changes nothing; sc_buffer_alloc would hand out 0 blocks for 0 dwords, a
//     block for 1 (no room for the PBC), the blocks of a length no PBC can describe, and for
//     more blocks than the context has it would run a release pass and fail.
//   - A packet that halts the chip during Disable's egress leaves the context halted until Enable
//     (TestHaltDuringDisableRecorded); in the kernel the error interrupt would also queue
//     halt_work, whose sc_restart would enable the context again.
//   - The chip returns credits after every packet while producers wait (the package's model of
//     the credit-return interrupt that pio_wait turns on); the model's chip does the same. It
//     looks at the wait list, as the package's does, not at credit_intr_count, which sc_disable
//     leaves up when it empties the list (the interrupt stays on in the kernel; the package doc
//     says so): the model keeps the count and checks that it is up whenever the list is not
//     empty, where the two agree.
//   - BufferAlloc's own release pass leaves the waiters on the list and, if any are queued,
//     forces a credit return whose pass wakes them (sc_buffer_alloc's sc_release_update runs
//     sc_piobufavail, which takes them off at once; their QPs' work runs later on a workqueue).
//   - Waiters here park with QueueWait (priority 0, packets sent: the tail of the list), so a
//     pass wakes its batch in list order; the order's own model is piowait_kdiff_test.go.
//   - Disable, Restart and InjectHalt wait for every copy in progress (sc_disable does not); the
//     driver ends the copies first.

// The kernel's constants are its own (pio.h, pio.c, chip_registers.h, hfi.h), not the package's,
// so that the model does not follow a change of those (the block's are in kdiff_copy_test.go).
const (
	kWaitBatchSize = 5 // PIO_WAIT_BATCH_SIZE

	// send context flags (SCF_*)
	kSCFEnabled = 0x01
	kSCFInFree  = 0x02
	kSCFHalted  = 0x04
	kSCFFrozen  = 0x08

	// the credit return word (CR_*)
	kCRCounterMask    = 0x7ff   // CR_COUNTER_MASK (CR_COUNTER_SHIFT 0)
	kCRStatus         = 1 << 11 // CR_STATUS_SMASK
	kCRDueToPBC       = 1 << 12 // CR_CREDIT_RETURN_DUE_TO_PBC_SMASK
	kCRDueToThreshold = 1 << 13 // CR_CREDIT_RETURN_DUE_TO_THRESHOLD_SMASK
	kCRDueToErr       = 1 << 14 // CR_CREDIT_RETURN_DUE_TO_ERR_SMASK
	kCRDueToForce     = 1 << 15 // CR_CREDIT_RETURN_DUE_TO_FORCE_SMASK

	// release codes (PRC_*)
	kPRCOK        = 0x00
	kPRCStatusErr = 0x01
	kPRCPBC       = 0x02
	kPRCThreshold = 0x04
	kPRCFillErr   = 0x08
	kPRCForce     = 0x10 // defined, never produced: fill_code maps a forced return to PRC_SC_DISABLE
	kPRCSCDisable = 0x20

	kPBCCreditReturn = 1 << 25 // PBC_CREDIT_RETURN
)

// kFillCode is fill_code.
func kFillCode(hwFree uint64) ReleaseCode {
	code := 0
	if hwFree&kCRStatus != 0 {
		code |= kPRCStatusErr
	}
	if hwFree&kCRDueToPBC != 0 {
		code |= kPRCPBC
	}
	if hwFree&kCRDueToThreshold != 0 {
		code |= kPRCThreshold
	}
	if hwFree&kCRDueToErr != 0 {
		code |= kPRCFillErr
	}
	if hwFree&kCRDueToForce != 0 {
		code |= kPRCSCDisable
	}
	return ReleaseCode(code)
}

// kRelease is one release callback: the packet and its code.
type kRelease struct {
	id   int
	code ReleaseCode
}

// kSlot is a shadow ring entry (union pio_shadow_ring's pio_buf: sent_at, cb/arg) and, beside it,
// what the chip learns of the packet from its writes (hw*).
type kSlot struct {
	sentAt   uint64
	cb       int // the arg of the release callback; -1: no callback
	hwStart  uint64
	hwBlocks uint64
	written  bool // the copy ended: the chip may take it
}

// kChip is the chip model (hardware, not kernel code): its free counter, credit_ctrl's threshold,
// the force bit, halted and enabled states.
type kChip struct {
	idx      uint32 // next slot the chip takes
	free     uint64 // blocks consumed
	returned uint64 // free at the last credit return
	halted   bool
	stopped  bool // SendCtxtCtrl.CtxtEnable cleared by sc_disable
	force    bool // SendCtxtCreditForce
	thresh   uint64
	cause    HaltCause // the last halt's cause, 0: none
}

// kSendContext is struct send_context, the fields pio.c uses, with the chip.
type kSendContext struct {
	t       testing.TB
	credits uint64
	size    uint64
	srSize  uint32
	sr      []kSlot
	// alloc_lock's
	srHead    uint32
	fill      uint64
	allocFree uint64
	fillWrap  uint64
	// release_lock's
	srTail uint32
	free   uint64
	hwFree uint64 // *sc->hw_free, the credit return word
	flags  uint32
	ctrl   bool // SendCtxtCtrl.CtxtEnable
	chip   kChip
	mmio   *kMMIO
	rel    []kRelease // callbacks run, in order
	sent   [][]byte   // packets the chip sent
	wait   []int      // sc->piowait: the queued waiters, head first
	woke   []int      // wake-ups, in order
	seen   *kdSeen    // the test's counts, or nil
	// creditIntr is credit_intr_count: hfi1_sc_wantpiobuf_intr(sc, 1) adds one, (sc, 0) takes
	// one off; sc_disable's flush leaves it as it is.
	creditIntr int
	// The package's counters, as its Stats documents them, kept by the model.
	stats Stats
}

func newKSendContext(t testing.TB, credits, thresh int) *kSendContext {
	k := &kSendContext{t: t, credits: uint64(credits), size: uint64(credits * kPIOBlockSize), srSize: uint32(credits + 1),
		sr: make([]kSlot, credits+1), mmio: newKMMIO(t, credits)}
	k.chip.thresh = uint64(thresh)
	k.enable()
	return k
}

// bufferAlloc is sc_buffer_alloc. ok false: NULL (not enabled, or no room after the one retry).
func (k *kSendContext) bufferAlloc(dwLen uint32, cb int) (slot uint32, ok bool) {
	blocks := kDwordsToBlocks(uint64(dwLen))
	if k.flags&kSCFEnabled == 0 {
		return 0, false
	}
	trycount := 0
	for {
		avail := k.credits - (k.fill - k.allocFree)
		if blocks <= avail {
			break
		}
		if trycount != 0 {
			if len(k.wait) != 0 {
				k.returnCredits()
			}
			return 0, false
		}
		k.allocFree = k.free
		avail = k.credits - (k.fill - k.allocFree)
		if blocks > avail {
			before := k.free
			k.releasePass()
			if k.seen != nil && k.free != before {
				k.seen.allocPassReturned++
			}
			k.allocFree = k.free
			trycount++
		} else if k.seen != nil && (k.hwFree-k.free)&kCRCounterMask != 0 {
			k.seen.refreshOnly++
		}
	}
	if trycount != 0 && len(k.wait) != 0 { // the package's choice: the chip's pass wakes them
		k.returnCredits()
	}
	head := k.srHead
	k.fill += blocks
	fillWrap := k.fillWrap
	k.fillWrap += blocks
	if k.fillWrap >= k.credits {
		k.fillWrap -= k.credits
	}
	p := &k.sr[head]
	p.sentAt = k.fill
	p.cb = cb
	next := head + 1
	if next >= k.srSize {
		next = 0
	}
	k.srHead = next
	// What the chip learns from the writes: the packet's place and blocks.
	p.hwStart = fillWrap * kPIOBlockSize
	p.hwBlocks = blocks
	p.written = false
	return head, true
}

// releaseUpdate is sc_release_update: the pass, then sc_piobufavail.
func (k *kSendContext) releaseUpdate() {
	k.releasePass()
	k.piobufavail()
}

// piobufavail is sc_piobufavail with waiters of equal rank: up to PIO_WAIT_BATCH_SIZE off the
// head, woken in list order; more left: hfi1_sc_wantpiobuf_intr(sc, 1), a forced return.
func (k *kSendContext) piobufavail() {
	n := min(len(k.wait), kWaitBatchSize)
	if n == 0 {
		return
	}
	batch := slices.Clone(k.wait[:n])
	k.wait = k.wait[n:]
	k.wantPIOBufIntr(false)
	if len(k.wait) != 0 {
		k.wantPIOBufIntr(true)
		if k.seen != nil {
			k.seen.batchesLeft++
		}
	}
	k.woke = append(k.woke, batch...)
	k.stats.Wakeups += uint64(n)
}

// queueWait is pio_wait's iowait_queue for a waiter not on the list (the first one turns the
// credit-return interrupt on and forces a return); on a context being freed it parks nothing.
func (k *kSendContext) queueWait(i int) bool {
	if k.flags&kSCFInFree != 0 {
		return false
	}
	if slices.Contains(k.wait, i) {
		return true
	}
	k.wait = append(k.wait, i)
	k.stats.Waits++
	if len(k.wait) == 1 { // was_empty
		k.wantPIOBufIntr(true)
	}
	return true
}

// wantPIOBufIntr is hfi1_sc_wantpiobuf_intr: sc_add_credit_return_intr and a forced return, or
// sc_del_credit_return_intr (its WARN_ON a fatal error of the model).
func (k *kSendContext) wantPIOBufIntr(need bool) {
	if need {
		k.creditIntr++
		k.returnCredits()
		return
	}
	if k.creditIntr == 0 {
		k.t.Fatalf("kernel model: sc_del_credit_return_intr with credit_intr_count 0")
	}
	k.creditIntr--
}

// releasePass is sc_release_update up to sc_piobufavail.
func (k *kSendContext) releasePass() {
	hwFree := k.hwFree
	oldFree := k.free
	extra := ((hwFree & kCRCounterMask) - (oldFree & kCRCounterMask)) & kCRCounterMask
	free := oldFree + extra
	code := -1
	head, tail := k.srHead, k.srTail
	for head != tail {
		p := &k.sr[tail]
		if int64(free-p.sentAt) < 0 { // sent_before(free, sent_at)
			break
		}
		if p.cb >= 0 {
			if code < 0 {
				code = int(kFillCode(hwFree))
			}
			k.rel = append(k.rel, kRelease{p.cb, ReleaseCode(code)})
			k.stats.Releases++
		}
		tail++
		if tail >= k.srSize {
			tail = 0
		}
	}
	k.srTail = tail
	k.free = free
}

// returnCredits is sc_return_credits: a 0 -> 1 write of SendCtxtCreditForce.
func (k *kSendContext) returnCredits() { k.chip.force = true }

// setCrThreshold is sc_set_cr_threshold.
func (k *kSendContext) setCrThreshold(n uint64) {
	if n != k.chip.thresh {
		k.chip.thresh = n
		k.returnCredits()
	}
}

// stop is sc_stop.
func (k *kSendContext) stop(flag uint32) {
	k.flags |= flag
	k.flags &^= kSCFEnabled
}

// disable is sc_disable; the egress (sc_wait_for_packet_egress) lets the chip send what was
// written, and a halt it meets is recorded as the package documents (no halt_work).
func (k *kSendContext) disable() {
	k.flags &^= kSCFEnabled
	if !k.chip.halted && !k.chip.stopped {
		if _, halt, _ := k.consume(); halt {
			k.flags |= kSCFHalted
			k.stats.Halts++
			if k.seen != nil {
				k.seen.egressHalts++
			}
		}
	}
	k.ctrl = false
	k.chip.stopped = true
	for k.srTail != k.srHead {
		if p := &k.sr[k.srTail]; p.cb >= 0 {
			k.rel = append(k.rel, kRelease{p.cb, kPRCSCDisable})
			k.stats.Flushed++
		}
		k.srTail++
		if k.srTail >= k.srSize {
			k.srTail = 0
		}
	}
	// The wait list, spliced off and woken in order; credit_intr_count is left as it is.
	if k.seen != nil && len(k.wait) != 0 {
		k.seen.intrLeftOn++
	}
	k.woke = append(k.woke, k.wait...)
	k.stats.Wakeups += uint64(len(k.wait))
	k.wait = nil
}

// enable is sc_enable: only on the 0 -> 1 transition of SendCtxtCtrl.CtxtEnable; the PIO init
// engine resets the chip's context.
func (k *kSendContext) enable() {
	if k.ctrl {
		return
	}
	k.hwFree, k.free, k.allocFree, k.fill, k.fillWrap = 0, 0, 0, 0, 0
	k.srHead, k.srTail = 0, 0
	k.flags = 0
	thresh, cause := k.chip.thresh, k.chip.cause
	k.chip = kChip{thresh: thresh, cause: cause}
	for i := range k.sr {
		k.sr[i].written = false
	}
	k.ctrl = true
	k.flags |= kSCFEnabled
}

// restart is sc_restart: -EINVAL (false) unless halted and not being freed.
func (k *kSendContext) restart() bool {
	if k.flags&kSCFHalted == 0 || k.flags&kSCFInFree != 0 {
		return false
	}
	k.disable()
	k.enable()
	k.stats.Restarts++
	if k.seen != nil {
		k.seen.restarts++
	}
	return true
}

// free is sc_free's part: no restarts, then sc_disable.
func (k *kSendContext) scFree() {
	k.flags |= kSCFInFree
	k.disable()
}

// haltInterrupt is the error interrupt's sc_stop(sc, SCF_HALTED) and halt_work's sc_restart.
func (k *kSendContext) haltInterrupt() {
	k.stats.Halts++
	k.stop(kSCFHalted)
	k.restart()
}

// writeBack is the chip's DMA of the credit return word.
func (k *kSendContext) writeBack(why uint64) {
	k.hwFree = k.chip.free&kCRCounterMask | why
	k.chip.returned = k.chip.free
	k.stats.CreditReturns++
}

// consume is the chip: it takes written packets in order, checks each PBC, sends it, and writes
// the free counter back when the threshold or the PBC asks, then for a force. halt: it halted.
func (k *kSendContext) consume() (n int, halt, wb bool) {
	c := &k.chip
	if c.halted || c.stopped {
		return 0, false, false
	}
	for k.sr[c.idx].written {
		p := &k.sr[c.idx]
		pbc := binary.LittleEndian.Uint64(k.mmio.mem[p.hwStart:])
		dw := kPBCLength(pbc)
		if dw < 2 || kDwordsToBlocks(dw) != p.hwBlocks {
			c.halted = true
			c.cause = CausePBCLength
			if dw < 2 {
				c.cause = CauseBadPBC
			}
			return n, true, wb
		}
		k.sent = append(k.sent, k.mmio.kWire(int(p.hwStart)))
		k.stats.Packets++
		k.stats.Blocks += p.hwBlocks
		k.stats.Bytes += dw*4 - 8
		if k.seen != nil && (c.free+p.hwBlocks)/(kCRCounterMask+1) != c.free/(kCRCounterMask+1) {
			k.seen.counterWraps++
		}
		c.free += p.hwBlocks
		n++
		p.written = false
		c.idx++
		if c.idx >= k.srSize {
			c.idx = 0
		}
		var why uint64
		if pbc&kPBCCreditReturn != 0 {
			why |= kCRDueToPBC
		}
		if c.free-c.returned >= c.thresh {
			why |= kCRDueToThreshold
		}
		if why != 0 || len(k.wait) != 0 {
			k.writeBack(why)
			wb = true
		}
	}
	if c.force {
		c.force = false
		k.writeBack(kCRDueToForce)
		wb = true
	}
	return n, false, wb
}

// process is the chip's pass and its interrupts: the credit return's sc_release_update, a halt's
// sc_stop and sc_restart.
func (k *kSendContext) process() {
	_, halt, wb := k.consume()
	if wb {
		k.releaseUpdate()
	}
	if halt {
		k.haltInterrupt()
	}
}

// chipAlone runs the chip without the credit-return interrupt's pass on both sides: it sends
// what was written and writes the credit return word back, and free, the callbacks and the
// wake-ups wait for the next pass (Process, ReleaseUpdate, or BufferAlloc's when room runs
// short). In the kernel that is the common case: the credit-return interrupt is on only while
// producers wait, so the chip's write-backs at the threshold or the PBC's request are read by the
// next sc_buffer_alloc that runs short (its refresh of alloc_free from free first, then its
// sc_release_update). Here it is a chip goroutine between its write-back and its pass, or the
// write-back of one packet while the next is still being delivered. A halt the chip meets is
// handled as the interrupt's (sc_stop, then sc_restart), with the pass not run.
func (d *kdiffCredits) chipAlone() {
	d.trace = append(d.trace, "the chip alone (write-back, no pass)")
	d.sc.hwMu.Lock()
	_, h, _ := d.sc.consume()
	d.sc.hwMu.Unlock()
	if h != nil {
		d.sc.halted(h)
	}
	_, halt, wb := d.k.consume()
	if halt {
		d.k.haltInterrupt()
	} else if wb {
		d.seen.chipOnly++
	}
}

// wouldHalt reports whether the chip, taking the written packets in order, reaches one whose PBC
// halts it.
func (k *kSendContext) wouldHalt() bool {
	if k.chip.halted || k.chip.stopped {
		return false
	}
	for i := k.chip.idx; k.sr[i].written; i = (i + 1) % k.srSize {
		p := &k.sr[i]
		dw := kPBCLength(binary.LittleEndian.Uint64(k.mmio.mem[p.hwStart:]))
		if dw < 2 || kDwordsToBlocks(dw) != p.hwBlocks {
			return true
		}
	}
	return false
}

// kdPending is a buffer allocated on both sides whose copy has not been made yet.
type kdPending struct {
	b    *Buf
	slot uint32
	id   int
	pbc  PBC
	data []byte
	cuts []int
	seg  bool
}

// kdiffCredits drives a manual SendContext and the kernel model with the same steps.
type kdiffCredits struct {
	t          *testing.T
	rng        *rand.Rand
	sc         *SendContext
	k          *kSendContext
	goRel      []kRelease
	sink       *captureSink
	goSent     [][]byte
	checked    int // packets of goSent compared so far
	relChecked int // release callbacks compared so far
	ws         []*Waiter
	goWoke     []int
	// chip: the context runs its chip goroutine; after every step the test waits for it to
	// park with nothing to do and the model's chip makes its pass (settle).
	chip    bool
	pending []kdPending
	ids     int
	trace   []string
	seen    *kdSeen
}

// kdSeen counts what the sequences reached, so that a change which stops them reaching it fails.
type kdSeen struct {
	outcomes     map[string]int      // BufferAlloc's
	codes        map[ReleaseCode]int // release codes
	counterWraps int                 // credit return counters past 2048 (the 11-bit CR_COUNTER)
	ringWraps    int                 // sr_head back to 0
	packetWraps  int                 // packets that wrapped at the end of the send buffer
	egressHalts  int                 // halts met by Disable's egress
	restarts     int                 // halts restarted (sc_restart)
	sent         int
	oddPBC       int // PBC lengths other than the data's, in the same blocks
	batchesLeft  int // passes that left waiters on the list (and forced another return)
	// BufferAlloc's own pass returned credits (the chip had written back without a pass since),
	// and the refresh of alloc_free alone made room while it had (sc_buffer_alloc then makes no
	// pass): the two sides of the kernel's "copy from receiver cache line" before its pass.
	allocPassReturned int
	refreshOnly       int
	chipOnly          int // write-backs whose pass came later (the chip alone)
	intrLeftOn        int // flushes of waiters that left the kernel's credit-return interrupt on
}

func newKdiffCredits(t *testing.T, rng *rand.Rand, seen *kdSeen, chip bool, credits, thresh int) *kdiffCredits {
	d := &kdiffCredits{t: t, rng: rng, sink: &captureSink{}, seen: seen, chip: chip}
	sc, err := New(Config{Type: Kernel, Credits: credits, Threshold: thresh, Sink: d.sink, Manual: !chip})
	if err != nil {
		t.Fatal(err)
	}
	d.sc = sc
	// With a chip goroutine, no more waiters than a pass wakes: a pass that left some would
	// force a return whose pass, on the chip goroutine, wakes them while the first goroutine
	// still wakes its batch (both legal; the order between the two is not the model's to tell).
	d.ws = make([]*Waiter, 8)
	if chip {
		d.ws = d.ws[:kWaitBatchSize]
	}
	for i := range d.ws {
		d.ws[i] = new(Waiter)
		d.ws[i].Init(func(*Waiter) { d.goWoke = append(d.goWoke, i) })
	}
	d.k = newKSendContext(t, credits, thresh)
	d.k.seen = seen
	d.trace = append(d.trace, fmt.Sprintf("New(credits %d, threshold %d)", credits, thresh))
	return d
}

func (d *kdiffCredits) fail(format string, args ...any) {
	d.t.Helper()
	tr := d.trace
	if len(tr) > 40 {
		tr = append([]string{"..."}, tr[len(tr)-40:]...)
	}
	d.t.Fatalf("%s\nsteps:\n  %s", fmt.Sprintf(format, args...), strings.Join(tr, "\n  "))
}

// errClass names an allocation's outcome.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrMsgSize):
		return "msgsize"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, ErrNotRunning):
		return "notrunning"
	case err == ErrNoCredits:
		return "nocredits"
	}
	return "other: " + err.Error()
}

// alloc allocates a packet of n data bytes on both sides; bad gives it a PBC whose length does
// not match its blocks (one more block, or 1 dword); now writes it at once.
func (d *kdiffCredits) alloc(n int, withCB, pbcReturn, bad, now, seg bool) {
	d.t.Helper()
	id := d.ids
	d.ids++
	dw := 2 + (n+3)/4
	var flags PBC
	if pbcReturn {
		flags = PBCCreditReturn
	}
	pdw := uint32(dw)
	if odd := d.rng.IntN(6) == 0; odd && !bad { // another length in the same blocks: the chip sends what the PBC says
		blocks := dwordsToBlocks(dw)
		pdw = uint32(max(2, (blocks-1)*blockDWs+1+d.rng.IntN(blockDWs)))
		if pdw > MaxPacketDWs {
			pdw = uint32(dw)
		}
		d.seen.oddPBC++
	}
	if bad {
		pdw = uint32(dw + blockDWs)
		if pdw > MaxPacketDWs || d.rng.IntN(3) == 0 {
			pdw = 1
		}
	}
	var rel Releaser
	cb := -1
	if withCB {
		cb = id
		rel = ReleaseFunc(func(c ReleaseCode) { d.goRel = append(d.goRel, kRelease{id, c}) })
	}
	d.trace = append(d.trace, fmt.Sprintf("BufferAlloc(%d dwords) #%d cb %v pbcReturn %v bad %v now %v seg %v", dw, id, withCB, pbcReturn, bad, now, seg))
	b, err := d.sc.BufferAlloc(dw, rel)
	var want string
	var slot uint32
	switch {
	case dw < 2 || dw > kPBCLengthDWsMask || kDwordsToBlocks(uint64(dw)) > d.k.credits:
		want = "msgsize" // deliberate: refused before the kernel's allocator
	case d.k.flags&kSCFInFree != 0:
		want = "closed"
	case d.k.flags&kSCFEnabled == 0:
		want = "notrunning"
	default:
		var ok bool
		if slot, ok = d.k.bufferAlloc(uint32(dw), cb); ok {
			want = "ok"
		} else {
			want = "nocredits"
			d.k.stats.NoCredits++
		}
	}
	if got := errClass(err); got != want {
		d.fail("BufferAlloc(%d dwords): %s, the kernel's %s", dw, got, want)
	}
	// The credit return its pass may have asked for, before the copy: the chip goroutine's
	// pass then has nothing else to take, as the model's.
	d.settle()
	d.seen.outcomes[want]++
	if err == nil && d.k.srHead == 0 {
		d.seen.ringWraps++
	}
	if err == nil && uint64(b.start)+uint64(b.blocks)*kPIOBlockSize > d.k.size {
		d.seen.packetWraps++
	}
	if err != nil {
		return
	}
	data := make([]byte, n+7)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(data[i:], d.rng.Uint64())
	}
	data = data[:n]
	if n >= 8 {
		binary.LittleEndian.PutUint64(data, uint64(id))
	}
	p := &d.k.sr[slot]
	if uint64(b.start) != p.hwStart || uint64(b.blocks) != p.hwBlocks || b.sentAt != p.sentAt || d.sc.srHead.Load() != d.k.srHead {
		d.fail("BufferAlloc: buffer at %d, %d blocks, sent_at %d, sr_head %d; the kernel's %d, %d, %d, %d",
			b.start, b.blocks, b.sentAt, d.sc.srHead.Load(), p.hwStart, p.hwBlocks, p.sentAt, d.k.srHead)
	}
	pd := kdPending{b: b, slot: slot, id: id, pbc: CreatePBC(flags, 0, uint8(id%16), pdw), data: data, seg: seg || n%4 != 0}
	if pd.seg {
		for range d.rng.IntN(4) {
			pd.cuts = append(pd.cuts, d.rng.IntN(n+1))
		}
		pd.cuts = sortedInts(pd.cuts)
	}
	d.pending = append(d.pending, pd)
	if now {
		d.write(len(d.pending) - 1)
	}
}

// write makes pending buffer i's copy on both sides.
func (d *kdiffCredits) write(i int) {
	d.t.Helper()
	pd := d.pending[i]
	d.pending = slices.Delete(d.pending, i, i+1)
	d.trace = append(d.trace, fmt.Sprintf("copy #%d", pd.id))
	kp := newKPioBuf(d.k.mmio, d.k.sr[pd.slot].hwStart/kPIOBlockSize)
	src := func(j int, p []byte) kSrc {
		return kSrc{b: append(bytes.Clone(p), make([]byte, 8)...), base: uint64(1<<40) + uint64(j)<<20 + uint64(d.rng.IntN(8))}
	}
	var err error
	if !pd.seg {
		s := src(0, pd.data)
		s.base &^= 7 // pio_copy: an 8-byte aligned source
		kp.pioCopy(uint64(pd.pbc), s, s.base, len(pd.data)/4)
		err = pd.b.Copy(pd.pbc, pd.data)
	} else {
		c := kdiffCopyCase{data: pd.data, cuts: pd.cuts}
		ps := c.pieces()
		s := src(0, ps[0])
		kp.segStart(uint64(pd.pbc), s, s.base, uint64(len(ps[0])))
		for j, p := range ps[1:] {
			s := src(j+1, p)
			kp.segMid(s, s.base, uint64(len(p)))
		}
		kp.segEnd()
		err = pd.b.CopySegs(pd.pbc, ps)
	}
	if err != nil {
		d.fail("copy #%d: %v", pd.id, err)
	}
	d.k.sr[pd.slot].written = true
	d.settle() // one packet per pass of the chip goroutine, as the model's
}

// settle, with a chip goroutine, waits until it has parked with nothing to do (a minute at most:
// a hang guard) and makes the model's chip pass. The chip goroutine parks only after its pass,
// and loses parked only once woken: parked, then no work, then parked again is a chip that
// finished every pass the step started (the first look may be of a park before the step's
// doorbell was taken up; the second is after the work that doorbell brought was done).
func (d *kdiffCredits) settle() {
	d.t.Helper()
	if !d.chip {
		return
	}
	sc := d.sc
	deadline := time.Now().Add(time.Minute)
	for !(sc.parked.Load() && !sc.hasWork() && sc.parked.Load()) {
		if time.Now().After(deadline) {
			d.fail("the chip goroutine did not settle in a minute (in flight %d, stats %+v)", sc.InFlight(), sc.Stats())
		}
		runtime.Gosched()
	}
	d.k.process()
}

// fastForward sends packets of the whole context (64 blocks at most), each asking for a credit
// return, through both until the chip's free counter is within below blocks of the next wrap of
// the credit return word's 11-bit counter, and compares once: the quiet steps that follow cross
// the wrap without thousands of steps to get there.
func (d *kdiffCredits) fastForward(below uint64) {
	d.t.Helper()
	blocks := min(d.k.credits, 64)
	wrap := uint64(kCRCounterMask + 1)
	for d.k.chip.free+below+blocks < (d.k.chip.free/wrap+1)*wrap {
		d.alloc(int(blocks*kPIOBlockSize-8), true, true, false, true, false)
		d.trace = append(d.trace, "Process")
		d.sc.Process()
		d.k.process()
	}
	d.compare("the fast forward")
}

// writeAll ends every pending copy, in random order.
func (d *kdiffCredits) writeAll() {
	for len(d.pending) > 0 {
		d.write(d.rng.IntN(len(d.pending)))
	}
}

// compare holds every observable of the two to each other.
func (d *kdiffCredits) compare(step string) {
	d.t.Helper()
	sc, k := d.sc, d.k
	type fields struct {
		fill, allocFree, fillWrap, free, hwFree uint64
		srHead, srTail, flags                   uint32
		ctrl                                    bool
		chipIdx                                 uint32
		chipFree, returned, thresh              uint64
		halted, stopped, force                  bool
		avail                                   int
		enabled, haltedFlag                     bool
		srSize                                  uint32
	}
	sc.hwMu.Lock()
	sc.releaseMu.Lock()
	g := fields{sc.fill, sc.allocFree, sc.fillWrap, sc.free.Load(), sc.hwFree.Load(),
		sc.srHead.Load(), sc.srTail, sc.flags.Load(), sc.hwEnabled,
		sc.chipIdx, sc.chipFree, sc.returned, sc.threshold.Load(),
		sc.hwHalted, sc.hwStopped, sc.force.Load(), 0, false, false, sc.srSize}
	sc.releaseMu.Unlock()
	sc.hwMu.Unlock()
	g.avail, g.enabled, g.haltedFlag = sc.Avail(), sc.Enabled(), sc.Halted()
	w := fields{k.fill, k.allocFree, k.fillWrap, k.free, k.hwFree,
		k.srHead, k.srTail, k.flags, k.ctrl,
		k.chip.idx, k.chip.free, k.chip.returned, k.chip.thresh,
		k.chip.halted, k.chip.stopped, k.chip.force,
		int(k.credits - (k.fill - k.free)), k.flags&kSCFEnabled != 0, k.flags&kSCFHalted != 0, k.srSize}
	if g != w {
		d.fail("after %s:\n got %+v\nwant %+v", step, g, w)
	}
	if len(d.goRel) != len(k.rel) || !slices.Equal(d.goRel[d.relChecked:], k.rel[d.relChecked:]) {
		d.fail("after %s: release callbacks\n got %v\nwant %v", step, d.goRel, k.rel)
	}
	d.relChecked = len(k.rel)
	if !slices.Equal(d.goWoke, k.woke) {
		d.fail("after %s: wake-ups %v, the kernel's %v", step, d.goWoke, k.woke)
	}
	if len(k.wait) != 0 && k.creditIntr == 0 {
		d.fail("after %s: kernel model: waiters %v with credit_intr_count 0", step, k.wait)
	}
	if got := listOf(sc, d.ws); !slices.Equal(got, k.wait) && len(got)+len(k.wait) != 0 {
		d.fail("after %s: wait list %v, the kernel's %v", step, got, k.wait)
	}
	d.goSent = append(d.goSent, d.sink.take()...)
	if len(d.goSent) != len(k.sent) {
		d.fail("after %s: %d packets sent, the kernel's chip %d", step, len(d.goSent), len(k.sent))
	}
	for i := d.checked; i < len(k.sent); i++ {
		if !bytes.Equal(d.goSent[i], k.sent[i]) {
			d.fail("after %s: packet %d sent\n %x\nthe kernel's\n %x", step, i, d.goSent[i], k.sent[i])
		}
	}
	d.checked = len(k.sent)
	if !bytes.Equal(sc.buf, k.mmio.mem) {
		for i := range sc.buf {
			if sc.buf[i] != k.mmio.mem[i] {
				d.fail("after %s: send buffer byte %d %#x, the kernel's %#x", step, i, sc.buf[i], k.mmio.mem[i])
			}
		}
	}
	if st := sc.Stats(); st != k.stats {
		d.fail("after %s: Stats\n got %+v\nwant %+v", step, st, k.stats)
	}
	if h := sc.LastHalt(); (h == nil) != (k.chip.cause == 0) || h != nil && h.Cause != k.chip.cause {
		d.fail("after %s: LastHalt %v, the kernel's chip halted with %v", step, h, k.chip.cause)
	}
}

// step runs one random operation on both and compares; quiet: none that stops, disables or
// halts the context (the counters then run on, past the credit return word's 11 bits).
func (d *kdiffCredits) step(quiet bool) {
	d.t.Helper()
	credits := int(d.k.credits)
	op := d.rng.IntN(100)
	if quiet {
		op = d.rng.IntN(85)
	} else if d.k.flags&kSCFEnabled == 0 && d.rng.IntN(4) == 0 {
		op = 87 + d.rng.IntN(10) // mostly back to work: Disable, Enable or Restart
	}
	var name string
	switch {
	case op < 4:
		n := 1
		if !d.chip { // a burst, so that a pass leaves some (on the chip goroutine the first park's forced return races the rest)
			n = 1 + d.rng.IntN(len(d.ws))
		}
		for range n {
			i := d.rng.IntN(len(d.ws))
			name = fmt.Sprintf("QueueWait(%d)", i)
			d.trace = append(d.trace, name)
			if got, want := d.sc.QueueWait(d.ws[i], d.sc.ReleaseSeq()), d.k.queueWait(i); got != want {
				d.fail("%s: %v, the kernel's %v", name, got, want)
			}
		}
	case op < 5:
		i := d.rng.IntN(len(d.ws))
		name = fmt.Sprintf("CancelWait(%d)", i)
		d.trace = append(d.trace, name)
		j := slices.Index(d.k.wait, i)
		if j >= 0 {
			d.k.wait = slices.Delete(d.k.wait, j, j+1)
		}
		if got := d.sc.CancelWait(d.ws[i]); got != (j >= 0) {
			d.fail("%s: %v, the kernel's list %v", name, got, d.k.wait)
		}
	case op < 34:
		maxBytes := credits*BlockSize - pbcBytes
		n := d.rng.IntN(min(maxBytes, 3*BlockSize) + 1)
		switch d.rng.IntN(16) {
		case 0, 1:
			n = d.rng.IntN(maxBytes + BlockSize) // now and then past the context: ErrMsgSize
		case 2: // a PBC's longest packet, and one dword more
			n = (MaxPacketDWs-2)*4 - 3 + d.rng.IntN(8)
		}
		bad := !quiet && d.rng.IntN(25) == 0
		if bad && d.chip { // the chip goroutine halts on it at once: its restart waits for every copy
			d.writeAll()
		}
		d.alloc(n, d.rng.IntN(4) != 0, d.rng.IntN(5) == 0, bad, bad || d.rng.IntN(3) != 0, d.rng.IntN(2) == 0)
		name = "BufferAlloc"
	case op < 44:
		if len(d.pending) == 0 {
			return
		}
		d.write(d.rng.IntN(len(d.pending)))
		name = "copy"
	case op < 66:
		if d.k.wouldHalt() { // the halt's restart waits for every copy: end them first
			d.writeAll()
		}
		if !d.chip && d.rng.IntN(3) == 0 {
			d.chipAlone()
			name = "the chip alone"
			break
		}
		name = "Process"
		d.trace = append(d.trace, name)
		d.sc.Process()
		d.k.process()
	case op < 72:
		name = "ReleaseUpdate"
		d.trace = append(d.trace, name)
		d.sc.ReleaseUpdate()
		d.k.releaseUpdate()
	case op < 80:
		name = "ReturnCredits"
		d.trace = append(d.trace, name)
		d.sc.ReturnCredits()
		d.k.returnCredits()
	case op < 85:
		th := 1 + d.rng.IntN(credits)
		name = fmt.Sprintf("SetThreshold(%d)", th)
		d.trace = append(d.trace, name)
		if err := d.sc.SetThreshold(th); err != nil {
			d.fail("%s: %v", name, err)
		}
		d.k.setCrThreshold(uint64(th))
	case op < 87:
		name = "Stop"
		d.trace = append(d.trace, name)
		d.sc.Stop()
		d.k.stop(kSCFFrozen)
	case op < 90:
		d.writeAll()
		name = "Disable"
		d.trace = append(d.trace, name)
		d.sc.Disable()
		d.k.disable()
	case op < 94:
		name = "Enable"
		d.trace = append(d.trace, name)
		if err := d.sc.Enable(); err != nil {
			d.fail("Enable: %v", err)
		}
		d.k.enable()
	case op < 97:
		d.writeAll()
		name = "Restart"
		d.trace = append(d.trace, name)
		err := d.sc.Restart()
		if ok := d.k.restart(); ok != (err == nil) || !ok && !errors.Is(err, ErrInvalid) {
			d.fail("Restart: %v, the kernel's sc_restart ok %v", err, ok)
		}
	default:
		d.writeAll()
		name = "InjectHalt"
		d.trace = append(d.trace, name)
		err := d.sc.InjectHalt()
		var want error
		switch {
		case d.k.flags&kSCFEnabled == 0 && d.k.flags&kSCFInFree != 0:
			want = ErrClosed
		case d.k.flags&kSCFEnabled == 0 || d.k.chip.halted || d.k.chip.stopped:
			want = ErrNotRunning
		default:
			d.k.chip.halted = true
			d.k.chip.cause = CauseInjected
			d.k.haltInterrupt()
		}
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			d.fail("InjectHalt: %v, want %v", err, want)
		}
	}
	d.settle()
	d.compare(name)
}

// count records what the run reached, at its end.
func (d *kdiffCredits) count() {
	for _, r := range d.k.rel {
		d.seen.codes[r.code]++
	}
	d.seen.sent += len(d.k.sent)
}

// finish closes both (sc_free) and checks that every packet with a callback was released once.
func (d *kdiffCredits) finish() {
	d.t.Helper()
	d.writeAll()
	d.trace = append(d.trace, "Close")
	if err := d.sc.Close(); err != nil {
		d.fail("Close: %v", err)
	}
	d.k.scFree()
	if d.chip {
		d.k.process() // the model's chip: nothing to do once disabled
	}
	d.compare("Close")
	if _, err := d.sc.BufferAlloc(2, nil); !errors.Is(err, ErrClosed) {
		d.fail("BufferAlloc after Close: %v", err)
	}
	if len(d.k.wait) != 0 {
		d.fail("waiters %v left on a closed context's list", d.k.wait)
	}
	seen := map[int]int{}
	for _, r := range d.k.rel {
		seen[r.id]++
	}
	for id, n := range seen {
		if n != 1 {
			d.fail("packet %d released %d times", id, n)
		}
	}
	d.count()
}

// TestCreditsMatchKernelRandom drives seeded random sequences of allocations (any size, now and
// then too large; with and without a callback; PBCs asking for a credit return, now and then one
// that halts the chip; copies whole and segmented, made at once or later in any order), chip
// passes, the chip's write-backs whose pass comes later (chipAlone), release passes, forced
// returns, threshold changes, Stop, Disable, Enable, Restart and InjectHalt through a manual
// SendContext and the kernel model, comparing every observable after every step. One seed in ten
// is quiet (no Stop, Disable or halt) from just below a wrap of the credit return counter.
//
// Until the chip's write-backs could come without their pass, a BufferAlloc that skipped the
// refresh of alloc_free from free and went straight to its release pass, or did not refresh it
// after that pass, passed: every write-back was followed at once by its pass, so at every
// BufferAlloc free already held what the chip had returned, the extra pass returned nothing, ran
// no callback, and its request for a credit return when producers wait was one already pending
// (the first park asks for one, and every pass that leaves waiters asks again).
func TestCreditsMatchKernelRandom(t *testing.T) {
	seeds, steps, quietSteps := 400, 300, 6000
	if testing.Short() { // -race -short, qemu: about a second
		seeds, steps, quietSteps = 24, 200, 800
	}
	seen := &kdSeen{outcomes: map[string]int{}, codes: map[ReleaseCode]int{}}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 0xc4ed175))
		credits := 1 + rng.IntN(24)
		n := steps
		switch seed % 10 {
		case 0: // quiet, from just below a wrap of the 11-bit credit return counter
			credits = 4 + rng.IntN(21)
			n = quietSteps
		case 7:
			credits = 1 + rng.IntN(MaxBlocks)
		}
		d := newKdiffCredits(t, rng, seen, false, credits, 1+rng.IntN(credits))
		d.compare("New")
		if seed%10 == 0 {
			d.fastForward(uint64(rng.IntN(160)))
		}
		for range n {
			d.step(seed%10 == 0)
		}
		d.finish()
	}
	t.Logf("reached: %+v", *seen)
	for _, o := range []string{"ok", "nocredits", "notrunning", "msgsize"} {
		if seen.outcomes[o] == 0 {
			t.Errorf("no BufferAlloc ended %s", o)
		}
	}
	for _, c := range []ReleaseCode{kPRCOK, kPRCPBC, kPRCThreshold, kPRCPBC | kPRCThreshold, kPRCSCDisable} {
		if seen.codes[c] == 0 {
			t.Errorf("no release with code %v", c)
		}
	}
	if seen.counterWraps == 0 || seen.ringWraps == 0 || seen.packetWraps == 0 || seen.egressHalts == 0 || seen.restarts == 0 || seen.batchesLeft == 0 ||
		seen.allocPassReturned == 0 || seen.refreshOnly == 0 || seen.chipOnly == 0 || seen.intrLeftOn == 0 {
		t.Errorf("a path not reached: %+v", *seen)
	}
}

// kSCAllocThreshold is sc_alloc's initial credit return threshold for a context of type typ
// (sc_percent_to_threshold, sc_mtu_to_threshold in u32 arithmetic; user_credit_return_threshold
// at its default, 33), with mtu in place of hfi1_max_mtu as set_threshold does for a VL's MTU.
func kSCAllocThreshold(typ Type, credits, mtu, hdrqentsize uint32) uint32 {
	percent := func(p uint32) uint32 { return credits * p / 100 }
	mtuTo := func() uint32 {
		release := (mtu + hdrqentsize<<2 + kPIOBlockSize - 1) / kPIOBlockSize // DIV_ROUND_UP
		if credits <= release {
			return 1
		}
		return credits - release
	}
	switch typ {
	case ACK:
		return percent(50)
	case User:
		return percent(33)
	}
	return min(percent(50), mtuTo()) // kernel and VL15 contexts
}

// TestDefaultThresholdMatchesSCAlloc: every type, every size 1..MaxBlocks, the MTUs a VL can
// have: New's default threshold is sc_alloc's, but at least 1 (the documented choice: the
// kernel's formula gives 0 for the smallest contexts, a threshold the chip model refuses).
func TestDefaultThresholdMatchesSCAlloc(t *testing.T) {
	for typ := range Type(NumTypes) {
		for _, mtu := range []int{256, 512, 1024, 2048, 4096, 8192, 10240} {
			for credits := 1; credits <= MaxBlocks; credits++ {
				want := max(1, kSCAllocThreshold(typ, uint32(credits), uint32(mtu), 32))
				if got := DefaultCreditThreshold(typ, credits, mtu, 32); uint32(max(1, got)) != want {
					t.Fatalf("%v, %d credits, MTU %d: DefaultCreditThreshold %d, sc_alloc's %d", typ, credits, mtu, got, want)
				}
				if credits > 64 && credits%61 != 0 && credits != MaxBlocks {
					continue // New for a sample; the formula for every size
				}
				sc, err := New(Config{Type: typ, Credits: credits, MTU: mtu, Manual: true})
				if err != nil {
					t.Fatal(err)
				}
				if got := sc.Threshold(); uint32(got) != want {
					t.Fatalf("New(%v, %d credits, MTU %d): threshold %d, sc_alloc's %d", typ, credits, mtu, got, want)
				}
				sc.Close()
			}
		}
	}
}

// TestCreditsMatchKernelChipGoroutine: the same sequences with the chip goroutine instead of a
// manual chip. After every step (every copy among them) the test waits for the goroutine to
// park with nothing to do, and the model's chip makes its pass: the goroutine's passes, its
// write-backs, release callbacks, halts met and restarts, wake-ups and sends agree with the
// model's step for step.
func TestCreditsMatchKernelChipGoroutine(t *testing.T) {
	seeds, steps := 60, 300
	if testing.Short() { // -race -short, qemu: about a second
		seeds, steps = 8, 200
	}
	seen := &kdSeen{outcomes: map[string]int{}, codes: map[ReleaseCode]int{}}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 0xc41b))
		credits := 1 + rng.IntN(24)
		d := newKdiffCredits(t, rng, seen, true, credits, 1+rng.IntN(credits))
		d.settle()
		d.compare("New")
		for range steps {
			d.step(false)
		}
		d.finish()
	}
	t.Logf("reached: %+v", *seen)
	if seen.outcomes["ok"] == 0 || seen.outcomes["nocredits"] == 0 || seen.codes[kPRCThreshold] == 0 || seen.restarts == 0 {
		t.Errorf("a path not reached: %+v", *seen)
	}
}

// TestReleasePassReadsTheWordOnce: sc_release_update reads the credit return word once and gives
// every callback of its pass fill_code of that read (code is filled in on the first user), with
// the free count that read advanced to, even when the chip writes the word back again while the
// callbacks run: the pass holds the release lock, not the chip's, so a chip goroutine (or a
// Process on another goroutine) may. Packets 0 and 1 go out and are written back for the
// threshold, their pass not yet run; packet 2, whose PBC asks for a return, is written. A
// ReleaseUpdate runs the pass, and packet 0's Releaser waits until a Process on another
// goroutine has sent packet 2 and written the word back for its PBC: packet 1's callback still
// gets the threshold code, and packet 2 is released by that Process's own pass, with the PBC's.
// The random sequences cannot tell a pass that reads the word again per callback: nothing writes
// it back while a pass of theirs runs.
func TestReleasePassReadsTheWordOnce(t *testing.T) {
	sc, err := New(Config{Type: Kernel, Credits: 8, Threshold: 2, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	codes := map[int]ReleaseCode{}
	inPass := make(chan struct{})
	var waitErr error
	for i, flags := range []PBC{0, 0, PBCCreditReturn} {
		rel := ReleaseFunc(func(c ReleaseCode) {
			mu.Lock()
			codes[i] = c
			mu.Unlock()
			if i != 0 {
				return
			}
			word, deadline := sc.hwFree.Load(), time.Now().Add(time.Minute) // before the other goroutine may write
			close(inPass)
			for sc.hwFree.Load() == word { // a slow Releaser: the other goroutine's write-back comes meanwhile
				if time.Now().After(deadline) {
					waitErr = errors.New("no write-back from the other goroutine's Process in a minute")
					return
				}
				runtime.Gosched()
			}
		})
		b, err := sc.BufferAlloc(2, rel)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(flags, 0, 0, 2), nil); err != nil {
			t.Fatal(err)
		}
		if i == 1 { // the chip sends packets 0 and 1, writes back for the threshold; no pass yet
			sc.hwMu.Lock()
			sc.consume()
			sc.hwMu.Unlock()
		}
	}
	if w := sc.hwFree.Load(); w != 2|kCRDueToThreshold {
		t.Fatalf("credit return word %#x after packets 0 and 1, want %#x", w, 2|kCRDueToThreshold)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-inPass
		sc.Process() // sends packet 2 and writes back for its PBC; its pass waits for the release lock
	}()
	sc.ReleaseUpdate()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the other goroutine's Process did not return in a minute")
	}
	if waitErr != nil {
		t.Fatal(waitErr)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[int]ReleaseCode{0: kPRCThreshold, 1: kPRCThreshold, 2: kPRCPBC}
	if !maps.Equal(codes, want) {
		t.Fatalf("release codes %v, want %v (one code per pass, from the word it read)", codes, want)
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
}
