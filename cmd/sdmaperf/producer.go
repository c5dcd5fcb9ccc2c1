package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/usdma"
)

// perfTx is sdmaperf's txreq: sdma.TxReq first, as the hfi1 API prescribes, then what the
// completion callback needs to account for the packet.
type perfTx struct {
	sdma.TxReq
	p     *producer     // the producer that sent it
	start time.Duration // submit time, on the run's monotonic clock
	size  int           // packet bytes
	slot  int32         // the payload slot the packet's fragments live in
}

// Complete is every packet's completion (sdma.Completer, on the engine's completion pass): the
// txreq's Completer is the *perfTx itself, so the completion finds its packet without allocating.
func (tx *perfTx) Complete(_ *sdma.TxReq, st sdma.Status) { tx.p.complete(tx, st) }

// producer is one sending goroutine and the state its completions update.
//
// Ownership: the producer goroutine owns everything but the fields marked otherwise. The
// callback runs on its engine's completion pass, one pass at a time per engine, and a producer
// sends to one engine only, so the callback's writes to hist are serialised; the producer reads
// hist only after it drained its slots, which the callbacks gave back after their writes.
//
// Payload memory comes in depth slots, and the slot is the flow-control token: a packet in
// flight holds one, so at most depth are in flight and no two packets in flight share memory.
// (The txreq objects come from the -alloc allocator and are independent of the slots: a pool
// may drop idle objects, never payload memory.)
type producer struct {
	id    int
	run   *sizeRun
	eng   *sdma.Engine
	alloc alloc.Allocator[perfTx]
	slots chan int32 // free payload slots: taken by the producer, given back by the callback

	// Payload memory, slot i: bufs[i] (-mem kvaddr), or pages[i*frags : (i+1)*frags], one page
	// per fragment (-mem page).
	bufs   [][]byte
	region *dma.Region
	pages  []dma.Page

	// Written by the callback (atomics: the sampler reads them while the run goes on).
	okPackets atomic.Uint64
	aborted   atomic.Uint64
	// msgMapErrors counts -mode msg requests that ended ENOSPC (a packet's mapping failed):
	// written by msgDone on the completion pass, read by collect.
	msgMapErrors atomic.Uint64
	hist         *hdrhistogram.Histogram // callback only, see above

	// -send sleep: the producer's iowait (hfi1: struct iowait of a QP). Its sleep is
	// ParkOrRetry; its TxHead holds the one packet parked on a full ring and is touched only by
	// the producer goroutine (ParkOrRetry runs inside the producer's Send), so no lock guards it.
	// Its wakeup runs on the engine's completion pass and signals woken (cap 1: a wakeup that
	// comes before the producer waits is not lost); the producer receives from woken.
	iow   sdma.IOWait
	woken chan struct{}

	// -mode msg (msg.go): the producer's packet queue; msgStart[slot] is the submit time of the
	// slot's message (written by the producer before Submit, read by its Done).
	pq       *usdma.PktQ
	msgStart []int64
	msgInfo  usdma.ReqInfo
	msgHdr   usdma.Header

	// Producer-owned counters.
	mapErrors uint64
	spins     uint64
	err       error

	_ [64]byte
}

// complete is every packet's completion callback (on the engine's completion pass).
func (p *producer) complete(tx *perfTx, st sdma.Status) {
	if st == sdma.StatusOK {
		if p.run.measuring.Load() {
			_ = p.hist.RecordValue(int64(p.run.now() - tx.start))
			p.okPackets.Add(1)
		}
	} else {
		p.aborted.Add(1)
	}
	slot := tx.slot
	_ = p.alloc.Put(tx)
	p.slots <- slot // never blocks: the channel has room for every slot
}

// newAllocator builds the -alloc allocator of perfTx for depth packets in flight.
func newAllocator(kind string, depth int) (alloc.Allocator[perfTx], error) {
	switch kind {
	case "slab":
		return alloc.NewSlab(alloc.SlabConfig[perfTx]{ObjectsPerSlab: min(depth, 256)})
	case "list":
		return alloc.NewList[perfTx](depth, nil)
	case "pool":
		return alloc.NewPool[perfTx](nil), nil
	}
	return nil, fmt.Errorf("unknown allocator %q", kind)
}

// split divides total into parts shares, as equal as can be, the larger ones first: the
// fragment lengths of a packet, the packet quotas of the producers.
func split(total, parts int) []int {
	out := make([]int, parts)
	for i := range out {
		out[i] = total / parts
		if i < total%parts {
			out[i]++
		}
	}
	return out
}

