package sdma_test

// Fault-schedule soak of SendList with the user_sdma sleeper, from the outside (review
// rvsoak): the combination the other soaks do not schedule together. Producers take txreqs from
// an alloc.Slab, build packets whose header and payload pieces come from up to four buffers
// (more registrations than one txreq holds, so some pieces are mapped per add), and send lists
// of them with SendList and DeferOrRetry (parking, waiting for the wakeup, resending the rest),
// draining their IOWait now and then (one producer in two seeds sends each txreq with SendWait
// under a context that may expire instead); meanwhile a chaos goroutine deregisters and registers the
// buffers again with packets in flight, injects halts, stops and starts the engines and changes
// the fault plans, the sink fails, stalls and panics, completion callbacks panic, and Close or
// Shutdown comes at a random point. The ledger: every txreq SendList took completes exactly
// once (and returns to the allocator once), none it did not take completes, no sleeper is left
// parked unwoken, the hardware never reads deregistered memory (no CauseMemRead halt the chaos
// did not inject), every Deregister returns, nothing stays mapped, Close returns, no goroutine
// is left.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/soak"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

type rvTx struct {
	sdma.TxReq
	hdr     [8]byte // the txreq's id, the packet's first piece: the sinks check it
	id      int64
	dev     int // the device it is built for, of two (TestRVSoakTwoDevicesSharedMapper)
	ledger  *rvLedger
	panicky bool
}

type rvLedger struct {
	slab   *alloc.Slab[rvTx]
	mu     sync.Mutex
	done   map[int64]int
	status map[int64]sdma.Status
	sent   map[int64]bool // delivered, or flushed by a batch sink
	late   []string       // packets a sink read after their txreq completed
	closed atomic.Bool    // Close (or Shutdown) returned
	// closedDev[d]: device d's Close (or Shutdown) returned (TestRVSoakTwoDevicesSharedMapper)
	closedDev [2]atomic.Bool
	after     atomic.Int64 // completions after that
	taken     map[int64]bool
	nextID    atomic.Int64
	badPuts   atomic.Int64
}

func (tx *rvTx) Complete(_ *sdma.TxReq, st sdma.Status) {
	l, id, p := tx.ledger, tx.id, tx.panicky
	if l.closed.Load() || l.closedDev[tx.dev].Load() {
		l.after.Add(1)
	}
	l.mu.Lock()
	l.done[id]++
	l.status[id] = st
	l.mu.Unlock()
	if err := l.slab.Put(tx); err != nil {
		l.badPuts.Add(1)
	}
	if p {
		panic("rvsoak: callback panic")
	}
}

type rvPanicSink struct {
	inner  sdma.Sink
	period uint64
	n      atomic.Uint64
}

func (s *rvPanicSink) Deliver(engine int, segs [][]byte) error {
	if s.period > 0 && s.n.Add(1)%s.period == 0 {
		panic("rvsoak: sink panic")
	}
	return s.inner.Deliver(engine, segs)
}

// see records a packet a sink reads (at Deliver, Queue and Flush): its txreq must not have
// completed yet (completion unmaps it, and a slab reuses it).
func (l *rvLedger) see(segs [][]byte, what string, sent bool) {
	id := int64(binary.LittleEndian.Uint64(segs[0][:8]))
	l.mu.Lock()
	if l.done[id] != 0 && len(l.late) < 10 {
		l.late = append(l.late, fmt.Sprintf("%s of txreq %d after its completion (%v)", what, id, l.status[id]))
	}
	if sent {
		l.sent[id] = true
	}
	l.mu.Unlock()
}

// rvLedgerSink is the soak's sink: a plain one, or a BatchSink keeping slice headers until Flush.
type rvLedgerSink struct {
	l     *rvLedger
	batch int
	held  [][][]byte // per engine
	mu    []sync.Mutex
}

