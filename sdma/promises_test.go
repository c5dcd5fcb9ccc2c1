package sdma_test

// Black-box tests of the promises of the package doc (sdma/doc.go: after a halt every txreq in
// flight completes exactly once, every mapping is undone) and of the README's "Faithful to the
// kernel, safer than it", through the public API only (sdma, dma, desc, alloc). Each test names
// the promise it holds the library to. They are bounded: every wait is a hang guard of tens of
// seconds, never a timing assumption, and testing.Short() scales them down.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/leakcheck"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// promHangGuard bounds every wait of these tests; reaching it means a hang, not slowness.
const promHangGuard = 60 * time.Second

// promNoLeak checks at the end of the test that no goroutine started during it is left.
func promNoLeak(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, opt) })
}

func promIOMMU(t *testing.T) *dma.IOMMU {
	t.Helper()
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	require.NoError(t, err)
	return m
}

// promWait polls cond until it holds or the hang guard expires.
func promWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(promHangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("hang guard: %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// promPad returns b padded with zeros to a multiple of 4 bytes, as the packet goes on the wire.
func promPad(b []byte) []byte {
	out := append([]byte(nil), b...)
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

// promRec is one send's ledger line: how often and how it completed.
type promRec struct {
	done     atomic.Int32
	st       atomic.Int32
	accepted bool // Send (or SendWait/SendList) took it: nil or ErrNotRunning
}

// promTx is the caller's txreq type of these tests: sdma.TxReq first, then the ledger id.
type promTx struct {
	sdma.TxReq
	rec *promRec
}

var promTxOf = alloc.OuterFunc[promTx, sdma.TxReq]()

// ---------------------------------------------------------------------------------------------
// Promise: every txreq that Send accepted (including the ErrNotRunning flush path) completes
// exactly once, with StatusOK or StatusAborted; none is lost, none completes twice.

// TestPromiseErrNotRunningFlushCompletesOnceAborted: a stopped engine takes sends (ErrNotRunning,
// through Send, SendWait and SendList alike) onto its flush list; each completes StatusAborted
// exactly once, and the engine then runs normally.
func TestPromiseErrNotRunningFlushCompletesOnceAborted(t *testing.T) {
	promNoLeak(t)
	iommu := promIOMMU(t)
	dev, err := sdma.NewDevice(sdma.Config{Mapper: iommu, Engines: 2, RingSize: 64})
	require.NoError(t, err)
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), promHangGuard)
	defer cancel()
	payload := make([]byte, 100)

	var recs []*promRec
	build := func() *promTx {
		p := &promTx{rec: &promRec{}}
		recs = append(recs, p.rec)
		rec := p.rec
		require.NoError(t, p.Init(0, len(payload), sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
			rec.st.Store(int32(st))
			rec.done.Add(1)
		})))
		require.NoError(t, p.AddKVAddr(dev, payload))
		return p
	}
	for round := 0; round < 3; round++ {
		e := dev.Engine(round % 2)
		require.NoError(t, e.Stop())
		require.False(t, e.Running())
		first := len(recs)
		for i := 0; i < 5; i++ {
			p := build()
			require.ErrorIs(t, e.Send(nil, &p.TxReq, false), sdma.ErrNotRunning)
			p.rec.accepted = true
			p = build()
			require.ErrorIs(t, e.SendWait(ctx, &p.TxReq), sdma.ErrNotRunning)
			p.rec.accepted = true
		}
		var l sdma.TxList
		for i := 0; i < 5; i++ {
			p := build()
			p.rec.accepted = true
			l.PushBack(&p.TxReq)
		}
		n, err := e.SendList(nil, &l)
		require.ErrorIs(t, err, sdma.ErrNotRunning)
		require.Equal(t, 5, n, "SendList flushed every ready txreq")
		require.Zero(t, l.Len())

		require.NoError(t, e.Start())
		promWait(t, "the flushed txreqs to complete", func() bool {
			for _, r := range recs[first:] {
				if r.done.Load() == 0 {
					return false
				}
			}
			return true
		})
		// The engine runs again: a new packet completes OK.
		p := build()
		require.NoError(t, e.SendWait(ctx, &p.TxReq))
		p.rec.accepted = true
		promWait(t, "a send after Start to complete", func() bool { return p.rec.done.Load() > 0 })
		assert.Equal(t, sdma.StatusOK, sdma.Status(p.rec.st.Load()))
		recs = recs[:len(recs)-1] // checked here: the others are the flushed ones
		for i, r := range recs[first:] {
			assert.Equal(t, sdma.StatusAborted, sdma.Status(r.st.Load()), "flushed txreq %d", first+i)
		}
	}
	require.NoError(t, dev.Close())
	for i, r := range recs {
		assert.EqualValues(t, 1, r.done.Load(), "txreq %d completions", i)
	}
	assert.Zero(t, iommu.LiveCount(), "IOMMU leak report: %v", iommu.Live())
}