// take waits for a free payload slot (room for one more packet in flight). In poll mode the
// producer runs its engine's completion passes itself while it waits.
func (p *producer) take(ctx context.Context) (int32, bool) {
	select {
	case slot := <-p.slots:
		return slot, true
	default:
	}
	if p.run.cfg.Completion == "poll" {
		for {
			p.eng.Poll()
			select {
			case slot := <-p.slots:
				return slot, true
			default:
			}
			if ctx.Err() != nil {
				return 0, false
			}
			runtime.Gosched()
		}
	}
	select {
	case slot := <-p.slots:
		return slot, true
	case <-ctx.Done():
		return 0, false
	}
}

// drain waits until every packet of the producer completed (every slot back).
func (p *producer) drain() {
	got := make([]int32, 0, cap(p.slots))
	for range cap(p.slots) {
		slot, _ := p.take(context.Background())
		got = append(got, slot)
	}
	for _, slot := range got {
		p.slots <- slot
	}
}

// send builds and sends one packet. It reports false when the producer must stop.
func (p *producer) send(ctx context.Context, frags []int) bool {
	if p.pq != nil {
		return p.sendMsg(ctx)
	}
	slot, ok := p.take(ctx)
	if !ok {
		return false
	}
	tx, err := p.alloc.Get()
	if err != nil {
		p.slots <- slot
		p.err = fmt.Errorf("allocator: %w", err)
		return false
	}
	tx.p, tx.size, tx.slot = p, p.run.size, slot
	dev := p.run.dev
	if err := tx.Init(0, p.run.size, tx); err != nil {
		return p.fail(tx, err)
	}
	off := 0
	for i, n := range frags {
		if p.region != nil {
			err = tx.AddPage(dev, p.pages[int(slot)*len(frags)+i], 0, n)
		} else {
			err = tx.AddKVAddr(dev, p.bufs[slot][off:off+n])
		}
		off += n
		if err != nil {
			if errors.Is(err, sdma.ErrMapping) { // an injected (or real) mapping failure: drop the packet
				p.mapErrors++
				_ = p.alloc.Put(tx)
				p.slots <- slot
				return true
			}
			return p.fail(tx, err)
		}
	}
	tx.start = p.run.now()
	switch p.run.cfg.Send {
	case "block":
		err = p.eng.SendWait(ctx, &tx.TxReq)
	case "sleep":
		err = p.sendSleep(ctx, &tx.TxReq)
	default:
		for {
			err = p.eng.Send(nil, &tx.TxReq, true)
			if !errors.Is(err, sdma.ErrBusy) {
				break
			}
			p.spins++
			if p.run.cfg.Completion == "poll" {
				p.eng.Poll()
			}
			if ctx.Err() != nil {
				err = ctx.Err()
				break
			}
			runtime.Gosched()
		}
	}
	switch {
	case err == nil, errors.Is(err, sdma.ErrNotRunning):
		return true // in flight, or flushed: the callback gives the token back
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		_ = tx.Clean()
		_ = p.alloc.Put(tx)
		p.slots <- slot
		return false
	}
	return p.fail(tx, err)
}

// initIOWait sets up the producer's iowait for -send sleep (hfi1: iowait_init in the QP's
// setup): sleep is the engine's ParkOrRetry (qp.c iowait_sleep), wakeup signals woken
// (hfi1_qp_wakeup), no drained callback (drain waits on the payload slots instead).
func (p *producer) initIOWait() {
	p.woken = make(chan struct{}, 1)
	p.iow.Init((*sdma.Engine).ParkOrRetry, func(*sdma.IOWait, int) {
		select {
		case p.woken <- struct{}{}:
		default:
		}
	}, nil)
}

// sendSleep submits tx as a verbs QP does (hfi1: hfi1_verbs_send_dma → sdma_send_txreq with the
// QP's iowait): when the ring has no room, Send calls the iowait's sleeper, ParkOrRetry, which
// under the engine's wait lock either retries (the ring moved) or appends tx to TxHead and
// queues the iowait on the engine's wait list, and Send returns ErrBusy. The completion pass
// that frees enough descriptors takes the iowait off the list and calls its wakeup
// (sdma_desc_avail → hfi1_qp_wakeup); the producer then resends from TxHead (the QP's
// hfi1_do_send after the wakeup), with pktsSent false, as the kernel's resend has sent nothing
// yet in its burst. It returns Send's result, or ctx's error with tx taken back off TxHead.
func (p *producer) sendSleep(ctx context.Context, tx *sdma.TxReq) error {
	err := p.eng.Send(&p.iow, tx, true)
	for errors.Is(err, sdma.ErrBusy) {
		if !p.awaitWake(ctx) {
			p.iow.TxHead().PopFront() // tx: the caller cleans it up. The iowait may stay queued:
			return ctx.Err()          // its late wakeup only fills woken.
		}
		tx = p.iow.TxHead().PopFront()
		if tx == nil {
			return errors.New("-send sleep: woken with no packet parked on TxHead")
		}
		err = p.eng.Send(&p.iow, tx, false)
	}
	return err
}

