package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/udpsink"
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

// txOf gets from the *sdma.TxReq a callback receives back to its perfTx (container_of).
var txOf = alloc.OuterFunc[perfTx, sdma.TxReq]()

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
	slots chan int32    // free payload slots: taken by the producer, given back by the callback
	cb    sdma.Callback // made once: Init must not allocate per packet

	// Payload memory, slot i: bufs[i] (-mem kvaddr), or pages[i*frags : (i+1)*frags], one page
	// per fragment (-mem page).
	bufs   [][]byte
	region *dma.Region
	pages  []dma.Page

	// Written by the callback (atomics: the sampler reads them while the run goes on).
	okPackets atomic.Uint64
	okBytes   atomic.Uint64
	aborted   atomic.Uint64
	hist      *hdrhistogram.Histogram // callback only, see above

	// -send sleep: the producer's iowait (hfi1: struct iowait of a QP). Its sleep is
	// ParkOrRetry; its TxHead holds the one packet parked on a full ring and is touched only by
	// the producer goroutine (ParkOrRetry runs inside the producer's Send), so no lock guards it.
	// Its wakeup runs on the engine's completion pass and signals woken (cap 1: a wakeup that
	// comes before the producer waits is not lost); the producer receives from woken.
	iow   sdma.IOWait
	woken chan struct{}

	// Producer-owned counters.
	mapErrors uint64
	spins     uint64
	err       error

	_ [64]byte
}

// sizeRun is the shared state of one packet size's run.
type sizeRun struct {
	cfg       Config
	size      int
	dev       *sdma.Device
	base      time.Time   // the run's clock: durations since base
	measuring atomic.Bool // false during warm-up: completions are not recorded
	stop      atomic.Bool // set when the duration is over
}

// now returns the time since the run's base on the monotonic clock.
func (r *sizeRun) now() time.Duration { return time.Since(r.base) }