// TestPromiseExactlyOnceUnderChaos: producers on several engines send through Send (retrying on
// ErrBusy), SendWait and SendList, reusing txreqs from an allocator, while a chaos goroutine
// stops and starts engines, takes them idle, injects halts of every cause and makes the hardware's
// memory reads fault, and the mapper fails some maps. Close comes while packets are still in
// flight. Every send accepted (nil or ErrNotRunning) completes exactly once with StatusOK or
// StatusAborted, no refused one completes, and nothing completes after Close returned.
func TestPromiseExactlyOnceUnderChaos(t *testing.T) {
	promNoLeak(t)
	// Producers send at least perProducer each, and go on until the chaos goroutine has acted
	// minChaos times (the library is fast: without this the chaos would hardly start).
	engines, producers, perProducer, minChaos := 3, 6, 1500, int64(400)
	if testing.Short() {
		engines, producers, perProducer, minChaos = 2, 4, 300, 100
	}
	var chaosActs atomic.Int64
	iommu := promIOMMU(t)
	fi := dma.NewFaultInjector(iommu)
	dev, err := sdma.NewDevice(sdma.Config{
		Mapper: fi, Engines: engines, RingSize: 64, DescIntr: 8,
	})
	require.NoError(t, err)
	for i := range engines {
		require.NoError(t, sdmatest.SetFaults(dev.Engine(i), sdmatest.FaultPlan{HaltRate: 0.002, Seed: 7}))
	}
	closed := false
	defer func() {
		if !closed {
			_ = dev.Close()
		}
	}()
	require.NoError(t, fi.FailFraction(0.01, 5)) // after NewDevice, which maps the pad

	// Reused txreqs: a fixed list shared by every producer, filled back by the callbacks.
	list, err := alloc.NewList[promTx](producers*8, nil)
	require.NoError(t, err)
	var putErrs, orphans atomic.Int64
	var cb sdma.CompleterFunc = func(tx *sdma.TxReq, st sdma.Status) {
		p := promTxOf(tx)
		r := p.rec
		if r == nil { // completed again after its callback gave it back
			orphans.Add(1)
			return
		}
		p.rec = nil
		r.st.Store(int32(st))
		r.done.Add(1)
		if err := list.Put(p); err != nil {
			putErrs.Add(1)
		}
	}
	payload := make([]byte, 2048) // read-only: overlapping mappings of one buffer
	for i := range payload {
		payload[i] = byte(i)
	}

	ctx, cancel := context.WithTimeout(context.Background(), promHangGuard)
	defer cancel()
	recs := make([][]*promRec, producers)
	var wg sync.WaitGroup
	var unexpected atomic.Value
	fail := func(format string, args ...any) {
		unexpected.CompareAndSwap(nil, fmt.Sprintf(format, args...))
	}
	// get builds a txreq for a new ledger line of producer pid; nil if the add was refused
	// (a mapping failure: the line is not accepted and the txreq went back to the list).
	get := func(pid int, rng *rand.Rand) *promTx {
		p, err := list.GetCtx(ctx)
		if err != nil {
			fail("GetCtx: %v", err)
			return nil
		}
		r := &promRec{}
		recs[pid] = append(recs[pid], r)
		p.rec = r
		n := 1 + rng.IntN(len(payload)-1)
		frags := 1 + rng.IntN(3)
		if err := p.Init(0, n, cb); err != nil {
			fail("Init: %v", err)
			return nil
		}
		off := 0
		for k := 0; k < frags && off < n; k++ {
			m := n - off
			if k < frags-1 {
				m = 1 + rng.IntN(m)
			}
			if err := p.AddKVAddr(dev, payload[off:off+m]); err != nil {
				if !errors.Is(err, sdma.ErrMapping) {
					fail("AddKVAddr: %v", err)
				}
				p.rec = nil
				if err := list.Put(p); err != nil {
					fail("Put: %v", err)
				}
				return nil
			}
			off += m
		}
		return p
	}
	for pid := 0; pid < producers; pid++ {
		wg.Add(1)
		go func(pid int) {
			defer wg.Done()
			e := dev.Engine(pid % engines)
			rng := rand.New(rand.NewPCG(uint64(pid), 3))
			more := func(sent int) bool {
				return (sent < perProducer || chaosActs.Load() < minChaos) && ctx.Err() == nil
			}
			for sent := 0; more(sent); {
				switch pid % 3 {
				case 0: // Send with no iowait: ErrBusy leaves tx ours, retry
					p := get(pid, rng)
					sent++
					if p == nil {
						continue
					}
					r := p.rec // p is the engine's once sent: it may complete and be reused at once
					for {
						err := e.Send(nil, &p.TxReq, false)
						if err == nil || errors.Is(err, sdma.ErrNotRunning) {
							r.accepted = true
							break
						}
						if !errors.Is(err, sdma.ErrBusy) || ctx.Err() != nil {
							fail("Send: %v", err)
							return
						}
						e.ProgressSchedule()
						runtime.Gosched()
					}
				case 1: // SendWait
					p := get(pid, rng)
					sent++
					if p == nil {
						continue
					}
					r := p.rec
					if err := e.SendWait(ctx, &p.TxReq); err != nil && !errors.Is(err, sdma.ErrNotRunning) {
						fail("SendWait: %v", err)
						return
					}
					r.accepted = true
				case 2: // SendList of up to 4
					var l sdma.TxList
					for k := 0; k < 4 && more(sent); k++ {
						sent++
						if p := get(pid, rng); p != nil {
							l.PushBack(&p.TxReq)
						}
					}
					for l.Len() > 0 {
						var taken []*promRec
						for tx := l.Front(); tx != nil; tx = l.Next(tx) {
							taken = append(taken, promTxOf(tx).rec)
						}
						n, err := e.SendList(nil, &l)
						for _, r := range taken[:n] {
							r.accepted = true
						}
						if err != nil && !errors.Is(err, sdma.ErrNotRunning) && !errors.Is(err, sdma.ErrBusy) {
							fail("SendList: %v", err)
							return
						}
						if ctx.Err() != nil {
							fail("SendList: hang guard")
							return
						}
						if l.Len() > 0 {
							e.ProgressSchedule()
							runtime.Gosched()
						}
					}
				}
			}
		}(pid)
	}

	// Chaos until the producers are done.
	stop := make(chan struct{})
	chaosDone := make(chan struct{})
	var actions [6]atomic.Int64
	go func() {
		defer close(chaosDone)
		rng := rand.New(rand.NewPCG(42, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			time.Sleep(time.Duration(20+rng.IntN(200)) * time.Microsecond) // pacing only
			e := dev.Engine(rng.IntN(engines))
			k := rng.IntN(len(actions))
			actions[k].Add(1)
			chaosActs.Add(1)
			var err error
			switch k {
			case 0, 1:
				err = sdmatest.InjectHalt(e, sdma.HaltCause(1+rng.IntN(int(sdma.NumHaltCauses)-1)))
				if errors.Is(err, sdma.ErrNotRunning) {
					err = nil
				}
			case 2:
				fi.FailTranslate(true)
				runtime.Gosched()
				fi.FailTranslate(false)
			case 3:
				err = e.Stop()
				runtime.Gosched()
				err = errors.Join(err, e.Start())
			case 4:
				err = errors.Join(sdmatest.RaiseEvent(e, sdmatest.E70GoIdle, "promise chaos"), e.Start())
			case 5:
				err = errors.Join(sdmatest.RaiseEvent(e, sdmatest.E85LinkDown, "promise chaos"),
					sdmatest.RaiseEvent(e, sdmatest.E81HwFrozen, "promise chaos"),
					sdmatest.RaiseEvent(e, sdmatest.E82HwUnfreeze, "promise chaos"), e.Start())
			}
			if err != nil {
				fail("chaos %d: %v", k, err)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-chaosDone
	fi.FailTranslate(false)
	require.NoError(t, fi.FailFraction(0, 0))
	if msg := unexpected.Load(); msg != nil {
		t.Fatal(msg)
	}

	// Close now, with whatever is still in flight: Close completes it.
	require.NoError(t, dev.Close())
	closed = true
	count := func() (accepted, ok, aborted int) {
		for pid, rs := range recs {
			for seq, r := range rs {
				d := r.done.Load()
				if !r.accepted {
					assert.Zero(t, d, "send %d/%d was refused but completed", pid, seq)
					continue
				}
				accepted++
				if !assert.EqualValues(t, 1, d, "send %d/%d completions", pid, seq) {
					continue
				}
				switch st := sdma.Status(r.st.Load()); st {
				case sdma.StatusOK:
					ok++
				case sdma.StatusAborted:
					aborted++
				default:
					t.Errorf("send %d/%d: status %v", pid, seq, st)
				}
			}
		}
		return
	}
	accepted, ok, aborted := count()
	// No goroutine of the device is left, so no callback can still come: count again.
	leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	a2, ok2, ab2 := count()
	assert.Equal(t, [3]int{accepted, ok, aborted}, [3]int{a2, ok2, ab2}, "a completion after Close returned")
	assert.Zero(t, putErrs.Load(), "a txreq went back to the allocator twice (a double completion)")
	assert.Zero(t, orphans.Load(), "a txreq completed again after its completion")
	assert.Equal(t, producers*8, list.Len(), "every txreq came back to the allocator once")
	assert.Zero(t, iommu.LiveCount(), "IOMMU leak report: %v", iommu.Live())
	assert.Zero(t, dev.UnmapErrors(), "unmaps that failed on a path promising to undo")
	assert.NotZero(t, ok)
	assert.NotZero(t, aborted)
	var acts [len(actions)]int64
	for i := range actions {
		acts[i] = actions[i].Load()
	}
	t.Logf("accepted %d: ok %d, aborted %d; chaos %v", accepted, ok, aborted, acts)
}

// ---------------------------------------------------------------------------------------------
// Promise: every mapping Add* made is unmapped by completion or by Clean; daddr memory is never
// unmapped by the library.

// promSpy wraps a Mapper and records every unmap and free the library asks for.
type promSpy struct {
	dma.Mapper
	mu       sync.Mutex
	unmapped []dma.Mapping
}

func (s *promSpy) note(addr dma.Addr, size int, kind dma.Kind) {
	s.mu.Lock()
	s.unmapped = append(s.unmapped, dma.Mapping{Addr: addr, Size: size, Kind: kind})
	s.mu.Unlock()
}

func (s *promSpy) UnmapSingle(addr dma.Addr, size int, dir dma.Direction) error {
	s.note(addr, size, dma.KindSingle)
	return s.Mapper.UnmapSingle(addr, size, dir)
}

func (s *promSpy) UnmapPage(addr dma.Addr, size int, dir dma.Direction) error {
	s.note(addr, size, dma.KindPage)
	return s.Mapper.UnmapPage(addr, size, dir)
}

func (s *promSpy) UnmapSG(sg []dma.SG, dir dma.Direction) error {
	for _, e := range sg {
		s.note(e.Addr, e.Len, dma.KindSG)
	}
	return s.Mapper.UnmapSG(sg, dir)
}

// touches reports the unmaps that overlap [addr, addr+size).
func (s *promSpy) touches(addr dma.Addr, size int) []dma.Mapping {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []dma.Mapping
	for _, m := range s.unmapped {
		if m.Addr < addr+dma.Addr(size) && addr < m.Addr+dma.Addr(m.Size) {
			out = append(out, m)
		}
	}
	return out
}

// promMapped returns the (address, length) of every descriptor of tx that the library mapped
// (MapSingle or MapPage in the software copy's generation field), skipping AHG edit descriptors.
func promMapped(tx *sdma.TxReq) [][2]uint64 {
	ds := tx.Descs()
	var out [][2]uint64
	for i, d := range ds {
		if i >= 1 && i <= desc.EditDescs(ds[0].HeaderMode()) {
			continue
		}
		if g := d.MapType(); g == desc.MapSingle || g == desc.MapPage {
			out = append(out, [2]uint64{d.Addr(), uint64(d.Len())})
		}
	}
	return out
}

type promMapperKind struct {
	name string
	new  func(t *testing.T) (dma.Mapper, func() []dma.Mapping)
}

var promMappers = []promMapperKind{
	{"iommu", func(t *testing.T) (dma.Mapper, func() []dma.Mapping) { m := promIOMMU(t); return m, m.Live }},
	{"direct", func(t *testing.T) (dma.Mapper, func() []dma.Mapping) { m := dma.NewDirect(); return m, m.Live }},
}

// TestPromiseMappingsUndoneDAddrKept: txreqs built from every kind of add (kvaddr, page, pages,
// bytes across pages, coalesced fragments, AHG, daddr from a DMA pool) end in every way (completed
// OK, cleaned unsent, failed add, aborted by a halt, flushed by Stop, aborted by Close). Each
// completion runs after the txreq's mappings are gone; at the end every map was undone exactly
// once (dma.Counting), the leak report holds only the caller's own pool memory, no unmap ever
// touched a daddr block, and the pool blocks are still mapped and readable by the device.
func TestPromiseMappingsUndoneDAddrKept(t *testing.T) {
	for _, mk := range promMappers {
		t.Run(mk.name, func(t *testing.T) {
			promNoLeak(t)
			base, live := mk.new(t)
			isIOMMU := 0
			if mk.name == "iommu" {
				isIOMMU = 1
			}
			counting := dma.NewCounting(base)
			spy := &promSpy{Mapper: counting}
			cs := &sdmatest.CaptureSink{}
			dev, err := sdma.NewDevice(sdma.Config{Mapper: spy, Manual: true, RingSize: 256, Sink: cs})
			require.NoError(t, err)
			defer dev.Close()
			e := dev.Engine(0)
			pool, err := dma.NewPool(base, "promise-hdr", 64, 64) // the caller's: not the device's mapper
			require.NoError(t, err)
			region, err := dma.AllocPages(3)
			require.NoError(t, err)
			defer region.Close()
			page1, err := region.Page(1)
			require.NoError(t, err)
			heap := make([]byte, 3*dma.PageSize)

			type sent struct {
				tx     *sdma.TxReq
				mapped [][2]uint64
				done   atomic.Int32
				st     atomic.Int32
				stale  atomic.Int32 // mappings still live when the callback ran
			}
			var blocks []dma.Block
			var all []*sent
			// build makes a txreq of shape k with a pool header (daddr) in front.
			build := func(k int) *sent {
				s := &sent{tx: new(sdma.TxReq)}
				blk, err := pool.Alloc()
				require.NoError(t, err)
				blocks = append(blocks, blk)
				copy(blk.Bytes, fmt.Sprintf("header %d", len(all)))
				var body int
				switch k % 5 {
				case 0:
					body = 100
				case 1:
					body = 300
				case 2:
					body = 2*dma.PageSize + 10
				case 3:
					body = 70 * 3
				case 4:
					body = 50
				}
				var cb sdma.CompleterFunc = func(_ *sdma.TxReq, st sdma.Status) {
					// Only the IOMMU gives each mapping its own addresses; with the direct mapper
					// another txreq's live mapping of the same heap bytes would answer.
					for _, m := range s.mapped[:len(s.mapped)*isIOMMU] {
						if _, err := base.Translate(dma.Addr(m[0]), int(m[1]), dma.ToDevice); err == nil {
							s.stale.Add(1)
						}
					}
					s.st.Store(int32(st))
					s.done.Add(1)
				}
				if k%5 == 4 {
					w, err := desc.AHGUpdate(7, 1, 0, 16)
					require.NoError(t, err)
					require.NoError(t, s.tx.InitAHG(sdma.FlagUseAHG, 64+body, sdma.AHG{Entry: 3, Words: []uint32{w, w}, HeaderLen: 32}, cb))
				} else {
					require.NoError(t, s.tx.Init(0, 64+body, cb))
				}
				require.NoError(t, s.tx.AddDAddr(dev, blk.Addr, 64))
				switch k % 5 {
				case 0, 4:
					require.NoError(t, s.tx.AddKVAddr(dev, heap[:body]))
				case 1:
					require.NoError(t, s.tx.AddPage(dev, page1, 100, body))
				case 2:
					require.NoError(t, s.tx.AddPages(dev, region, 5, body/2))
					require.NoError(t, s.tx.AddBytes(dev, heap[dma.PageSize-7:dma.PageSize-7+body-body/2]))
				case 3:
					for i := 0; i < 70; i++ { // past 63 descriptors: coalesced
						require.NoError(t, s.tx.AddKVAddr(dev, heap[i*3:i*3+3]))
					}
				}
				s.mapped = promMapped(s.tx)
				require.NotEmpty(t, s.mapped)
				all = append(all, s)
				return s
			}
			// Before an AHG USE, the entry must hold a header: store one (COPY).
			var ahgCopy sdma.TxReq
			var ahgDone atomic.Int32
			require.NoError(t, ahgCopy.InitAHG(sdma.FlagAHGCopy, 40, sdma.AHG{Entry: 3}, sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) { ahgDone.Add(1) })))
			require.NoError(t, ahgCopy.AddKVAddr(dev, heap[:32]))
			require.NoError(t, ahgCopy.AddKVAddr(dev, heap[32:40]))
			require.NoError(t, e.Send(nil, &ahgCopy, false))

			// 1. Sent and completed OK.
			for k := 0; k < 10; k++ {
				require.NoError(t, e.Send(nil, build(k).tx, false))
			}
			_, err = e.Process()
			require.NoError(t, err)
			// 2. Cleaned without being sent.
			for k := 0; k < 5; k++ {
				s := build(k)
				require.NoError(t, s.tx.Clean())
			}
			// 3. A failed add (too long) cleans what the earlier adds mapped.
			for k := 0; k < 5; k++ {
				s := &sent{tx: new(sdma.TxReq)}
				require.NoError(t, s.tx.Init(0, 200, nil))
				require.NoError(t, s.tx.AddKVAddr(dev, heap[:100]))
				require.NoError(t, s.tx.AddPage(dev, page1, 0, 50))
				s.mapped = promMapped(s.tx)
				require.ErrorIs(t, s.tx.AddKVAddr(dev, heap[:51]), sdma.ErrInvalid)
				all = append(all, s)
			}
			// 4. Aborted by a halt before the hardware read them.
			var halted []*sent
			for k := 0; k < 5; k++ {
				s := build(k)
				halted = append(halted, s)
				require.NoError(t, e.Send(nil, s.tx, false))
			}
			require.NoError(t, sdmatest.InjectHalt(e, sdma.CauseHalt))
			// 5. Flushed: sent to a stopped engine.
			require.NoError(t, e.Stop())
			for k := 0; k < 5; k++ {
				s := build(k)
				halted = append(halted, s)
				require.ErrorIs(t, e.Send(nil, s.tx, false), sdma.ErrNotRunning)
			}
			require.NoError(t, e.Start())
			_, err = e.Process() // runs the flush
			require.NoError(t, err)
			// 6. In flight at Close (after a second AHG COPY: the USE shapes need the entry filled,
			// and the test does not rely on the entry surviving the halt's restart).
			var ahgCopy2 sdma.TxReq
			require.NoError(t, ahgCopy2.InitAHG(sdma.FlagAHGCopy, 40, sdma.AHG{Entry: 3}, sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) { ahgDone.Add(1) })))
			require.NoError(t, ahgCopy2.AddKVAddr(dev, heap[:32]))
			require.NoError(t, ahgCopy2.AddKVAddr(dev, heap[32:40]))
			require.NoError(t, e.Send(nil, &ahgCopy2, false))
			for k := 0; k < 5; k++ {
				require.NoError(t, e.Send(nil, build(k).tx, false))
			}
			require.NoError(t, dev.Close())

			for i, s := range all {
				for _, m := range s.mapped {
					_, err := base.Translate(dma.Addr(m[0]), int(m[1]), dma.ToDevice)
					assert.ErrorIs(t, err, dma.ErrFault, "txreq %d: mapping %#x+%d still live", i, m[0], m[1])
				}
				assert.Zero(t, s.stale.Load(), "txreq %d: the callback ran before its mappings were undone", i)
				assert.LessOrEqual(t, s.done.Load(), int32(1), "txreq %d", i)
			}
			for _, s := range all[:10] {
				assert.EqualValues(t, 1, s.done.Load())
				assert.Equal(t, sdma.StatusOK, sdma.Status(s.st.Load()))
			}
			for _, s := range halted {
				assert.EqualValues(t, 1, s.done.Load())
				assert.Equal(t, sdma.StatusAborted, sdma.Status(s.st.Load()))
			}
			for _, s := range all[len(all)-5:] {
				assert.EqualValues(t, 1, s.done.Load(), "in flight at Close")
			}
			assert.EqualValues(t, 2, ahgDone.Load())

			n := counting.Counts()
			assert.Zero(t, n.Errors, "an unmap failed (a double unmap, or an unmap of daddr memory): %+v", n)
			assert.Equal(t, n.MapSingle, n.UnmapSingle, "every MapSingle undone once: %+v", n)
			assert.Equal(t, n.MapPage, n.UnmapPage, "every MapPage undone once: %+v", n)
			assert.Equal(t, n.MapSG, n.UnmapSG)
			assert.Equal(t, n.AllocCoherent, n.FreeCoherent, "the device's own coherent memory (the pad) freed")
			for _, m := range live() {
				assert.Equal(t, dma.KindCoherent, m.Kind, "only the caller's pool memory may stay mapped: %+v", m)
			}
			for i, b := range blocks {
				assert.Empty(t, spy.touches(b.Addr, 64), "block %d was unmapped by the library", i)
				got, err := base.Translate(b.Addr, 64, dma.ToDevice)
				if assert.NoError(t, err, "block %d not mapped after Close", i) {
					assert.Equal(t, b.Bytes, got)
				}
				require.NoError(t, pool.Free(b))
			}
			require.NoError(t, pool.Destroy())
			assert.Empty(t, live(), "leak report")
		})
	}
}