// awaitWake waits for the iowait's wakeup, running the completion passes itself in poll mode
// (nothing else would). It reports false if ctx ended first.
func (p *producer) awaitWake(ctx context.Context) bool {
	if p.run.cfg.Completion == "poll" {
		for {
			select {
			case <-p.woken:
				return true
			default:
			}
			if ctx.Err() != nil {
				return false
			}
			if p.eng.Poll() == 0 {
				runtime.Gosched()
			}
		}
	}
	select {
	case <-p.woken:
		return true
	case <-ctx.Done():
		return false
	}
}

// fail records err, gives tx and its token back and stops the producer.
func (p *producer) fail(tx *perfTx, err error) bool {
	slot := tx.slot
	_ = tx.Clean()
	_ = p.alloc.Put(tx)
	p.slots <- slot
	p.err = fmt.Errorf("producer %d: %w", p.id, err)
	return false
}

// newProducer makes producer i of run r: its allocator, payload slots and memory, and its
// iowait with -send sleep. The memory it allocates is released by r.done.
func newProducer(r *sizeRun, i int) (*producer, error) {
	cfg := r.cfg
	a, err := newAllocator(cfg.Alloc, cfg.Depth)
	if err != nil {
		return nil, err
	}
	p := &producer{id: i, run: r, eng: r.dev.Engine(i % cfg.Engines), alloc: a,
		slots: make(chan int32, cfg.Depth), hist: newHistogram()}
	if cfg.Send == "sleep" {
		p.initIOWait()
	}
	for slot := range int32(cfg.Depth) {
		p.slots <- slot
	}
	if err := payloadMem[cfg.Mem](p, r); err != nil {
		return nil, err
	}
	if cfg.Mode == ModeMsg {
		if err := p.initMsg(r); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// payloadMem sets up a producer's payload memory, by -mem: depth slots (one, reused by every
// packet, with -shared), each holding one packet.
var payloadMem = map[string]func(p *producer, r *sizeRun) error{
	"kvaddr":     (*producer).kvaddrMem,
	"page":       (*producer).pageMem,
	"registered": (*producer).registeredMem,
}

// memSlots is how many distinct payload slots a producer has.
func memSlots(cfg Config) int {
	if cfg.Shared {
		return 1
	}
	return cfg.Depth
}

// kvaddrMem: each slot is a Go buffer of the packet's size (-mem kvaddr).
func (p *producer) kvaddrMem(r *sizeRun) error {
	p.kvaddrSlots(r)
	return nil
}

// kvaddrSlots makes the slots of kvaddrMem and returns the memory behind them.
func (p *producer) kvaddrSlots(r *sizeRun) []byte {
	n, size := memSlots(r.cfg), r.size
	mem := make([]byte, n*size)
	fill(mem, p.id)
	p.bufs = make([][]byte, r.cfg.Depth)
	for j := range p.bufs {
		k := j % n
		p.bufs[j] = mem[k*size : (k+1)*size : (k+1)*size]
	}
	return mem
}

// registeredMem: the slots of kvaddrMem, registered with the device once (-mem registered):
// AddKVAddr then computes bus addresses instead of mapping, and completion unmaps nothing. The
// registration is undone when the run ends, before the device closes.
func (p *producer) registeredMem(r *sizeRun) error {
	reg, err := r.dev.Register(p.kvaddrSlots(r))
	if err != nil {
		return err
	}
	r.close = append(r.close, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return r.dev.Deregister(ctx, reg)
	})
	return nil
}

// pageMem: each slot is one dma.AllocPages page per fragment (-mem page).
func (p *producer) pageMem(r *sizeRun) error {
	cfg := r.cfg
	n := memSlots(cfg) * cfg.Frags
	var err error
	if p.region, err = dma.AllocPages(n); err != nil {
		return err
	}
	r.close = append(r.close, p.region.Close)
	p.pages = make([]dma.Page, cfg.Depth*cfg.Frags)
	for j := range p.pages {
		if p.pages[j], err = p.region.Page(j % n); err != nil {
			return err
		}
	}
	fill(p.region.Bytes(), p.id)
	return nil
}