func (s *rvLedgerSink) Deliver(engine int, segs [][]byte) error {
	s.l.see(segs, "Deliver", true)
	return nil
}

func (s *rvLedgerSink) BatchLimit() (int, int) { return s.batch, 0 }

func (s *rvLedgerSink) Queue(engine int, segs [][]byte) error {
	s.l.see(segs, "Queue", false)
	s.mu[engine].Lock()
	s.held[engine] = append(s.held[engine], append([][]byte(nil), segs...)...)
	s.held[engine] = append(s.held[engine], nil) // the packet's end
	s.mu[engine].Unlock()
	return nil
}

func (s *rvLedgerSink) Flush(engine int, errs []error) {
	s.mu[engine].Lock()
	h := s.held[engine]
	s.held[engine] = nil
	s.mu[engine].Unlock()
	start := 0
	for i, seg := range h {
		if seg == nil {
			s.l.see(h[start:i], "Flush", true)
			start = i + 1
		}
	}
}

// rvBuf is packet memory of the SendList soaks, registered with up to two devices (reg[d] nil:
// not registered with device d). mu serialises the chaos's moves on it.
type rvBuf struct {
	mu  sync.Mutex
	b   []byte
	reg [2]*dma.Registration
}

// newRVBufs makes n buffers of three pages, each of its own bytes.
func newRVBufs(n int) []*rvBuf {
	bufs := make([]*rvBuf, n)
	for i := range bufs {
		bufs[i] = &rvBuf{b: make([]byte, 3*dma.PageSize)}
		for k := range bufs[i].b {
			bufs[i].b[k] = byte(k*3 + i)
		}
	}
	return bufs
}

// churn is the chaos's move on bf's registration with dev (slot d of reg): deregister it, with
// a context of up to 3 ms that packets in flight may outlast, or register it again.
func (bf *rvBuf) churn(dev *sdma.Device, d int, r *rand.Rand, fail func(string, ...any)) {
	bf.mu.Lock()
	defer bf.mu.Unlock()
	if bf.reg[d] == nil {
		if reg, err := dev.Register(bf.b); err == nil {
			bf.reg[d] = reg
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(3000))*time.Microsecond)
	err := dev.Deregister(ctx, bf.reg[d])
	cancel()
	switch {
	case err == nil:
		bf.reg[d] = nil
	case errors.Is(err, context.DeadlineExceeded):
	default:
		fail("Deregister: %v", err)
	}
}

// deregister is the end's Deregister of bf's registration with dev (slot d), if any.
func (bf *rvBuf) deregister(dev *sdma.Device, d int, fail func(string, ...any)) {
	if bf.reg[d] == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dev.Deregister(ctx, bf.reg[d]); err != nil && !errors.Is(err, dma.ErrNotMapped) {
		fail("final Deregister: %v", err)
	}
}

// build takes a txreq from the slab and builds it for dev: its id as the first piece (the sinks
// read it), then 1 to maxPieces pieces of 1 to maxWords dwords, each from a random buffer. It
// returns the add's error (a mapping failure, a closed device: the add cleaned the txreq, which
// is back in the slab), or nil, nil after failing the test for a Get or an Init that failed.
func (l *rvLedger) build(dev *sdma.Device, r *rand.Rand, bufs []*rvBuf, panicky bool, maxPieces, maxWords int, fail func(string, ...any)) (*rvTx, error) {
	tx, err := l.slab.Get()
	if err != nil {
		fail("Get: %v", err)
		return nil, nil
	}
	tx.ledger, tx.id, tx.panicky = l, l.nextID.Add(1), panicky
	binary.LittleEndian.PutUint64(tx.hdr[:], uint64(tx.id))
	pieces := [][]byte{tx.hdr[:]}
	tlen := len(tx.hdr)
	for range 1 + r.IntN(maxPieces) {
		b := bufs[r.IntN(len(bufs))].b
		ln := 4 * (1 + r.IntN(maxWords))
		off := 4 * r.IntN((len(b)-ln)/4)
		pieces = append(pieces, b[off:off+ln])
		tlen += ln
	}
	if err := tx.Init(0, tlen, tx); err != nil {
		fail("Init: %v", err)
		_ = l.slab.Put(tx)
		return nil, nil
	}
	for _, pc := range pieces {
		if err := tx.AddKVAddr(dev, pc); err != nil {
			_ = l.slab.Put(tx)
			return nil, err
		}
	}
	return tx, nil
}