// ---------------------------------------------------------------------------------------------
// Promise: the hardware model never reads memory that was not mapped for it, or after it was
// unmapped: such a descriptor halts the engine with a recorded cause, the in-flight txreqs
// complete aborted, the engine recovers.

// TestPromiseNoReadOfUnmappedMemory puts one bad packet between good ones on a manual engine:
// memory unmapped behind the engine's back (after every txreq of the test was built, so that no
// later mapping can take over the freed addresses), a daddr nobody mapped, one mapped for the
// device to write, and one running past its mapping. Each halts the engine with CauseMemRead and
// the mapper's fault recorded; the packet before went out OK, the bad one and those behind it
// complete StatusAborted exactly once and never reach the sink; the engine goes the kernel's way
// back to running and sends again.
func TestPromiseNoReadOfUnmappedMemory(t *testing.T) {
	// bad builds tx; strike (if any) runs after every txreq was built and sent; cleanup at the end.
	type badFn func(t *testing.T, dev *sdma.Device, m dma.Mapper, tx *sdma.TxReq, cb sdma.CompleterFunc) (reason dma.FaultReason, strike, cleanup func())
	cases := []struct {
		name string
		bad  badFn
	}{
		{"kvaddr unmapped behind the engine's back", func(t *testing.T, dev *sdma.Device, m dma.Mapper, tx *sdma.TxReq, cb sdma.CompleterFunc) (dma.FaultReason, func(), func()) {
			buf := make([]byte, 64)
			require.NoError(t, tx.Init(0, len(buf), cb))
			require.NoError(t, tx.AddKVAddr(dev, buf))
			d := tx.Descs()[0]
			require.Equal(t, uint8(desc.MapSingle), uint8(d.Generation()))
			return dma.ReasonNotMapped, func() {
				require.NoError(t, m.UnmapSingle(dma.Addr(d.Addr()), d.Len(), dma.ToDevice))
			}, nil
		}},
		{"page unmapped behind the engine's back", func(t *testing.T, dev *sdma.Device, m dma.Mapper, tx *sdma.TxReq, cb sdma.CompleterFunc) (dma.FaultReason, func(), func()) {
			r, err := dma.AllocPages(1)
			require.NoError(t, err)
			p, err := r.Page(0)
			require.NoError(t, err)
			require.NoError(t, tx.Init(0, 32, cb))
			require.NoError(t, tx.AddPage(dev, p, 64, 32))
			d := tx.Descs()[0]
			return dma.ReasonNotMapped, func() {
				require.NoError(t, m.UnmapPage(dma.Addr(d.Addr()), d.Len(), dma.ToDevice))
			}, func() { _ = r.Close() }
		}},
		{"daddr never mapped", func(t *testing.T, dev *sdma.Device, m dma.Mapper, tx *sdma.TxReq, cb sdma.CompleterFunc) (dma.FaultReason, func(), func()) {
			require.NoError(t, tx.Init(0, 64, cb))
			require.NoError(t, tx.AddDAddr(dev, dma.Addr(0x7000_0000), 64))
			return dma.ReasonNotMapped, nil, nil
		}},
		{"daddr mapped for the device to write", func(t *testing.T, dev *sdma.Device, m dma.Mapper, tx *sdma.TxReq, cb sdma.CompleterFunc) (dma.FaultReason, func(), func()) {
			buf := make([]byte, 64)
			a, err := m.MapSingle(buf, dma.FromDevice)
			require.NoError(t, err)
			require.NoError(t, tx.Init(0, 64, cb))
			require.NoError(t, tx.AddDAddr(dev, a, 64))
			return dma.ReasonDirection, nil, func() { require.NoError(t, m.UnmapSingle(a, len(buf), dma.FromDevice)) }
		}},
		{"daddr running past its mapping", func(t *testing.T, dev *sdma.Device, m dma.Mapper, tx *sdma.TxReq, cb sdma.CompleterFunc) (dma.FaultReason, func(), func()) {
			buf := make([]byte, 256)
			a, err := m.MapSingle(buf[:64], dma.ToDevice)
			require.NoError(t, err)
			require.NoError(t, tx.Init(0, 128, cb))
			require.NoError(t, tx.AddDAddr(dev, a, 128))
			return "", nil, func() { require.NoError(t, m.UnmapSingle(a, 64, dma.ToDevice)) }
		}},
	}
	for _, mk := range promMappers {
		for _, c := range cases {
			t.Run(mk.name+"/"+c.name, func(t *testing.T) {
				promNoLeak(t)
				m, live := mk.new(t)
				cs := &sdmatest.CaptureSink{}
				dev, err := sdma.NewDevice(sdma.Config{Mapper: m, Manual: true, RingSize: 64, Sink: cs})
				require.NoError(t, err)
				defer dev.Close()
				e := dev.Engine(0)
				counts := map[*sdma.TxReq]*[2]int32{} // completions, status
				var mu sync.Mutex
				var cb sdma.CompleterFunc = func(tx *sdma.TxReq, st sdma.Status) {
					mu.Lock()
					c := counts[tx]
					if c == nil {
						c = new([2]int32)
						counts[tx] = c
					}
					c[0]++
					c[1] = int32(st)
					mu.Unlock()
				}
				status := func(tx *sdma.TxReq) (int32, sdma.Status) {
					mu.Lock()
					defer mu.Unlock()
					if c := counts[tx]; c != nil {
						return c[0], sdma.Status(c[1])
					}
					return 0, -1
				}
				good := func(b byte) *sdma.TxReq {
					tx := new(sdma.TxReq)
					require.NoError(t, tx.Init(0, 12, cb))
					require.NoError(t, tx.AddKVAddr(dev, []byte{b, b, b, b, b, b, b, b, b, b, b, b}))
					return tx
				}
				before := good(1)
				require.NoError(t, e.Send(nil, before, false))
				var bad sdma.TxReq
				reason, strike, cleanup := c.bad(t, dev, m, &bad, cb)
				require.NoError(t, e.Send(nil, &bad, false))
				var behind []*sdma.TxReq
				for i := 0; i < 3; i++ {
					tx := good(byte(10 + i))
					behind = append(behind, tx)
					require.NoError(t, e.Send(nil, tx, false))
				}
				if strike != nil {
					strike()
				}
				n, err := e.Process()
				require.ErrorIs(t, err, sdma.ErrHalted)
				assert.Equal(t, 1, n, "only the packet before the bad one went out")
				var h *sdma.HaltError
				require.ErrorAs(t, err, &h)
				assert.Equal(t, sdma.CauseMemRead, h.Cause, "%v", err)
				assert.ErrorIs(t, err, dma.ErrFault, "wraps the mapper's fault")
				var f *dma.Fault
				if assert.ErrorAs(t, err, &f) && reason != "" {
					assert.Equal(t, reason, f.Reason)
				}
				assert.Equal(t, h, e.HaltCause(), "the cause is recorded")
				assert.EqualValues(t, 1, e.Stats().Halts[sdma.CauseMemRead])

				// What was delivered before completes OK, the bad one and the ones behind it abort,
				// each exactly once; only the good packet reached the sink.
				k, st := status(before)
				assert.Equal(t, int32(1), k)
				assert.Equal(t, sdma.StatusOK, st)
				for i, tx := range append([]*sdma.TxReq{&bad}, behind...) {
					k, st := status(tx)
					assert.Equal(t, int32(1), k, "txreq %d completions", i)
					assert.Equal(t, sdma.StatusAborted, st, "txreq %d", i)
				}
				assert.Equal(t, 1, cs.Count())

				// The kernel's recovery: s99 → s50 → s30 → s40 → s99, and the engine runs again.
				hist := sdmatest.History(e)
				require.GreaterOrEqual(t, len(hist), 4)
				var path []sdmatest.State
				for _, tr := range hist[len(hist)-4:] {
					path = append(path, tr.From)
				}
				path = append(path, hist[len(hist)-1].To)
				assert.Equal(t, []sdmatest.State{sdmatest.S99Running, sdmatest.S50HwHaltWait, sdmatest.S30SwCleanUpWait,
					sdmatest.S40HwCleanUpWait, sdmatest.S99Running}, path)
				assert.True(t, e.Running())
				assert.True(t, e.Empty())
				after := good(99)
				require.NoError(t, e.Send(nil, after, false))
				n, err = e.Process()
				require.NoError(t, err)
				assert.Equal(t, 1, n)
				k, st = status(after)
				assert.Equal(t, int32(1), k)
				assert.Equal(t, sdma.StatusOK, st)
				pk := cs.Packets(0)
				require.Len(t, pk, 2)
				assert.Equal(t, promPad(promBytes(99, 12)), pk[1])

				if cleanup != nil {
					cleanup()
				}
				require.NoError(t, dev.Close())
				assert.Empty(t, live(), "leak report")
			})
		}
	}
}