// complete is every packet's completion callback (on the engine's completion pass).
func (p *producer) complete(t *sdma.TxReq, st sdma.Status) {
	tx := txOf(t)
	if st == sdma.StatusOK {
		if p.run.measuring.Load() {
			_ = p.hist.RecordValue(int64(p.run.now() - tx.start))
			p.okBytes.Add(uint64(tx.size))
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
	if err := tx.Init(0, p.run.size, p.cb); err != nil {
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
			if err != sdma.ErrBusy {
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
	for err == sdma.ErrBusy {
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

// runClient runs every size and prints the report.
func runClient(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	rep := Report{Tool: "sdmaperf", Config: cfg}

	var sink sdma.Sink
	var udp *udpsink.Sink
	var recv *udpsink.Receiver
	recvDone := make(chan struct{})
	var recvRep udpsink.Report
	var recvErr error
	if cfg.Sink == "udp" {
		addr := cfg.UDPAddr
		if addr == "" {
			var err error
			recv, err = udpsink.Listen(udpsink.ReceiverConfig{Idle: 10 * time.Second})
			if err != nil {
				return err
			}
			defer recv.Close()
			addr = recv.Addr().String()
			go func() {
				defer close(recvDone)
				recvRep, recvErr = recv.Run(ctx)
				recv.Close() // the sink's repeated end markers then fail fast (ECONNREFUSED)
			}()
		}
		var err error
		udp, err = udpsink.New(udpsink.Config{Addr: addr, Engines: cfg.Engines})
		if err != nil {
			return err
		}
		sink = udp
	}

	if !cfg.JSON {
		writeHeader(stdout, cfg)
	}
	var runErr error
	for _, size := range cfg.Sizes {
		res, err := runSize(ctx, cfg, size, sink, stderr)
		if err != nil {
			runErr = fmt.Errorf("%d bytes: %w", size, err)
			break
		}
		rep.Results = append(rep.Results, res)
	}

	if udp != nil {
		if err := udp.Close(); err != nil && runErr == nil {
			runErr = fmt.Errorf("udp sink: %w", err)
		}
		if recv != nil {
			select {
			case <-recvDone:
			case <-time.After(5 * time.Second):
				// Every end marker was lost (a receive buffer full to the end): stop the
				// receiver and report what it saw; checkReceiver warns of the missing marker.
				recv.Close()
				<-recvDone
				if errors.Is(recvErr, udpsink.ErrClosed) {
					recvErr = nil
				}
			}
			if recvErr != nil && runErr == nil {
				runErr = fmt.Errorf("receiver: %w", recvErr)
			}
			rep.Receiver = &recvRep
		}
	}

	if cfg.JSON {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		writeTables(stdout, cfg, rep.Results)
		if rep.Receiver != nil {
			fmt.Fprintln(stdout, indent(rep.Receiver.String()))
			fmt.Fprintln(stdout, rule)
		}
	}
	if runErr != nil {
		return runErr
	}
	for _, r := range rep.Results {
		if err := checkHalts(cfg, r, stderr); err != nil {
			return err
		}
	}
	for _, r := range rep.Results {
		if r.SinkErrors > r.SinkFailed { // beyond the ones -faults sinkfail asked for
			return fmt.Errorf("%d bytes: %d deliveries to the sink failed, the last: %s", r.Bytes, r.SinkErrors, r.SinkError)
		}
	}
	if rep.Receiver != nil {
		return checkReceiver(rep.Receiver, stderr)
	}
	return nil
}

// checkHalts fails a run whose engines halted beyond what -faults injected: with no halt
// injected, any halt; with haltat alone, more than one halt per engine or one of another cause.
// It warns when haltat asked for a halt and no engine read that many descriptors.
func checkHalts(cfg Config, r Result, stderr io.Writer) error {
	f := cfg.Faults
	if !f.InjectsHalts() {
		if r.Halts > 0 {
			last := "no record"
			if len(r.HaltCauses) > 0 {
				last = r.HaltCauses[0]
			}
			return fmt.Errorf("%d bytes: %d engine halts with no halt injected, the last: %s", r.Bytes, r.Halts, last)
		}
		return nil
	}
	if f.HaltRate > 0 {
		return nil // random causes: a real halt cannot be told from an injected one
	}
	want := f.haltCause().String()
	if r.Halts > uint64(cfg.Engines) || r.HaltsBy[want] != r.Halts {
		return fmt.Errorf("%d bytes: %d engine halts (%s) where haltat injects at most one per engine, %s",
			r.Bytes, r.Halts, haltsText(r.HaltsBy), want)
	}
	if r.Halts == 0 {
		fmt.Fprintf(stderr, "sdmaperf: %d bytes: -faults haltat=%d: no engine halted: none read %d descriptors in the measured run (raise -n or -D)\n",
			r.Bytes, f.HaltAt, f.HaltAt)
	}
	return nil
}

// newMapper builds the -mapper mapper, wrapped in a fault injector when -faults asks.
func newMapper(cfg Config) (dma.Mapper, *dma.FaultInjector, error) {
	var m dma.Mapper
	switch cfg.Mapper {
	case "iommu":
		im, err := dma.NewIOMMU(dma.IOMMUConfig{})
		if err != nil {
			return nil, nil, err
		}
		m = im
	default:
		m = dma.NewDirect()
	}
	if !cfg.Faults.Any() {
		return m, nil, nil
	}
	fi := dma.NewFaultInjector(m)
	return fi, fi, nil
}

// engineOptions maps the flags to the device's strategy and completion mode.
func engineOptions(cfg Config) (sdma.WaitStrategy, sdma.CompletionMode) {
	w := sdma.WaitSpinPark
	switch cfg.Wait {
	case "busy-poll":
		w = sdma.WaitBusyPoll
	case "park":
		w = sdma.WaitPark
	}
	c := sdma.CompleteInterrupt
	if cfg.Completion == "poll" {
		c = sdma.CompletePoll
	}
	return w, c
}

// runSize runs one packet size on a fresh device and returns its result.
func runSize(ctx context.Context, cfg Config, size int, sink sdma.Sink, stderr io.Writer) (Result, error) {
	res := Result{Bytes: size}
	mapper, inj, err := newMapper(cfg)
	if err != nil {
		return res, err
	}
	wait, mode := engineOptions(cfg)
	var fsink *sdma.FaultSink
	if cfg.Faults.SinkFail > 0 || cfg.Faults.SinkStall > 0 {
		fsink = &sdma.FaultSink{Sink: sink, FailRate: cfg.Faults.SinkFail, StallRate: cfg.Faults.SinkStall,
			Stall: cfg.Faults.Stall, Seed: uint64(cfg.Faults.Seed)}
		sink = fsink
	}
	dev, err := sdma.NewDevice(sdma.Config{
		Mapper: mapper, Engines: cfg.Engines, RingSize: cfg.Ring, Wait: wait, Completion: mode, Sink: sink,
		Faults: sdma.FaultPlan{HaltRate: cfg.Faults.HaltRate, Seed: uint64(cfg.Faults.Seed)},
	})
	if err != nil {
		return res, err
	}
	defer dev.Close()
	if inj != nil { // armed after NewDevice, so the pad's allocation is not a victim
		if cfg.Faults.MapFraction > 0 {
			inj.FailFraction(cfg.Faults.MapFraction, cfg.Faults.Seed)
		}
		if cfg.Faults.MapNth > 0 {
			inj.FailNth(cfg.Faults.MapNth)
		}
	}

	run := &sizeRun{cfg: cfg, size: size, dev: dev, base: time.Now()}
	frags := split(size, cfg.Frags)
	ps := make([]*producer, cfg.Producers)
	for i := range ps {
		a, err := newAllocator(cfg.Alloc, cfg.Depth)
		if err != nil {
			return res, err
		}
		p := &producer{id: i, run: run, eng: dev.Engine(i % cfg.Engines), alloc: a,
			slots: make(chan int32, cfg.Depth), hist: newHistogram()}
		p.cb = p.complete
		if cfg.Send == "sleep" {
			p.initIOWait()
		}
		for slot := range int32(cfg.Depth) {
			p.slots <- slot
		}
		nslots := cfg.Depth
		if cfg.Shared {
			nslots = 1
		}
		if cfg.Mem == "page" {
			p.region, err = dma.AllocPages(nslots * cfg.Frags)
			if err != nil {
				return res, err
			}
			defer p.region.Close()
			p.pages = make([]dma.Page, cfg.Depth*cfg.Frags)
			for j := range p.pages {
				if p.pages[j], err = p.region.Page(j % (nslots * cfg.Frags)); err != nil {
					return res, err
				}
			}
			fill(p.region.Bytes(), i)
		} else {
			mem := make([]byte, nslots*size)
			fill(mem, i)
			p.bufs = make([][]byte, cfg.Depth)
			for j := range p.bufs {
				k := j % nslots
				p.bufs[j] = mem[k*size : (k+1)*size : (k+1)*size]
			}
		}
		ps[i] = p
	}

	// Warm-up: every producer sends cfg.Warmup packets, unmeasured, and waits for them.
	if cfg.Warmup > 0 {
		if err := together(ps, func(p *producer) {
			for range cfg.Warmup {
				if !p.send(ctx, frags) {
					break
				}
			}
			p.drain()
		}); err != nil {
			return res, err
		}
	}
	for _, p := range ps {
		p.mapErrors = 0
		p.aborted.Store(0)
	}
	if cfg.Faults.HaltAt > 0 {
		// Armed now, so that haltat counts the descriptors of the measured run, not the
		// warm-up's. The plan replaces the one NewDevice set: it keeps HaltRate.
		plan := sdma.FaultPlan{HaltAt: cfg.Faults.HaltAt, HaltCause: cfg.Faults.haltCause(),
			HaltRate: cfg.Faults.HaltRate, Seed: uint64(cfg.Faults.Seed)}
		for i := range dev.NumEngines() {
			if err := dev.Engine(i).SetFaults(plan); err != nil {
				return res, err
			}
		}
	}
	var injStart uint64
	if inj != nil {
		injStart = inj.Injected() + inj.Faults()
	}
	engStart := engineTotals(dev)
	var sinkFailStart, sinkStallStart uint64
	if fsink != nil {
		sinkFailStart, sinkStallStart = fsink.Failed(), fsink.Stalled()
	}

	// Measure.
	var quota []int
	if cfg.Iterations > 0 {
		quota = split(cfg.Iterations, len(ps))
	}
	total := func() (packets, bytes uint64) {
		for _, p := range ps {
			packets += p.okPackets.Load()
			bytes += p.okBytes.Load()
		}
		return
	}
	expected := cfg.Duration
	if cfg.Iterations > 0 {
		expected = time.Duration(cfg.Iterations) * time.Microsecond // a guess: show a bar only on big runs
	}
	bar := newProgress(cfg, size, stderr, expected)
	samplerDone := make(chan struct{})
	samplerStop := make(chan struct{})
	var peak float64 // MiB/s of the best interval, written by the sampler, read after samplerDone
	start := time.Now()
	run.measuring.Store(true)
	go func() {
		defer close(samplerDone)
		const interval = 50 * time.Millisecond
		t := time.NewTicker(interval)
		defer t.Stop()
		lastT, lastB := start, uint64(0)
		for {
			select {
			case <-samplerStop:
				return
			case now := <-t.C:
				pk, b := total()
				if dt := now.Sub(lastT).Seconds(); dt > 0 {
					rate := float64(b-lastB) / mib / dt
					peak = max(peak, rate)
					bar.update(pk, now.Sub(start), rate)
				}
				lastT, lastB = now, b
			}
		}
	}()
	var stopTimer *time.Timer
	if cfg.Iterations == 0 {
		stopTimer = time.AfterFunc(cfg.Duration, func() { run.stop.Store(true) })
	}
	err = together(ps, func(p *producer) {
		if quota != nil {
			for range quota[p.id] {
				if !p.send(ctx, frags) {
					break
				}
			}
		} else {
			for !run.stop.Load() {
				if !p.send(ctx, frags) {
					break
				}
			}
		}
		p.drain()
	})
	res.Elapsed = time.Since(start)
	run.measuring.Store(false)
	if stopTimer != nil {
		stopTimer.Stop()
	}
	close(samplerStop)
	<-samplerDone
	bar.finish()
	if err != nil {
		return res, err
	}

	pk, b := total()
	res.Iterations = pk
	res.BWPeak = peak
	res.rates(b)
	hist := newHistogram()
	for _, p := range ps {
		hist.Merge(p.hist)
		res.MapErrors += p.mapErrors
		res.Aborted += p.aborted.Load()
	}
	res.Latency = latencyOf(hist)
	for i := range dev.NumEngines() {
		if err := dev.Engine(i).HaltCause(); err != nil {
			res.HaltCauses = append(res.HaltCauses, err.Error())
		}
		if err := dev.Engine(i).SinkError(); err != nil && res.SinkError == "" {
			res.SinkError = err.Error()
		}
	}
	if inj != nil {
		res.Faults = inj.Injected() + inj.Faults() - injStart
	}
	d := engineTotals(dev).sub(engStart)
	res.RingFull = d.ringFull // every Send that found no room, SendWait's and spinning retries alike
	res.Sleeps, res.Wakeups = d.sleeps, d.wakeups
	res.Halts = d.halts
	res.HaltsBy = d.haltsByCause()
	res.HaltsInjected = cfg.Faults.InjectsHalts()
	res.Recoveries = d.recoveries
	res.SinkErrors = d.sinkErrors
	if fsink != nil {
		res.SinkFailed = fsink.Failed() - sinkFailStart
		res.SinkStalls = fsink.Stalled() - sinkStallStart
	}
	return res, ctx.Err()
}

// together runs f on every producer in its own goroutine and waits; it returns the first
// producer error.
func together(ps []*producer, f func(*producer)) error {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); f(p) }()
	}
	wg.Wait()
	for _, p := range ps {
		if p.err != nil {
			return p.err
		}
	}
	return nil
}

// fill writes a recognisable pattern: producer id and offset.
func fill(b []byte, id int) {
	for i := range b {
		b[i] = byte(i) ^ byte(id*37)
	}
}
