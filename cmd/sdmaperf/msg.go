package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/usdma"
)

// -mode msg: messages, not packets. Each producer owns a usdma packet queue (hfi1's user SDMA
// path, as PSM uses it) with -depth request slots, and sends messages of -size bytes, split by
// the queue into -mtu byte packets whose headers the engine's AHG builds. Everything the report
// says per packet is per message here: the rate is messages per second, the bandwidth the
// messages' bytes, the latency from Submit to the request's end. The queue registers each
// producer's message buffers with the device itself (its pin cache), so -mem is kvaddr, and
// -frags and -send do not apply (the queue splits the data at page ends and defers on a full
// ring itself).

// ModeMsg measures whole messages through a usdma packet queue.
const ModeMsg Mode = "msg"

// Limits of -mode msg.
const (
	maxMessage = 64 << 20 // bytes per message
	defaultMTU = 8192
)

// msgTemplate is the messages' header template (PSM's eager opcode 0xC0, VL 0).
var msgTemplate = usdma.Template{DLID: 1, SLID: 2, Opcode: 0xc0, PKey: 0xffff, DestQP: 0x80}

// checkMsg checks the flags of -mode msg, and that -mtu is given only with it.
func checkMsg(cfg *Config, raw rawFlags, set flagSet) error {
	mode := raw.typed("mode")
	if cfg.Mode != ModeMsg {
		if set["mtu"] {
			return usagef("%s applies to %s msg", raw.typed("mtu"), mode)
		}
		cfg.MTU = 0 // not part of a packet run's configuration
		return nil
	}
	if cfg.MTU < usdma.PIOBlockSize || cfg.MTU > usdma.DefaultMTU || cfg.MTU%usdma.PIOBlockSize != 0 {
		return usagef("-mtu %d: want a multiple of %d in %d..%d", cfg.MTU, usdma.PIOBlockSize, usdma.PIOBlockSize, usdma.DefaultMTU)
	}
	if cfg.Mem != "kvaddr" {
		return usagef("%s msg registers the messages itself (the packet queue's pin cache); %s %s does not apply", mode, raw.typed("mem"), cfg.Mem)
	}
	if cfg.Shared {
		return usagef("%s msg sends each slot's own message; %s does not apply", mode, raw.typed("shared"))
	}
	if set["frags"] {
		return usagef("%s msg sends each message as one data vector, cut into %s packets by the packet queue; %s does not apply", mode, raw.typed("mtu"), raw.typed("frags"))
	}
	if set["send"] {
		return usagef("%s msg: the packet queue waits for ring room itself (usdma's deferral); %s does not apply", mode, raw.typed("send"))
	}
	// The packet queue's Submit sleeps on a full ring until a completion pass frees room; with
	// -completion poll only a producer runs those passes, and it sleeps in Submit: the run hung
	// (-n 200 of 64 KiB messages: 66 done in 30 s, each at the Ctrl-C).
	if cfg.Completion == "poll" {
		return usagef("-completion poll with -mode msg: the packet queue's Submit sleeps on a full ring until a completion pass frees room, and with -completion poll only the producer, asleep in Submit, would run it; -mode msg takes -completion irq")
	}
	if cfg.Depth > 1<<16 {
		return usagef("%s %d: a packet queue has at most 65536 request slots", spell(raw, set, "depth"), cfg.Depth)
	}
	// A request's packet count is 16 bits (usdma.Message: NPkts): the largest message in
	// -mtu packets must fit, or every Submit of the run is refused.
	if big := cfg.largest(); (big+cfg.MTU-1)/cfg.MTU > maxMsgPkts {
		return usagef("-size %d with -mtu %d makes %d packets per message; a request holds at most %d (raise -mtu or lower -size)",
			big, cfg.MTU, (big+cfg.MTU-1)/cfg.MTU, maxMsgPkts)
	}
	return nil
}

// maxMsgPkts is the most packets one -mode msg request holds (the uapi's 16-bit npkts).
const maxMsgPkts = 1<<16 - 1

// maxSizeFor is the largest -size of the mode: a packet, or a message.
func maxSizeFor(m Mode) int {
	if m == ModeMsg {
		return maxMessage
	}
	return maxPacket
}

// initMsg gives producer p its packet queue: -depth slots on p's engine, the txreqs from the
// -alloc allocator, and a Done that accounts for each message as complete does for a packet.
func (p *producer) initMsg(r *sizeRun) error {
	a, err := newMsgAllocator(r.cfg.Alloc, r.cfg.Ring)
	if err != nil {
		return err
	}
	p.msgStart = make([]int64, r.cfg.Depth)
	pq, err := usdma.New(usdma.Config{Device: r.dev, Engine: p.eng, Slots: r.cfg.Depth, Alloc: a, MTU: r.cfg.MTU,
		Ctxt: uint16(p.id), Done: p.msgDone})
	if err != nil {
		return err
	}
	p.pq = pq
	p.msgInfo, p.msgHdr = usdma.Message(0, r.cfg.MTU, msgTemplate, p.bufs[0])
	r.close = append(r.close, func() error { return pq.Close(context.Background()) })
	return nil
}