func promBytes(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// TestPromiseNoReadAfterUnmapRunningEngine: the same through the engine's own goroutine. A sink
// that holds the first delivery keeps the hardware from reading further, so the test can unmap
// the next packet's memory behind the engine's back before the hardware gets to it: the engine
// halts with CauseMemRead, aborts, recovers on its own and goes on sending.
func TestPromiseNoReadAfterUnmapRunningEngine(t *testing.T) {
	promNoLeak(t)
	iommu := promIOMMU(t)
	gate := make(chan struct{})
	var held atomic.Bool
	cs := &sdmatest.CaptureSink{}
	sink := sdma.SinkFunc(func(engine int, segs [][]byte) error {
		if held.CompareAndSwap(false, true) {
			<-gate
		}
		return cs.Deliver(engine, segs)
	})
	dev, err := sdma.NewDevice(sdma.Config{Mapper: iommu, RingSize: 64, Sink: sink})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	type rec struct{ done, st atomic.Int32 }
	recs := map[*sdma.TxReq]*rec{}
	send := func(buf []byte) *sdma.TxReq {
		tx := new(sdma.TxReq)
		r := &rec{}
		recs[tx] = r
		require.NoError(t, tx.Init(0, len(buf), sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) { r.st.Store(int32(st)); r.done.Add(1) })))
		require.NoError(t, tx.AddKVAddr(dev, buf))
		return tx
	}
	first := send(promBytes(1, 16))
	require.NoError(t, e.Send(nil, first, false))
	promWait(t, "the hardware to hold the first packet", held.Load)
	// Both built before the unmap, so that the behind packet cannot be given the freed address.
	victim, behind := send(promBytes(2, 16)), send(promBytes(3, 16))
	d := victim.Descs()[0]
	require.NoError(t, e.Send(nil, victim, false))
	require.NoError(t, e.Send(nil, behind, false))
	require.NoError(t, iommu.UnmapSingle(dma.Addr(d.Addr()), d.Len(), dma.ToDevice)) // behind its back
	close(gate)
	promWait(t, "the halt to complete the ring", func() bool {
		return recs[first].done.Load() > 0 && recs[victim].done.Load() > 0 && recs[behind].done.Load() > 0
	})
	assert.Equal(t, sdma.StatusOK, sdma.Status(recs[first].st.Load()))
	assert.Equal(t, sdma.StatusAborted, sdma.Status(recs[victim].st.Load()))
	assert.Equal(t, sdma.StatusAborted, sdma.Status(recs[behind].st.Load()))
	var h *sdma.HaltError
	require.ErrorAs(t, e.HaltCause(), &h)
	assert.Equal(t, sdma.CauseMemRead, h.Cause)
	promWait(t, "the engine to recover", e.Running)
	last := send(promBytes(4, 16))
	ctx, cancel := context.WithTimeout(context.Background(), promHangGuard)
	defer cancel()
	require.NoError(t, e.SendWait(ctx, last))
	promWait(t, "a send after the recovery to complete", func() bool { return recs[last].done.Load() > 0 })
	assert.Equal(t, sdma.StatusOK, sdma.Status(recs[last].st.Load()))
	require.NoError(t, dev.Close())
	for tx, r := range recs {
		assert.EqualValues(t, 1, r.done.Load(), "%p", tx)
	}
	assert.Equal(t, [][]byte{promBytes(1, 16), promBytes(4, 16)}, cs.Packets(0), "no read of the unmapped packet")
	assert.Empty(t, iommu.Live(), "leak report")
	assert.EqualValues(t, 1, e.Stats().Recoveries)
}

