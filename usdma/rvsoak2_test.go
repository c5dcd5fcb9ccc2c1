package usdma

// Fault-schedule soak of the message path with a ledger of packets (review rvsoak): the soak
// before it (rvsoak_test.go) sends into a discarding sink, so it checks that every request ends
// exactly once but not what its status says, and its chaos lets an engine run again within
// 100 µs. Here every request carries its own data and names itself in its header (DestQP its
// id, PSN its packet index, the KDETH offset where its payload starts), the sink records every
// packet it is handed, and the chaos holds engines stopped, halted or frozen for up to a few
// milliseconds while the queues Submit into them, beside injected and planned halts and
// pin-cache invalidation of vectors in flight; every completion mode; the queues and the device
// close in a random order at a random point. The ledger: a request whose Submit claimed its slot
// ends exactly once (Done), and a request ending COMPLETE had every packet handed to the sink
// exactly once, byte-identical, before it ended; one ending ERROR has an errcode; no packet
// reaches the sink twice or after its request ended (its pages were unpinned then); no packet of
// a request that never claimed its slot is sent; every txreq is back, nothing stays pinned or
// mapped, no goroutine is left.

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

// rv2Req is one request of the soak.
type rv2Req struct {
	id      uint32
	q       int
	data    []byte
	frag    int
	npkts   int
	claimed bool      // Submit claimed the slot (written by the submitter before it waits)
	seen    []int32   // per packet: times handed to the sink (under the ledger's lock)
	ended   int       // Done calls (under the ledger's lock)
	entry   CompEntry // the Done's entry
}

type rv2Ledger struct {
	mu   sync.Mutex
	reqs map[uint32]*rv2Req
	bad  []string
}

// stale returns the request other than id whose data holds payload at off, if any, for a packet
// whose payload is not its header's request's (the ledger's lock held).
func (l *rv2Ledger) stale(payload []byte, off int, id uint32) *rv2Req {
	for _, x := range l.reqs {
		if x.id == id || off >= len(x.data) {
			continue
		}
		n := min(x.frag, len(x.data)-off)
		if len(payload) >= n && string(payload[:n]) == string(x.data[off:off+n]) {
			return x
		}
	}
	return nil
}

func (l *rv2Ledger) badf(format string, args ...any) {
	if len(l.bad) < 20 {
		l.bad = append(l.bad, fmt.Sprintf(format, args...))
	}
}

// rv2Sink checks each packet against its request as it is handed over; failP > 0 fails every
// failP-th packet after recording it (the packet still went out: its txreq completes OK).
type rv2Sink struct {
	l     *rv2Ledger
	failP uint64
	n     atomic.Uint64
}

func (s *rv2Sink) Deliver(_ int, segs [][]byte) error {
	var p []byte
	for _, sg := range segs {
		p = append(p, sg...)
	}
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(p) < 64 {
		l.badf("runt packet of %d bytes", len(p))
		return nil
	}
	var h Header
	copy(h[:], p[:64])
	id, k := h.DestQP(), int(h.PSN()&0xffffff)
	r := l.reqs[id]
	switch {
	case r == nil:
		l.badf("packet %d of unknown request %d", k, id)
	case k >= r.npkts:
		l.badf("request %d: packet %d of %d", id, k, r.npkts)
	default:
		off := int(h.Offset())
		n := min(r.frag, len(r.data)-off)
		if off < 0 || off >= len(r.data) || len(p) < 64+n || string(p[64:64+n]) != string(r.data[off:off+n]) {
			if x := l.stale(p[64:], off, id); x != nil {
				// Another request's payload under this one's header: a batch of request x sent
				// on an AHG entry whose COPY a halt aborted (TestAHGStaleEntryAfterHaltInSendWindow).
				l.badf("request %d: packet %d carries request %d's payload (offset %d) under a stale AHG header", id, k, x.id, off)
				break
			}
			got := p[64:min(len(p), 72)]
			l.badf("request %d: packet %d's payload (offset %d, %d bytes) differs from the data: % x, want % x", id, k, off, len(p)-64, got, r.data[off:min(off+8, len(r.data))])
		}
		if r.ended != 0 {
			l.badf("request %d: packet %d handed to the sink after the request ended %v", id, k, r.entry)
		}
		r.seen[k]++
		if r.seen[k] > 1 {
			l.badf("request %d: packet %d handed to the sink %d times", id, k, r.seen[k])
		}
	}
	if s.failP != 0 && s.n.Add(1)%s.failP == 0 {
		return errors.New("rvsoak: sink failure")
	}
	return nil
}