// newMsgAllocator builds the -alloc allocator of the queue's txreqs. A list holds what can be
// in flight at once: a ring's worth, plus the 16 packets a request pass builds ahead, twice.
func newMsgAllocator(kind string, ring int) (alloc.Allocator[usdma.TxReq], error) {
	switch kind {
	case "slab":
		return alloc.NewSlab(alloc.SlabConfig[usdma.TxReq]{ObjectsPerSlab: 256})
	case "list":
		return alloc.NewList[usdma.TxReq](ring+2*usdma.MaxPktsPerQueue, nil)
	case "pool":
		return alloc.NewPool[usdma.TxReq](nil), nil
	}
	return nil, fmt.Errorf("unknown allocator %q", kind)
}

// msgDone accounts for a message that ended (usdma Config.Done, on the completion pass).
func (p *producer) msgDone(slot int, e usdma.CompEntry) {
	if e.Status == usdma.Complete {
		if p.run.measuring.Load() {
			_ = p.hist.RecordValue(int64(p.run.now()) - p.msgStart[slot])
			p.okPackets.Add(1)
		}
	} else if e.Errcode == usdma.ENOSPC {
		// A packet's mapping failed (-faults map, mapnth): the request stopped there, as a
		// packet run drops the packet whose Add failed. It counts where that one does, in
		// map-errors and the faults sum, not among the aborted.
		p.msgMapErrors.Add(1)
	} else {
		p.aborted.Add(1)
	}
	p.slots <- int32(slot) // never blocks: the channel has room for every slot
}

// sendMsg sends one message on the next free slot. It reports false when the producer must stop.
func (p *producer) sendMsg(ctx context.Context) bool {
	slot, ok := p.take(ctx)
	if !ok {
		return false
	}
	// Done gives the slot back before the request's end is visible (usdma Config.Done): until
	// that Done returned the slot reads QUEUED. usdma's Submit waits for such an end itself now
	// (a Submit on a slot whose Done runs on another goroutine); this wait, the same yield loop
	// here (one Comp load per message), stays as TestMsgSlotReusedAfterItsEnd's window.
	for p.pq.Comp(int(slot)).Status == usdma.Queued {
		if h := testMsgSlotQueued.Load(); h != nil {
			(*h)()
		}
		runtime.Gosched()
	}
	info := p.msgInfo
	info.CompIdx = uint16(slot)
	before := p.pq.Stats().Requests
	p.msgStart[slot] = int64(p.run.now())
	err := p.pq.Submit(ctx, info, &p.msgHdr, p.bufs[slot])
	if err == nil {
		return true
	}
	if p.pq.Stats().Requests == before { // refused before it claimed the slot: Done will not run
		p.slots <- slot
	}
	if ctx.Err() != nil { // Ctrl-C: its cut Submit fails matching ErrFault too; stop, not go on
		return false
	}
	if errors.Is(err, usdma.ErrNotRunning) || errors.Is(err, usdma.ErrFault) || errors.Is(err, usdma.ErrNoMem) {
		return true // a halt or a mapping fault (-faults): the slot ends ERROR (msgDone counts it)
	}
	p.err = fmt.Errorf("producer %d: %w", p.id, err)
	return false
}

// msgBanner describes a -mode msg run for the table heading.
func msgBanner(cfg Config) string {
	return fmt.Sprintf("%d-byte packets through a usdma packet queue (AHG); a row's figures are per message; -frags and -send (Ring full above) do not apply: the queue sleeps on a full ring as user SDMA does, and the counters count it", cfg.MTU)
}

// checkMsgFaults refuses -faults sinkfail with -mode msg: the sink fails packet deliveries, and
// a failed delivery still completes its request OK, so a row that counts messages cannot tell
// which messages lost a packet (accepted() would take packets from messages).
func checkMsgFaults(cfg *Config, _ rawFlags, _ flagSet) error {
	if cfg.Mode == ModeMsg && cfg.Faults.SinkFail > 0 {
		return usagef("-faults sinkfail=%v fails packet deliveries; -mode msg counts messages and cannot tell which lost a packet: use -mode bw", cfg.Faults.SinkFail)
	}
	return nil
}

// testMsgSlotQueued, if set (by tests), is called by sendMsg each time it finds the slot it took
// still QUEUED (its Done has given it back and not yet returned): a test's window.
var testMsgSlotQueued atomic.Pointer[func()]