// ---------------------------------------------------------------------------------------------
// Promise: bad input gets a clear error and changes nothing it should not.

// promWorld is what a refused call must leave as it was, seen from outside.
type promWorld struct {
	stats      sdma.EngineStats
	free       int
	state      sdmatest.State
	empty      bool
	hist       int
	seq        uint32
	live       int
	sent, done int
}

// promRefusedCallbackRan counts calls of a callback given to a refused Init.
var promRefusedCallbackRan atomic.Int32

// TestPromiseBadInputChangesNothing: representative refused calls, each on a fresh manual device
// with one packet in flight. Each gets an error matching its sentinel and naming what was wrong;
// the engine, the mappings, the packets sent and the completions are as they were; and the
// txreq in flight that bad calls aimed at still goes out intact with its own callback, once.
func TestPromiseBadInputChangesNothing(t *testing.T) {
	payload := []byte("in flight, 20 bytes!")
	cases := []struct {
		name string
		call func(t *testing.T, dev *sdma.Device, e *sdma.Engine, inflight *sdma.TxReq) error
		want error
		says string // a word the message must contain
	}{
		{"Init of the txreq in flight", func(_ *testing.T, _ *sdma.Device, _ *sdma.Engine, tx *sdma.TxReq) error {
			return tx.Init(0, 4, sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) { promRefusedCallbackRan.Add(1) }))
		}, sdma.ErrInvalid, "flight"},
		{"InitAHG of the txreq in flight", func(_ *testing.T, _ *sdma.Device, _ *sdma.Engine, tx *sdma.TxReq) error {
			return tx.InitAHG(sdma.FlagAHGCopy, 8, sdma.AHG{Entry: 1}, nil)
		}, sdma.ErrInvalid, "flight"},
		{"AddKVAddr to the txreq in flight", func(_ *testing.T, dev *sdma.Device, _ *sdma.Engine, tx *sdma.TxReq) error {
			return tx.AddKVAddr(dev, make([]byte, 4))
		}, sdma.ErrInvalid, "flight"},
		{"AddDAddr to the txreq in flight", func(_ *testing.T, dev *sdma.Device, _ *sdma.Engine, tx *sdma.TxReq) error {
			return tx.AddDAddr(dev, 0x1000, 4)
		}, sdma.ErrInvalid, "flight"},
		{"Clean of the txreq in flight", func(_ *testing.T, _ *sdma.Device, _ *sdma.Engine, tx *sdma.TxReq) error {
			return tx.Clean()
		}, sdma.ErrInvalid, "flight"},
		{"Send of the txreq in flight", func(_ *testing.T, _ *sdma.Device, e *sdma.Engine, tx *sdma.TxReq) error {
			return e.Send(nil, tx, false)
		}, sdma.ErrInvalid, "flight"},
		{"SendWait of the txreq in flight", func(_ *testing.T, _ *sdma.Device, e *sdma.Engine, tx *sdma.TxReq) error {
			return e.SendWait(context.Background(), tx)
		}, sdma.ErrInvalid, "flight"},
		{"Send of the txreq in flight to another engine", func(_ *testing.T, dev *sdma.Device, _ *sdma.Engine, tx *sdma.TxReq) error {
			return dev.Engine(1).Send(nil, tx, false)
		}, sdma.ErrInvalid, "flight"},
		{"Send of an unfinished txreq", func(t *testing.T, dev *sdma.Device, e *sdma.Engine, _ *sdma.TxReq) error {
			tx := new(sdma.TxReq)
			require.NoError(t, tx.Init(0, 16, nil))
			require.NoError(t, tx.AddKVAddr(dev, make([]byte, 8)))
			err := e.Send(nil, tx, false)
			// Still the caller's, still holding its mapping: it can be finished and cleaned.
			require.NoError(t, tx.AddKVAddr(dev, make([]byte, 8)))
			require.NoError(t, tx.Clean())
			return err
		}, sdma.ErrInvalid, "missing"},
		{"Send of a txreq built for another device", func(t *testing.T, _ *sdma.Device, e *sdma.Engine, _ *sdma.TxReq) error {
			other, err := sdma.NewDevice(sdma.Config{Manual: true})
			require.NoError(t, err)
			defer other.Close()
			tx := new(sdma.TxReq)
			require.NoError(t, tx.Init(0, 4, nil))
			require.NoError(t, tx.AddKVAddr(other, make([]byte, 4)))
			err = e.Send(nil, tx, false)
			require.NoError(t, tx.Clean())
			return err
		}, sdma.ErrInvalid, "device"},
		{"SendList stopping at an unready txreq", func(t *testing.T, dev *sdma.Device, e *sdma.Engine, _ *sdma.TxReq) error {
			var l sdma.TxList
			bad := new(sdma.TxReq)
			require.NoError(t, bad.Init(0, 8, nil))
			l.PushBack(bad)
			n, err := e.SendList(nil, &l)
			assert.Zero(t, n)
			assert.Equal(t, 1, l.Len())
			return err
		}, sdma.ErrInvalid, ""},
		{"Init of 16384 bytes", func(*testing.T, *sdma.Device, *sdma.Engine, *sdma.TxReq) error {
			var tx sdma.TxReq
			return tx.Init(0, 16384, nil)
		}, sdma.ErrMsgSize, "16384"},
		{"Init of a negative length", func(*testing.T, *sdma.Device, *sdma.Engine, *sdma.TxReq) error {
			var tx sdma.TxReq
			return tx.Init(0, -1, nil)
		}, sdma.ErrInvalid, "-1"},
		{"AddDAddr crossing 48 bits", func(t *testing.T, dev *sdma.Device, _ *sdma.Engine, _ *sdma.TxReq) error {
			var tx sdma.TxReq
			require.NoError(t, tx.Init(0, 8, nil))
			return tx.AddDAddr(dev, dma.Addr(desc.MaxAddr-3), 8)
		}, sdma.ErrInvalid, "48"},
		{"InjectHalt of an unknown cause", func(_ *testing.T, _ *sdma.Device, e *sdma.Engine, _ *sdma.TxReq) error {
			return sdmatest.InjectHalt(e, sdma.NumHaltCauses)
		}, sdma.ErrInvalid, "cause"},
		{"Event unknown", func(_ *testing.T, _ *sdma.Device, e *sdma.Engine, _ *sdma.TxReq) error {
			return sdmatest.RaiseEvent(e, sdmatest.Event(200), "bad")
		}, sdma.ErrInvalid, "event"},
		{"SetFaults NaN", func(_ *testing.T, _ *sdma.Device, e *sdma.Engine, _ *sdma.TxReq) error {
			z := 0.0
			return sdmatest.SetFaults(e, sdmatest.FaultPlan{HaltRate: z / z})
		}, sdma.ErrInvalid, "HaltRate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			iommu := promIOMMU(t)
			cs := &sdmatest.CaptureSink{}
			dev, err := sdma.NewDevice(sdma.Config{Mapper: iommu, Manual: true, Engines: 2, RingSize: 64, Sink: cs})
			require.NoError(t, err)
			defer dev.Close()
			e := dev.Engine(0)
			var done, bad atomic.Int32
			var inflight sdma.TxReq
			require.NoError(t, inflight.Init(0, len(payload), sdma.CompleterFunc(func(tx *sdma.TxReq, st sdma.Status) {
				if tx != &inflight || st != sdma.StatusOK {
					bad.Add(1)
				}
				done.Add(1)
			})))
			require.NoError(t, inflight.AddKVAddr(dev, payload))
			require.NoError(t, e.Send(nil, &inflight, false))
			world := func() promWorld {
				return promWorld{
					stats: e.Stats(), free: e.DescqFreeCnt(), state: sdmatest.EngineState(e), empty: e.Empty(),
					hist: len(sdmatest.History(e)), seq: e.HeadSeq(), live: iommu.LiveCount(),
					sent: cs.Count(), done: int(done.Load()),
				}
			}
			before := world()
			var err2 error
			require.NotPanics(t, func() { err2 = c.call(t, dev, e, &inflight) })
			require.ErrorIs(t, err2, c.want)
			assert.Contains(t, err2.Error(), c.says, "the error says what was wrong")
			assert.Equal(t, before, world(), "a refused call changed the engine")
			assert.Zero(t, dev.Engine(1).Stats().Passes+dev.Engine(1).Stats().Packets)

			// The txreq in flight is intact: it goes out as built, with its own callback, once.
			n, err := e.Process()
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			assert.EqualValues(t, 1, done.Load())
			assert.Zero(t, bad.Load())
			assert.Zero(t, promRefusedCallbackRan.Load(), "the callback of a refused Init ran")
			assert.Equal(t, [][]byte{payload}, cs.Packets(0))
			require.NoError(t, dev.Close())
			assert.Zero(t, iommu.LiveCount(), "leak report: %v", iommu.Live())
			assert.EqualValues(t, 1, done.Load())
		})
	}
}