// giveBack cleans the txreqs left on list (refused, or built and never sent) and puts them back.
func (l *rvLedger) giveBack(list *sdma.TxList) {
	for stx := list.PopFront(); stx != nil; stx = list.PopFront() {
		tx := alloc.Outer[rvTx](stx)
		_ = tx.Clean()
		if err := l.slab.Put(tx); err != nil {
			l.badPuts.Add(1)
		}
	}
}

// take marks the txreqs on list taken (before the send: a completion may come before it
// returns); untake drops them again, when the send refused them.
func (l *rvLedger) take(list *sdma.TxList, taken bool) {
	l.mu.Lock()
	for stx := list.Front(); stx != nil; stx = list.Next(stx) {
		if taken {
			l.taken[alloc.Outer[rvTx](stx).id] = true
		} else {
			delete(l.taken, alloc.Outer[rvTx](stx).id)
		}
	}
	l.mu.Unlock()
}

// verify is the ledger's end: every txreq taken completed exactly once and none other did, none
// after the close, no sink read a packet after its txreq completed, no aborted packet was sent,
// every txreq went back to the slab once, nothing stays mapped. With strict (a sink that records
// every packet it is handed, failed ones too), also: no txreq completed StatusOK unsent.
func (l *rvLedger) verify(iommu *dma.IOMMU, strict bool, fail func(string, ...any)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bad := 0
	for id := int64(1); id <= l.nextID.Load(); id++ {
		want := 0
		if l.taken[id] {
			want = 1
		}
		if got := l.done[id]; got != want && bad < 10 {
			bad++
			fail("txreq %d: %d completions, want %d", id, got, want)
		}
	}
	if n := l.after.Load(); n != 0 {
		fail("%d completions after Close/Shutdown returned", n)
	}
	for _, m := range l.late {
		fail("%s", m)
	}
	for id, st := range l.status {
		if st != sdma.StatusOK && l.sent[id] {
			fail("txreq %d completed %v but was sent", id, st)
			break
		}
		if strict && st == sdma.StatusOK && !l.sent[id] {
			fail("txreq %d completed %v but never reached the sink", id, st)
			break
		}
	}
	if n := l.badPuts.Load(); n != 0 {
		fail("%d txreqs put back twice or wrongly", n)
	}
	if st := l.slab.Stats(); st.InUse != 0 {
		fail("%d txreqs not back in the allocator", st.InUse)
	}
	if n := len(iommu.Live()); n != 0 {
		fail("%d mappings left", n)
	}
}

func runRVSendListSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x51157))
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	l := &rvLedger{done: map[int64]int{}, taken: map[int64]bool{}, status: map[int64]sdma.Status{}, sent: map[int64]bool{}}
	cfg := sdma.Config{
		Engines:  1 + rng.IntN(2),
		RingSize: []int{64, 128, 512}[rng.IntN(3)],
		Mapper:   iommu,
	}
	ls := &rvLedgerSink{l: l, held: make([][][]byte, cfg.Engines), mu: make([]sync.Mutex, cfg.Engines)}
	batch := rng.IntN(2) == 0
	if batch {
		ls.batch = 2 + rng.IntN(16)
		cfg.Sink = &sdmatest.FaultBatchSink{FaultSink: sdmatest.FaultSink{FailRate: 0.05, StallRate: 0.02, Stall: 20 * time.Microsecond, Seed: seed}, Batch: ls}
	} else {
		cfg.Sink = &rvPanicSink{period: uint64([]int{0, 53, 131}[rng.IntN(3)]), inner: &sdmatest.FaultSink{
			Sink: ls, FailRate: 0.05, StallRate: 0.02, Stall: 20 * time.Microsecond, Seed: seed,
		}}
	}
	poll := rng.IntN(3) == 0
	if poll {
		cfg.Completion = sdma.CompletePoll
	}
	cfg.Manual = rng.IntN(4) == 0
	dev, err := sdma.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	planned := make([]bool, dev.NumEngines()) // HaltRate draws every cause, CauseMemRead too
	for i := range dev.NumEngines() {
		if rng.IntN(2) == 0 {
			planned[i] = true
			_ = sdmatest.SetFaults(dev.Engine(i), sdmatest.FaultPlan{HaltRate: 0.005, Seed: seed})
		}
	}
	var addFails atomic.Int64
	slab, err := alloc.NewSlab(alloc.SlabConfig[rvTx]{ObjectsPerSlab: 64})
	if err != nil {
		t.Fatal(err)
	}
	l.slab = slab
	desc := fmt.Sprintf("seed %d: engines %d ring %d poll %v manual %v batch %d", seed, cfg.Engines, cfg.RingSize, poll, cfg.Manual, ls.batch)
	how := rng.IntN(2) // how it ends
	desc += fmt.Sprintf(" end %d", how)

	bufs := newRVBufs(4)
	for _, bf := range bufs {
		if rng.IntN(3) != 0 {
			bf.reg[0], _ = dev.Register(bf.b)
		}
	}
	var stopped, closing atomic.Bool
	var pw, bg sync.WaitGroup
	fail := func(format string, args ...any) { t.Errorf(desc+": "+format, args...) }

	nprod := 2 + rng.IntN(3)
	for p := range nprod {
		pw.Add(1)
		go func() {
			defer pw.Done()
			r := rand.New(rand.NewPCG(seed, uint64(p)+10))
			e := dev.Engine(p % dev.NumEngines())
			sendWait := p == 0 && r.IntN(2) == 0
			woke := make(chan struct{}, 1)
			var w sdma.IOWait
			w.Init(func(e *sdma.Engine, w *sdma.IOWait, tx *sdma.TxReq, seq uint32, pktsSent bool) error {
				return e.DeferOrRetry(w, tx, seq, pktsSent)
			}, func(*sdma.IOWait, int) {
				select {
				case woke <- struct{}{}:
				default:
				}
			}, nil)
			for !stopped.Load() {
				if r.IntN(30) == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					if err := w.Drain(ctx); err != nil {
						fail("producer %d: Drain: %v (busy %d)", p, err, w.Busy())
					}
					cancel()
				}
				var list sdma.TxList
				n := 1 + r.IntN(40)
				for range n {
					tx, err := l.build(dev, r, bufs, r.IntN(60) == 0, 4, 128, fail)
					if tx == nil && err == nil {
						return
					}
					if err != nil { // a mapping failure: the add cleaned tx
						if addFails.Add(1) == 1 {
							t.Logf("%s: first add failure: %v", desc, err)
						}
						if stopped.Load() || closing.Load() {
							l.giveBack(&list) // the device is closing: the built ones are ours
							return
						}
						continue
					}
					list.PushBack(&tx.TxReq)
				}
				l.take(&list, true) // before the send: a completion may come before SendList returns
				if sendWait {
					// SendWait per txreq, with a context that may expire while it waits for room.
					for stx := list.PopFront(); stx != nil; stx = list.PopFront() {
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(300))*time.Microsecond)
						err := e.SendWait(ctx, stx)
						cancel()
						if err == nil || errors.Is(err, sdma.ErrNotRunning) {
							continue
						}
						if !errors.Is(err, sdma.ErrClosed) && !errors.Is(err, context.DeadlineExceeded) {
							fail("producer %d: SendWait: %v", p, err)
						}
						l.mu.Lock()
						delete(l.taken, alloc.Outer[rvTx](stx).id)
						l.mu.Unlock()
						tx := alloc.Outer[rvTx](stx)
						_ = tx.Clean()
						if err := slab.Put(tx); err != nil {
							l.badPuts.Add(1)
						}
						if errors.Is(err, sdma.ErrClosed) {
							l.take(&list, false)
							l.giveBack(&list)
							return
						}
					}
					continue
				}
				for list.Len() > 0 {
					_, err := e.SendList(&w, &list)
					if err == nil || errors.Is(err, sdma.ErrNotRunning) {
						if list.Len() > 0 && err == nil {
							continue
						}
						break
					}
					if errors.Is(err, sdma.ErrBusy) {
						select {
						case <-woke:
						case <-time.After(20 * time.Second):
							fail("producer %d: parked and never woken (waiting %v, state %v)", p, e.Waiting(&w), sdmatest.EngineState(e))
							w.Unqueue()
						}
						continue
					}
					if !errors.Is(err, sdma.ErrClosed) {
						fail("producer %d: SendList: %v", p, err)
					}
					// Refused: the rest of the list is ours again.
					l.take(&list, false)
					l.giveBack(&list)
					return
				}
			}
		}()
	}
	if poll || cfg.Manual {
		sdmatest.DriveEngines(dev, cfg.Manual, &stopped, &bg)
	}
	chaos := sdmatest.Chaos{
		Rand: rand.New(rand.NewPCG(seed, 1234)),
		Cause: func(c sdma.HaltCause) sdma.HaltCause {
			if c == sdma.CauseMemRead || c == sdma.CauseLengthMismatch {
				c = sdma.CauseHalt
			}
			return c
		},
		Memory: func(r *rand.Rand) {
			bufs[r.IntN(len(bufs))].churn(dev, 0, r, fail)
		},
		MemoryTwice: true,
	}
	if err := chaos.Run(dev, &stopped, &bg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(dur)
	closed := make(chan error, 1)
	closing.Store(true)
	go func() {
		if how == 0 {
			closed <- dev.Close()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		closed <- dev.Shutdown(ctx)
	}()
	select {
	case err := <-closed:
		l.closed.Store(true)
		if err != nil {
			fail("Close/Shutdown: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("%s: Close/Shutdown did not return", desc)
	}
	stopped.Store(true)
	pw.Wait()
	bg.Wait()
	if how == 1 {
		if err := dev.Close(); err != nil {
			fail("Close after Shutdown: %v", err)
		}
	}
	for _, bf := range bufs {
		bf.deregister(dev, 0, fail)
	}
	for i := range dev.NumEngines() {
		st := dev.Engine(i).Stats()
		if n := st.Halts[sdma.CauseMemRead] + st.Halts[sdma.CauseLengthMismatch]; n != 0 && !planned[i] {
			fail("engine %d: %d halts reading memory: %v", i, n, dev.Engine(i).HaltCause())
		}
	}
	l.verify(iommu, false, fail)
	if testing.Verbose() {
		var halts, aborted uint64
		for i := range dev.NumEngines() {
			st := dev.Engine(i).Stats()
			t.Logf("engine %d: %+v %v", i, st, sdmatest.History(dev.Engine(i)))
			halts += st.Faults
			aborted += st.Aborted
		}
		t.Logf("%s: %d txreqs, %d taken, %d add failures, %d faults, %d aborted", desc, l.nextID.Load(), len(l.taken), addFails.Load(), halts, aborted)
	}
}

// TestRVSoakSendListDeregister: see runRVSendListSoak.
func TestRVSoakSendListDeregister(t *testing.T) {
	soak.Seeds(t, 16, 5, 40*time.Millisecond, 10*time.Millisecond, runRVSendListSoak)
}