func runRVUsdmaLedgerSoak(t *testing.T, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0x1ed9))
	l := &rv2Ledger{reqs: map[uint32]*rv2Req{}}
	iommu := testIOMMU(t)
	cfg := sdma.Config{
		Engines:  1 + rng.IntN(2),
		RingSize: []int{64, 128, 256}[rng.IntN(3)],
		Sink:     &rv2Sink{l: l, failP: []uint64{0, 23}[rng.IntN(2)]},
		Mapper:   iommu,
	}
	if rng.IntN(2) == 0 {
		cfg.Mapper = struct{ dma.Mapper }{iommu} // no Registrar: vectors are mapped per packet
	}
	switch rng.IntN(3) {
	case 1:
		cfg.Completion = sdma.CompletePoll
	case 2:
		cfg.Manual = true
	}
	dev, err := sdma.NewDevice(cfg)
	if err != nil {
		t.Fatal(err)
	}
	how := rng.IntN(4)
	desc := fmt.Sprintf("seed %d: engines %d ring %d completion %v manual %v end %d", seed, cfg.Engines, cfg.RingSize, cfg.Completion, cfg.Manual, how)
	fail := func(format string, args ...any) { t.Errorf(desc+": "+format, args...) }
	for i := range dev.NumEngines() {
		if rng.IntN(2) == 0 {
			_ = sdmatest.SetFaults(dev.Engine(i), sdmatest.FaultPlan{HaltRate: 0.005, Seed: seed})
		}
	}
	const slots = 4
	type queue struct {
		pq      *PktQ
		a       interface{ Stats() alloc.Stats }
		slotReq [slots]atomic.Pointer[rv2Req]
		shut    atomic.Bool
	}
	nq := 1 + rng.IntN(3)
	qs := make([]*queue, nq)
	for i := range qs {
		q := &queue{}
		var a alloc.Allocator[TxReq]
		if rng.IntN(2) == 0 {
			lst, err := alloc.NewList[TxReq](4+rng.IntN(12), nil)
			if err != nil {
				t.Fatal(err)
			}
			a, q.a = lst, lst
		} else {
			s, err := alloc.NewSlab(alloc.SlabConfig[TxReq]{ObjectsPerSlab: 64})
			if err != nil {
				t.Fatal(err)
			}
			a, q.a = s, s
		}
		qc := Config{Device: dev, Slots: slots, Alloc: a, Ctxt: uint16(i), Timeout: 200 * time.Microsecond,
			DisableAHG: rng.IntN(3) == 0, PinLimit: []int{0, 4, NoPinLimit}[rng.IntN(3)]}
		qc.Done = func(slot int, e CompEntry) {
			r := q.slotReq[slot].Load()
			l.mu.Lock()
			defer l.mu.Unlock()
			if q.shut.Load() {
				l.badf("queue %d slot %d ended after Close returned", i, slot)
			}
			if r == nil {
				l.badf("queue %d slot %d ended with no request", i, slot)
				return
			}
			r.ended++
			r.entry = e
		}
		q.pq, err = New(qc)
		if err != nil {
			t.Fatal(err)
		}
		qs[i] = q
	}
	// Recent requests' data, for the chaos's pin-cache invalidation of vectors in flight.
	var recentMu sync.Mutex
	var recent [8][]byte

	var stopped atomic.Bool
	stop := make(chan struct{})
	var wg, bg sync.WaitGroup
	if cfg.Manual || cfg.Completion == sdma.CompletePoll {
		sdmatest.DriveEngines(dev, cfg.Manual, &stopped, &bg)
	}
	var nextID atomic.Uint32
	for qi, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(qi)+50))
			ended := func(slot int, err error) bool {
				var ce *CompError // the slot's outcome; any other error is Wait's own
				if err != nil && !errors.As(err, &ce) {
					fail("queue %d slot %d never ended: %v", qi, slot, q.pq.Comp(slot))
					return false
				}
				return true
			}
			soakProduce(q.pq, slots, 10*time.Second, stop, ended, func(slot int) bool {
				id := nextID.Add(1)
				n := 1 + r.IntN(20000)
				data := make([]byte, n)
				for k := 0; k+8 <= n; k += 8 { // words unique to the request and their place
					binary.LittleEndian.PutUint64(data[k:], uint64(id)<<32|uint64(k))
				}
				for k := n &^ 7; k < n; k++ {
					data[k] = byte(id) + byte(k)
				}
				// Up to three vectors cut from the data.
				var vecs [][]byte
				for off := 0; off < n; {
					end := n
					if len(vecs) < 2 && r.IntN(2) == 0 {
						end = off + 1 + r.IntN(n-off)
					}
					vecs = append(vecs, data[off:end])
					off = end
				}
				frag := []int{64, 256, 1024, 4096}[r.IntN(4)]
				tmpl := testTemplate
				tmpl.DestQP, tmpl.PSN, tmpl.Offset = id, 0, 0
				tmpl.DLID = uint16(r.IntN(1 << 16)) // the engine: a queue's requests spread over the engines
				info, hdr := Message(slot, frag, tmpl, vecs...)
				rq := &rv2Req{id: id, q: qi, data: data, frag: frag, npkts: int(info.NPkts), seen: make([]int32, info.NPkts)}
				l.mu.Lock()
				l.reqs[id] = rq
				l.mu.Unlock()
				q.slotReq[slot].Store(rq)
				recentMu.Lock()
				recent[id%uint32(len(recent))] = data
				recentMu.Unlock()
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if r.IntN(4) == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(r.IntN(300))*time.Microsecond)
				}
				err := q.pq.Submit(ctx, info, &hdr, vecs...)
				cancel()
				var re *ReqError
				claimed := err == nil || (errors.As(err, &re) && re.Cause != nil)
				l.mu.Lock()
				rq.claimed = claimed
				l.mu.Unlock()
				switch {
				case err == nil:
				case errors.Is(err, ErrClosed):
					if q.pq.closed.Load() {
						return false
					}
				case errors.Is(err, ErrNotRunning):
					time.Sleep(time.Duration(r.IntN(100)) * time.Microsecond)
				case errors.Is(err, ErrFault), errors.Is(err, ErrNoMem), errors.Is(err, context.DeadlineExceeded):
				default:
					fail("queue %d: Submit: unexpected %v", qi, err)
				}
				return true
			})
		}()
	}
	// Chaos with holds: an engine stopped, halted or frozen for up to 3 ms while Submits go on.
	bg.Add(1)
	go func() {
		defer bg.Done()
		r := rand.New(rand.NewPCG(seed, 4242))
		hold := func() { time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond) }
		for !stopped.Load() {
			e := dev.Engine(r.IntN(dev.NumEngines()))
			switch r.IntN(12) {
			case 0:
				_ = sdmatest.InjectHalt(e, sdma.CauseHalt)
			case 1: // stopped for a while
				_ = e.Stop()
				hold()
				_ = e.Start()
			case 2: // a freeze held between its notice and the freeze, then unfrozen
				_ = sdmatest.FreezeNotify(dev, r.IntN(2) == 0)
				hold()
				_ = sdmatest.Freeze(dev)
				hold()
				_ = sdmatest.Unfreeze(dev)
				for i := range dev.NumEngines() {
					_ = dev.Engine(i).Start()
				}
			case 3: // halted and left halted for a while: the flush of the recovery waits
				_ = sdmatest.RaiseEvent(e, sdmatest.E70GoIdle, "rvsoak")
				hold()
				_ = e.Start()
			case 4:
				recentMu.Lock()
				b := recent[r.IntN(len(recent))]
				recentMu.Unlock()
				if b != nil {
					qs[r.IntN(len(qs))].pq.Invalidate(b)
				}
			default:
				time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
			}
		}
	}()
	time.Sleep(dur)

	closeQueues := func() {
		for qi, q := range qs {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := q.pq.Close(ctx)
			cancel()
			q.shut.Store(err == nil)
			if err != nil {
				fail("queue %d: Close: %v", qi, err)
			}
		}
	}
	switch how {
	case 0: // queues first, the chaos still running, then the device
		closeQueues()
		close(stop)
		wg.Wait()
		stopped.Store(true)
		bg.Wait()
		if err := dev.Close(); err != nil {
			fail("Close: %v", err)
		}
	case 1: // the device under the submitters, then the queues
		if err := dev.Close(); err != nil {
			fail("Close: %v", err)
		}
		close(stop)
		closeQueues()
		wg.Wait()
		stopped.Store(true)
		bg.Wait()
	case 2: // Shutdown under the submitters
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := dev.Shutdown(ctx); err != nil {
			fail("Shutdown: %v", err)
		}
		cancel()
		close(stop)
		closeQueues()
		wg.Wait()
		stopped.Store(true)
		bg.Wait()
		if err := dev.Close(); err != nil {
			fail("Close: %v", err)
		}
	default: // queues and device at once
		close(stop)
		var cw sync.WaitGroup
		cw.Add(1)
		go func() { defer cw.Done(); closeQueues() }()
		if err := dev.Close(); err != nil {
			fail("Close: %v", err)
		}
		cw.Wait()
		wg.Wait()
		stopped.Store(true)
		bg.Wait()
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.bad {
		fail("%s", m)
	}
	var complete, errored, unclaimed int
	nbad := 0
	for _, r := range l.reqs {
		if nbad >= 10 {
			break
		}
		sent := 0
		for _, s := range r.seen {
			if s > 0 {
				sent++
			}
		}
		if !r.claimed {
			unclaimed++
			if r.ended != 0 || sent != 0 {
				nbad++
				fail("request %d (queue %d): refused before its claim, but ended %d times, %d packets sent", r.id, r.q, r.ended, sent)
			}
			continue
		}
		if r.ended != 1 {
			nbad++
			fail("request %d (queue %d): ended %d times", r.id, r.q, r.ended)
			continue
		}
		switch r.entry.Status {
		case Complete:
			complete++
			if sent != r.npkts {
				nbad++
				fail("request %d (queue %d): COMPLETE with %d of %d packets sent", r.id, r.q, sent, r.npkts)
			}
		case Error:
			errored++
			if r.entry.Errcode == 0 {
				nbad++
				fail("request %d (queue %d): ERROR without an errcode", r.id, r.q)
			}
		default:
			nbad++
			fail("request %d (queue %d): ended %v", r.id, r.q, r.entry)
		}
	}
	for qi, q := range qs {
		st := q.pq.Stats()
		if st.Requests != uint64(0)+st.Completed+st.Failed {
			fail("queue %d: %d requests, %d completed, %d failed", qi, st.Requests, st.Completed, st.Failed)
		}
		if n := q.a.Stats().InUse; n != 0 {
			fail("queue %d: %d txreqs not back", qi, n)
		}
		if n := st.Pins.Pages; n != 0 {
			fail("queue %d: %d pages still pinned", qi, n)
		}
	}
	if n := len(iommu.Live()); n != 0 {
		fail("%d mappings left", n)
	}
	if testing.Verbose() {
		t.Logf("%s: %d requests: %d complete, %d error, %d refused before the claim", desc, len(l.reqs), complete, errored, unclaimed)
	}
}

// TestRVSoakUsdmaLedger: see runRVUsdmaLedgerSoak. RVSOAK_SEED picks another seed range.
func TestRVSoakUsdmaLedger(t *testing.T) {
	soak.Seeds(t, 16, 5, 40*time.Millisecond, 10*time.Millisecond, runRVUsdmaLedgerSoak)
}