// TestPromiseNilArgumentsGetErrors: "no panic reaches the caller from a value it passed, except
// documented programmer errors (nil receiver)". A nil txreq, list or IOWait is a value passed,
// and no doc comment says it panics.
func TestPromiseNilArgumentsGetErrors(t *testing.T) {
	promNoLeak(t)
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	calls := map[string]func() error{
		"Send nil txreq":     func() error { return e.Send(nil, nil, false) },
		"SendWait nil txreq": func() error { return e.SendWait(context.Background(), nil) },
		"SendList nil list":  func() error { _, err := e.SendList(nil, nil); return err },
		"NewDevice typed-nil Mapper": func() error {
			var m *dma.IOMMU
			d, err := sdma.NewDevice(sdma.Config{Mapper: m, Manual: true})
			if d != nil {
				_ = d.Close()
			}
			return err
		},
	}
	for name, call := range calls {
		var err error
		if assert.NotPanics(t, func() { err = call() }, name) {
			assert.ErrorIs(t, err, sdma.ErrInvalid, name)
		}
	}
	assert.NotPanics(t, func() { e.Waiting(nil) })
}

// TestPromisePanicInWaitLockDoesNotWedgeEngine: if a call on the wait list panics on a bad
// argument, the engine must still work (a recovered panic is the caller's business; a wait lock
// left held is not): Close must return and stop every goroutine.
func TestPromisePanicInWaitLockDoesNotWedgeEngine(t *testing.T) {
	promNoLeak(t)
	for name, bad := range map[string]func(e *sdma.Engine){
		"Waiting(nil)":          func(e *sdma.Engine) { e.Waiting(nil) },
		"ParkOrRetry(w, nil)":   func(e *sdma.Engine) { var w sdma.IOWait; _ = e.ParkOrRetry(&w, nil, e.HeadSeq(), false) },
		"DeferOrRetry(w, nil)":  func(e *sdma.Engine) { var w sdma.IOWait; _ = e.DeferOrRetry(&w, nil, e.HeadSeq(), false) },
		"ParkOrRetry(nil, tx)":  func(e *sdma.Engine) { var tx sdma.TxReq; _ = e.ParkOrRetry(nil, &tx, e.HeadSeq(), false) },
		"DeferOrRetry(nil, tx)": func(e *sdma.Engine) { var tx sdma.TxReq; _ = e.DeferOrRetry(nil, &tx, e.HeadSeq(), false) },
	} {
		t.Run(name, func(t *testing.T) {
			dev, err := sdma.NewDevice(sdma.Config{RingSize: 64})
			require.NoError(t, err)
			e := dev.Engine(0)
			func() {
				defer func() { _ = recover() }()
				bad(e)
			}()
			var w sdma.IOWait
			done := make(chan error, 1)
			go func() {
				_ = e.Waiting(&w)
				done <- dev.Close()
			}()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(20 * time.Second): // instant when it works
				t.Fatal("hang guard: the engine is wedged (wait lock held after a panic); Close never returned")
			}
		})
	}
}

// ---------------------------------------------------------------------------------------------
// Promise: Close stops every goroutine the library started.

// TestPromiseCloseStopsEveryGoroutine closes devices in every configuration that starts
// goroutines (wait strategies, completion modes, sixteen engines) with packets in flight, a
// sender blocked on a full ring, a stalling sink, concurrent Closes and a Close after Shutdown;
// after each, no goroutine is left (goleak), and every txreq completed exactly once.
func TestPromiseCloseStopsEveryGoroutine(t *testing.T) {
	type cfgCase struct {
		name   string
		cfg    sdma.Config
		faults sdmatest.FaultPlan // set on every engine after NewDevice
	}
	var cases []cfgCase
	for _, w := range []sdma.WaitStrategy{sdma.WaitSpinPark, sdma.WaitBusyPoll, sdma.WaitPark} {
		for _, c := range []sdma.CompletionMode{sdma.CompleteInterrupt, sdma.CompletePoll} {
			cases = append(cases, cfgCase{fmt.Sprintf("%v/%v", w, c), sdma.Config{Wait: w, Completion: c, Engines: 2, RingSize: 64}, sdmatest.FaultPlan{}})
		}
	}
	cases = append(cases,
		cfgCase{"16 engines", sdma.Config{Engines: 16, RingSize: 64}, sdmatest.FaultPlan{}},
		cfgCase{"manual", sdma.Config{Manual: true, RingSize: 64}, sdmatest.FaultPlan{}},
		cfgCase{"faults", sdma.Config{Engines: 2, RingSize: 64}, sdmatest.FaultPlan{HaltRate: 0.05, Seed: 1}},
	)
	for _, c := range cases {
		for _, closeHow := range []string{"Close", "concurrent Close", "Shutdown then Close"} {
			t.Run(c.name+"/"+closeHow, func(t *testing.T) {
				promNoLeak(t)
				iommu := promIOMMU(t)
				cfg := c.cfg
				cfg.Mapper = iommu
				// A sink that stalls now and then keeps packets in flight when Close comes.
				cfg.Sink = &sdmatest.FaultSink{StallRate: 0.05, Stall: 200 * time.Microsecond, Seed: 3}
				dev, err := sdma.NewDevice(cfg)
				require.NoError(t, err)
				for i := range dev.NumEngines() {
					require.NoError(t, sdmatest.SetFaults(dev.Engine(i), c.faults))
				}
				var done, dup atomic.Int64
				var all []*promRec
				var blocked sync.WaitGroup
				for i := 0; i < dev.NumEngines(); i++ {
					e := dev.Engine(i)
					for k := 0; k < 80; k++ { // more than the ring holds
						p := &promTx{rec: &promRec{}}
						r := p.rec
						all = append(all, r)
						require.NoError(t, p.Init(0, 40, sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) {
							if r.done.Add(1) > 1 {
								dup.Add(1)
							}
							done.Add(1)
						})))
						require.NoError(t, p.AddKVAddr(dev, make([]byte, 40)))
						err := e.Send(nil, &p.TxReq, false)
						if errors.Is(err, sdma.ErrBusy) {
							// A blocked sender: parks until room comes or Close wakes it.
							blocked.Add(1)
							go func() {
								defer blocked.Done()
								ctx, cancel := context.WithTimeout(context.Background(), promHangGuard)
								defer cancel()
								err := e.SendWait(ctx, &p.TxReq)
								switch {
								case err == nil, errors.Is(err, sdma.ErrNotRunning):
									r.accepted = true
								case errors.Is(err, sdma.ErrClosed):
									_ = p.Clean()
								default:
									t.Errorf("SendWait: %v", err)
									_ = p.Clean()
								}
							}()
							break
						}
						if err != nil && !errors.Is(err, sdma.ErrNotRunning) { // halting now and then
							_ = dev.Close()
							require.NoError(t, err)
						}
						r.accepted = true
					}
				}
				switch closeHow {
				case "Close":
					require.NoError(t, dev.Close())
				case "concurrent Close":
					var wg sync.WaitGroup
					for i := 0; i < 3; i++ {
						wg.Add(1)
						go func() { defer wg.Done(); assert.NoError(t, dev.Close()) }()
					}
					wg.Wait()
				case "Shutdown then Close":
					ctx, cancel := context.WithTimeout(context.Background(), promHangGuard)
					assert.NoError(t, dev.Shutdown(ctx))
					cancel()
					require.NoError(t, dev.Close())
				}
				blocked.Wait()
				leakcheck.VerifyNone(t, goleak.IgnoreCurrent()) // before the test's own check: Close's doing
				assert.Zero(t, dup.Load(), "a txreq completed twice")
				for i, r := range all {
					if r.accepted {
						assert.EqualValues(t, 1, r.done.Load(), "txreq %d", i)
					} else {
						assert.Zero(t, r.done.Load(), "txreq %d", i)
					}
				}
				assert.Zero(t, iommu.LiveCount(), "leak report: %v", iommu.Live())
			})
		}
	}
}

// ---------------------------------------------------------------------------------------------
// Promise: packets arrive byte-identical to what was added, in submission order per engine.

// promPacket is the content of producer pid's seq-th packet: a pool header (daddr) with the id,
// then a body whose shape and bytes follow from the id (both ends compute it).
type promShape struct {
	kind int // 0 kvaddr, 1 bytes across pages, 2 pages of a region, 3 coalesced fragments, 4 max size
	n    int // body length
	off  int // offset into the shared source
}

func promShapeOf(pid, seq int) promShape {
	h := uint64(pid)*0x9e3779b97f4a7c15 + uint64(seq)*0xbf58476d1ce4e5b9
	h ^= h >> 29
	s := promShape{kind: int(h % 5)}
	switch s.kind {
	case 0:
		s.n = 1 + int((h>>8)%1500)
	case 1:
		s.n = dma.PageSize + int((h>>8)%dma.PageSize)
	case 2:
		s.n = 1 + int((h>>8)%(2*dma.PageSize))
	case 3:
		s.n = 64 + int((h>>8)%100) // one-byte fragments: past 63 they coalesce
	case 4:
		s.n = 16383 - 16
	}
	s.off = int((h >> 20) % dma.PageSize)
	return s
}

// TestPromisePacketsIdenticalAndInOrder: several engines, several producers on each, each
// producer numbering its packets. Packets are built from pool headers (daddr), heap buffers,
// buffers split across pages, pages of a region, many coalesced fragments, and the largest
// length. Every packet arrives once, byte-identical (with its zero pad), and per engine in the
// order its producer sent it. A second phase serialises the submissions of several goroutines
// per engine under a lock: the engine's packets then arrive exactly in that global order.
func TestPromisePacketsIdenticalAndInOrder(t *testing.T) {
	promNoLeak(t)
	engines, perEngine, perProducer := 3, 3, 400
	if testing.Short() {
		engines, perEngine, perProducer = 2, 2, 120
	}
	iommu := promIOMMU(t)
	cs := &sdmatest.CaptureSink{}
	dev, err := sdma.NewDevice(sdma.Config{Mapper: iommu, Engines: engines, RingSize: 256, Sink: cs})
	require.NoError(t, err)
	defer dev.Close()
	pool, err := dma.NewPool(iommu, "promise-order", 16, 16)
	require.NoError(t, err)
	region, err := dma.AllocPages(3)
	require.NoError(t, err)
	defer region.Close()
	rb := region.Bytes()
	for i := range rb {
		rb[i] = byte(i*31 + i>>8)
	}
	heap := make([]byte, 3*dma.PageSize+16383)
	for i := range heap {
		heap[i] = byte(i*17 + 3)
	}
	header := func(pid, seq int) []byte {
		h := make([]byte, 16)
		binary.LittleEndian.PutUint32(h, uint32(pid))
		binary.LittleEndian.PutUint32(h[4:], uint32(seq))
		copy(h[8:], "gosdma!!")
		return h
	}
	body := func(s promShape) []byte {
		switch s.kind {
		case 2:
			return rb[s.off : s.off+s.n]
		case 4:
			return heap[:s.n]
		default:
			return heap[s.off : s.off+s.n]
		}
	}
	want := func(pid, seq int) []byte {
		return promPad(append(header(pid, seq), body(promShapeOf(pid, seq))...))
	}
	ctx, cancel := context.WithTimeout(context.Background(), promHangGuard)
	defer cancel()
	var completed, notOK atomic.Int64
	var poolErrs atomic.Int64
	// build returns a ready txreq for producer pid's packet seq.
	build := func(pid, seq int) (*sdma.TxReq, error) {
		blk, err := pool.Alloc()
		if err != nil {
			return nil, err
		}
		copy(blk.Bytes, header(pid, seq))
		s := promShapeOf(pid, seq)
		tx := new(sdma.TxReq)
		if err := tx.Init(0, 16+s.n, sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
			if st != sdma.StatusOK {
				notOK.Add(1)
			}
			if pool.Free(blk) != nil {
				poolErrs.Add(1)
			}
			completed.Add(1)
		})); err != nil {
			return nil, err
		}
		if err := tx.AddDAddr(dev, blk.Addr, 16); err != nil {
			return nil, err
		}
		b := body(s)
		switch s.kind {
		case 0, 4:
			err = tx.AddKVAddr(dev, b)
		case 1:
			err = tx.AddBytes(dev, b)
		case 2:
			err = tx.AddPages(dev, region, s.off, s.n)
		case 3:
			for i := 0; i < len(b) && err == nil; i++ {
				err = tx.AddKVAddr(dev, b[i:i+1])
			}
		}
		return tx, err
	}
	// Phase 1: producers in parallel; order checked per producer.
	nprod := engines * perEngine
	var wg sync.WaitGroup
	errs := make(chan error, nprod)
	for pid := 0; pid < nprod; pid++ {
		wg.Add(1)
		go func(pid int) {
			defer wg.Done()
			e := dev.Engine(pid % engines)
			for seq := 0; seq < perProducer; seq++ {
				tx, err := build(pid, seq)
				if err == nil {
					err = e.SendWait(ctx, tx)
				}
				if err != nil {
					errs <- fmt.Errorf("producer %d packet %d: %w", pid, seq, err)
					return
				}
			}
		}(pid)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	total := int64(nprod * perProducer)
	promWait(t, "every packet to complete", func() bool { return completed.Load() == total })
	for i := 0; i < engines; i++ {
		next := map[int]int{}
		for k, pkt := range cs.Packets(i) {
			require.GreaterOrEqual(t, len(pkt), 16, "engine %d packet %d", i, k)
			pid, seq := int(binary.LittleEndian.Uint32(pkt)), int(binary.LittleEndian.Uint32(pkt[4:]))
			require.Equal(t, i, pid%engines, "engine %d packet %d from producer %d of another engine", i, k, pid)
			require.Equal(t, next[pid], seq, "engine %d packet %d: producer %d out of order (lost, repeated or reordered)", i, k, pid)
			next[pid]++
			if !assert.Equal(t, want(pid, seq), pkt, "engine %d packet %d (producer %d #%d, shape %+v) not byte-identical",
				i, k, pid, seq, promShapeOf(pid, seq)) {
				return
			}
		}
		for pid := i; pid < nprod; pid += engines {
			assert.Equal(t, perProducer, next[pid], "engine %d: producer %d's packets", i, pid)
		}
	}

	// Phase 2: submissions serialised per engine; the wire order is the submission order.
	cs.Reset()
	order := make([][][2]int, engines)
	locks := make([]sync.Mutex, engines)
	errs = make(chan error, nprod)
	for pid := 0; pid < nprod; pid++ {
		wg.Add(1)
		go func(pid int) {
			defer wg.Done()
			ei := pid % engines
			e := dev.Engine(ei)
			for seq := perProducer; seq < perProducer+perProducer/4; seq++ {
				tx, err := build(pid, seq)
				if err == nil {
					locks[ei].Lock()
					err = e.SendWait(ctx, tx)
					if err == nil {
						order[ei] = append(order[ei], [2]int{pid, seq})
					}
					locks[ei].Unlock()
				}
				if err != nil {
					errs <- fmt.Errorf("producer %d packet %d: %w", pid, seq, err)
					return
				}
				runtime.Gosched()
			}
		}(pid)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	total += int64(nprod * (perProducer / 4))
	promWait(t, "every packet to complete", func() bool { return completed.Load() == total })
	for i := 0; i < engines; i++ {
		got := cs.Packets(i)
		require.Len(t, got, len(order[i]), "engine %d", i)
		for k, id := range order[i] {
			require.Equal(t, want(id[0], id[1]), got[k], "engine %d packet %d: want producer %d #%d", i, k, id[0], id[1])
		}
	}
	assert.Zero(t, notOK.Load())
	assert.Zero(t, poolErrs.Load())
	require.NoError(t, dev.Close())
	assert.Zero(t, pool.InUse())
	require.NoError(t, pool.Destroy())
	assert.Empty(t, iommu.Live(), "leak report")
}
