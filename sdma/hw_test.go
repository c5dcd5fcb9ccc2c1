package sdma

import (
	"encoding/binary"
	"errors"
	"github.com/gosdma/gosdma/sdma/internal/sm"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// rawDesc builds a descriptor for the raw-ring tests.
func rawDesc(addr uint64, n int, first, last bool) desc.Desc {
	d, err := desc.Make(addr, n, 0)
	if err != nil {
		panic(err)
	}
	d.SetFirst(first)
	d.SetLast(last)
	return d
}

// haltSetup sends one good packet and leaves a second txreq ready, then returns the engine so
// the test can put a bad descriptor in the ring behind the good one.
type haltRig struct {
	dev      *Device
	e        *Engine
	c        completions
	good     TxReq
	after    TxReq
	captured *captureSink
}

func newHaltRig(t *testing.T, ringSize int) *haltRig {
	m := engTestIOMMU(t)
	dev, cs := engTestDevice(t, Config{Mapper: m, Manual: true, RingSize: ringSize})
	r := &haltRig{dev: dev, e: dev.Engine(0), captured: cs}
	engTestBuild(t, dev, &r.good, 0, engTestPattern(12, 1), &r.c)
	require.NoError(t, r.e.Send(nil, &r.good, false))
	t.Cleanup(func() {
		require.NoError(t, dev.Close())
		assert.Empty(t, m.Live(), "leak report")
	})
	return r
}

// finish puts a good txreq behind the bad descriptors, runs the hardware and checks the halt.
func (r *haltRig) finish(t *testing.T, cause HaltCause) *HaltError {
	engTestBuild(t, r.dev, &r.after, 0, engTestPattern(8, 2), &r.c)
	require.NoError(t, r.e.Send(nil, &r.after, false))
	n, err := r.e.Process()
	require.ErrorIs(t, err, ErrHalted)
	var h *HaltError
	require.ErrorAs(t, err, &h)
	assert.Equal(t, cause, h.Cause, "%v", err)
	assert.Equal(t, 1, n, "the good packet before the bad one was sent")
	assert.Equal(t, 1, r.captured.Count())
	assert.Equal(t, h, r.e.HaltCause())
	st, ok := r.c.status(&r.good)
	assert.True(t, ok)
	assert.Equal(t, StatusOK, st, "delivered before the halt: OK")
	st, ok = r.c.status(&r.after)
	assert.True(t, ok)
	assert.Equal(t, StatusAborted, st, "behind the halt: aborted")
	assert.True(t, r.e.Empty())
	stats := r.e.Stats()
	assert.EqualValues(t, 1, stats.Faults)
	assert.EqualValues(t, 1, stats.Halts[cause])
	assert.EqualValues(t, 1, stats.Recoveries)
	assertHaltPath(t, r.e, h.Cause.String())

	// Recovered: the ring restarted at index 0 (generation 0) and a new packet goes through.
	assert.True(t, r.e.Running())
	assert.Zero(t, r.e.ring.Tail())
	var late TxReq
	engTestBuild(t, r.dev, &late, 0, engTestPattern(4, 3), &r.c)
	require.NoError(t, r.e.Send(nil, &late, false))
	assert.Zero(t, r.e.ring.Slot(0).Generation())
	n, err = r.e.Process()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	st, ok = r.c.status(&late)
	assert.True(t, ok)
	assert.Equal(t, StatusOK, st)
	assert.Equal(t, engTestPattern(4, 3), r.captured.Packets(0)[1])
	return h
}

// assertHaltPath checks that the engine's last four transitions are the kernel's halt recovery,
// s99 → s50 → s30 → s40 → s99, the first caused by cause.
func assertHaltPath(t *testing.T, e *Engine, cause string) {
	t.Helper()
	h := e.history()
	require.GreaterOrEqual(t, len(h), 4)
	h = h[len(h)-4:]
	want := []stateChange{
		{From: sm.S99Running, To: sm.S50HwHaltWait, Event: sm.E60HwHalted, Cause: cause},
		{From: sm.S50HwHaltWait, To: sm.S30SwCleanUpWait, Event: sm.E15HwHaltDone},
		{From: sm.S30SwCleanUpWait, To: sm.S40HwCleanUpWait, Event: sm.E40SwCleaned},
		{From: sm.S40HwCleanUpWait, To: sm.S99Running, Event: sm.E25HwCleanUpDone},
	}
	for i := range want {
		assert.Equal(t, want[i].From, h[i].From, "%d: %v", i, h[i])
		assert.Equal(t, want[i].To, h[i].To, "%d: %v", i, h[i])
		assert.Equal(t, want[i].Event, h[i].Event, "%d: %v", i, h[i])
	}
	assert.Equal(t, cause, h[0].Cause)
	assert.Equal(t, sm.S99Running, e.state())
}

func TestHaltMappingFault(t *testing.T) {
	r := newHaltRig(t, 64)
	var bad TxReq
	require.NoError(t, bad.Init(0, 8, &r.c))
	require.NoError(t, bad.AddDAddr(r.dev, dma.Addr(0x7000_0000), 8)) // never mapped
	require.NoError(t, r.e.Send(nil, &bad, false))
	h := r.finish(t, CauseMemRead)
	assert.ErrorIs(t, h, dma.ErrFault, "wraps the IOMMU fault")
	st, _ := r.c.status(&bad)
	assert.Equal(t, StatusAborted, st)
}

func TestHaltGenerationMismatch(t *testing.T) {
	r := newHaltRig(t, 64)
	d1 := rawDesc(0, 4, false, true).WithGeneration(3) // slot generation is 0
	_, err := r.e.ring.Enqueue([]desc.Desc{rawDesc(0, 0, true, false), d1}, 1)
	require.NoError(t, err)
	h := r.finish(t, CauseGenMismatch)
	assert.Equal(t, d1, h.Desc)
}

func TestHaltMissingFirst(t *testing.T) {
	r := newHaltRig(t, 64)
	_, err := r.e.ring.Enqueue([]desc.Desc{rawDesc(0, 4, false, true)}, 0)
	require.NoError(t, err)
	r.finish(t, CauseFirstDesc)
}

func TestHaltFirstInsidePacket(t *testing.T) {
	r := newHaltRig(t, 64)
	_, err := r.e.ring.Enqueue([]desc.Desc{rawDesc(0, 0, true, false), rawDesc(0, 0, true, true)}, 0)
	require.NoError(t, err)
	r.finish(t, CauseFirstDesc)
}

func TestHaltTooLong(t *testing.T) {
	r := newHaltRig(t, 64)
	buf := make([]byte, 16392)
	a, err := r.dev.Mapper().MapSingle(buf, dma.ToDevice)
	require.NoError(t, err)
	_, err = r.e.ring.Enqueue([]desc.Desc{rawDesc(uint64(a), 16380, true, false), rawDesc(uint64(a)+16380, 8, false, true)}, 0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.dev.Mapper().UnmapSingle(a, len(buf), dma.ToDevice)) })
	r.finish(t, CauseTooLong)
}

func TestHaltDescOverflow(t *testing.T) {
	r := newHaltRig(t, 128)
	ds := make([]desc.Desc, desc.MaxDesc+1)
	ds[0] = rawDesc(0, 0, true, false)
	ds[len(ds)-1] = rawDesc(0, 0, false, true)
	_, err := r.e.ring.Enqueue(ds, 0)
	require.NoError(t, err)
	r.finish(t, CauseDescOverflow)
}

func TestHaltWrongDW(t *testing.T) {
	r := newHaltRig(t, 64)
	buf := make([]byte, 5)
	a, err := r.dev.Mapper().MapSingle(buf, dma.ToDevice)
	require.NoError(t, err)
	_, err = r.e.ring.Enqueue([]desc.Desc{rawDesc(uint64(a), 5, true, true)}, 0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.dev.Mapper().UnmapSingle(a, 5, dma.ToDevice)) })
	r.finish(t, CauseWrongDW)
}

func TestHaltAHGHeaderSelect(t *testing.T) {
	r := newHaltRig(t, 64)
	d := rawDesc(0, 0, true, true)
	require.NoError(t, d.SetHeaderMode(6))
	_, err := r.e.ring.Enqueue([]desc.Desc{d}, 0)
	require.NoError(t, err)
	r.finish(t, CauseHeaderSelect)
}

func TestHaltAHGEmptyEntry(t *testing.T) {
	r := newHaltRig(t, 64)
	w, err := desc.AHGUpdate(1, 0, 0, 8)
	require.NoError(t, err)
	var tx TxReq
	require.NoError(t, tx.InitAHG(FlagUseAHG, 4, AHG{Entry: 7, Words: []uint32{w}, HeaderLen: 8}, &r.c))
	require.NoError(t, tx.AddKVAddr(r.dev, make([]byte, 4)))
	require.NoError(t, r.e.Send(nil, &tx, false))
	r.finish(t, CauseHeaderAddress)
}

func TestHaltWakesWaiters(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64, Mapper: engTestIOMMU(t)})
	e := dev.Engine(0)
	var c completions
	var bad TxReq
	require.NoError(t, bad.Init(0, 8, &c))
	require.NoError(t, bad.AddDAddr(dev, dma.Addr(0x7000_0000), 8))
	require.NoError(t, e.Send(nil, &bad, false))
	fillRing(t, dev, e, &c)
	woken := make(chan int, 1)
	var w IOWait
	w.Init(func(e *Engine, w *IOWait, tx *TxReq, seq uint32, pktsSent bool) error {
		return e.ParkOrRetry(w, tx, seq, pktsSent)
	}, func(_ *IOWait, reason int) { woken <- reason }, nil)
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 6), &c)
	require.ErrorIs(t, e.Send(&w, &tx, true), ErrBusy)
	assert.True(t, e.Waiting(&w))
	_, err := e.Process()
	require.ErrorIs(t, err, ErrHalted)
	select {
	case reason := <-woken:
		assert.Equal(t, WakeAvail, reason)
	default:
		t.Fatal("the sw clean did not wake the parked waiter")
	}
	// The woken sender resends: the engine recovered, so the txreq goes through.
	require.NoError(t, e.Send(&w, w.TxHead().PopFront(), true))
	_, err = e.Process()
	require.NoError(t, err)
	st, ok := c.status(&tx)
	assert.True(t, ok)
	assert.Equal(t, StatusOK, st)
	assert.Zero(t, w.Busy())
}

// TestAHGCopyThenApply stores a header with COPY and builds later headers from it.
func TestAHGCopyThenApply(t *testing.T) {
	dev, cs := engTestDevice(t, Config{Manual: true, RingSize: 64, Mapper: engTestIOMMU(t)})
	e := dev.Engine(0)
	var c completions
	hdr := engTestPattern(40, 0x40)
	payload := engTestPattern(100, 9)

	var copyTx TxReq
	require.NoError(t, copyTx.InitAHG(FlagAHGCopy, len(hdr)+len(payload), AHG{Entry: 5}, &c))
	require.NoError(t, copyTx.AddKVAddr(dev, hdr))
	require.NoError(t, copyTx.AddKVAddr(dev, payload))
	require.NoError(t, e.Send(nil, &copyTx, false))

	upd := []struct {
		v             uint16
		dw, bit, bits uint8
	}{{0xabcd, 0, 0, 16}, {0x5, 3, 4, 3}, {0x7fff, 9, 17, 15}, {0x1, 2, 31, 1}, {0x3c, 1, 8, 8}, {0x2, 5, 0, 2}}
	for nw := 1; nw <= len(upd); nw += 2 { // modes UPDATE1, UPDATE2, UPDATE3 (6 words)
		var words []uint32
		want := append([]byte(nil), hdr...)
		for _, u := range upd[:nw] {
			w, err := desc.AHGUpdate(u.v, u.dw, u.bit, u.bits)
			require.NoError(t, err)
			words = append(words, w)
			dw := binary.LittleEndian.Uint32(want[4*int(u.dw):])
			mask := uint32(1)<<u.bits - 1
			dw = dw&^(mask<<u.bit) | (uint32(u.v)&mask)<<u.bit
			binary.LittleEndian.PutUint32(want[4*int(u.dw):], dw)
		}
		var tx TxReq
		require.NoError(t, tx.InitAHG(FlagUseAHG, len(payload), AHG{Entry: 5, Words: words, HeaderLen: len(hdr)}, &c))
		require.NoError(t, tx.AddKVAddr(dev, payload))
		require.NoError(t, e.Send(nil, &tx, false))
		_, err := e.Process()
		require.NoError(t, err)
		got := cs.Packets(0)
		assert.Equal(t, append(want, padded(payload)...), got[len(got)-1], "%d update words", nw)
	}
	assert.Equal(t, append(append([]byte(nil), hdr...), padded(payload)...), cs.Packets(0)[0], "COPY sends as is")
	assert.EqualValues(t, 4, c.n.Load())
}

func TestSinkPanicAndErrorRecorded(t *testing.T) {
	k := 0
	sink := SinkFunc(func(int, [][]byte) error {
		k++
		switch k {
		case 2:
			panic("boom")
		case 3:
			return errors.New("wire down")
		}
		return nil
	})
	dev, _ := engTestDevice(t, Config{Manual: true, Sink: sink})
	e := dev.Engine(0)
	var c completions
	var txs [4]TxReq
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, make([]byte, 8), &c)
		require.NoError(t, e.Send(nil, &txs[i], false))
		if i == 1 {
			_, err := e.Process()
			require.NoError(t, err)
			var se *SinkError
			require.ErrorAs(t, e.SinkError(), &se)
			assert.Equal(t, "boom", se.Panic)
		}
	}
	n, err := e.Process()
	require.NoError(t, err, "a sink failure does not halt")
	assert.Equal(t, 2, n)
	assert.ErrorIs(t, e.SinkError(), ErrSink)
	assert.Contains(t, e.SinkError().Error(), "wire down")
	assert.EqualValues(t, 2, e.Stats().SinkErrors)
	assert.EqualValues(t, 4, c.n.Load())
	assert.True(t, e.Running())
}

func TestInterruptSources(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 256, DescIntr: 8})
	e := dev.Engine(0)
	armCount(e) // as after a first interrupt: a new engine's count register is 0
	var txs [10]TxReq
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, make([]byte, 4), nil) // 1 descriptor each
		require.NoError(t, e.Send(nil, &txs[i], false))
	}
	_, err := e.Process()
	require.NoError(t, err)
	// 10 descriptors: one count interrupt at 8, one idle interrupt.
	assert.EqualValues(t, 2, e.Stats().Interrupts)
	var u TxReq
	engTestBuild(t, dev, &u, FlagUrgent, make([]byte, 4), nil)
	require.NoError(t, e.Send(nil, &u, false))
	_, err = e.Process()
	require.NoError(t, err)
	// INT_REQ, then the idle interrupt.
	assert.EqualValues(t, 4, e.Stats().Interrupts)
	assert.Equal(t, 11, e.Poll())
}

// TestIdleInterruptCoalesced: in CompleteInterrupt mode, the idle interrupt that follows the
// INT_REQ interrupt of a pass's last packet is counted but runs no second completion pass (the
// first one completed everything up to the same head); an idle interrupt at a head that moved
// since runs one, and every txreq completes exactly once.
func TestIdleInterruptCoalesced(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 256})
	e := dev.Engine(0)
	var c completions
	var u TxReq
	engTestBuild(t, dev, &u, FlagUrgent, make([]byte, 4), &c)
	require.NoError(t, e.Send(nil, &u, false))
	s0 := e.Stats()
	_, err := e.Process()
	require.NoError(t, err)
	s1 := e.Stats()
	assert.EqualValues(t, 2, s1.Interrupts-s0.Interrupts, "INT_REQ, then the idle interrupt")
	assert.EqualValues(t, 1, s1.Passes-s0.Passes, "one completion pass: the idle interrupt coalesced")
	assert.EqualValues(t, 1, c.n.Load())

	// INT_REQ on the first packet, none on the second: the idle interrupt's head moved.
	var a, b TxReq
	engTestBuild(t, dev, &a, FlagUrgent, make([]byte, 4), &c)
	engTestBuild(t, dev, &b, 0, make([]byte, 4), &c)
	require.NoError(t, e.Send(nil, &a, false))
	require.NoError(t, e.Send(nil, &b, false))
	_, err = e.Process()
	require.NoError(t, err)
	s2 := e.Stats()
	assert.EqualValues(t, 2, s2.Interrupts-s1.Interrupts)
	assert.EqualValues(t, 2, s2.Passes-s1.Passes, "the idle interrupt completes the second packet")
	assert.EqualValues(t, 3, c.n.Load())
	assert.Zero(t, c.dup.Load(), "each txreq completes once")

	// An empty pass raises no interrupt and runs no completion pass.
	_, err = e.Process()
	require.NoError(t, err)
	assert.EqualValues(t, s2.Passes, e.Stats().Passes, "an empty pass raises no interrupt")
	assert.True(t, e.Empty())
}

// sendOneInFlight sends n urgent packets to e's busy-polling goroutine one at a time, each after
// the previous one completed (the latency case), counting them on c.
func sendOneInFlight(t *testing.T, dev *Device, e *Engine, c *completions, n int) {
	t.Helper()
	base := c.n.Load()
	lone := make([]TxReq, n)
	for i := range lone {
		engTestBuild(t, dev, &lone[i], FlagUrgent, make([]byte, 8), c)
		require.NoError(t, e.Send(nil, &lone[i], false))
		for c.n.Load() != base+int64(i+1) {
			runtime.Gosched()
		}
	}
}

// TestOnePassPerPacketConcurrent: with one packet in flight, the busy-polling goroutine makes
// one hardware pass per packet at most (plus the start's few): after a pass
// that caught up with the tail it spins; it runs no pass that finds nothing.
func TestOnePassPerPacketConcurrent(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Wait: WaitBusyPoll, RingSize: 256})
	e := dev.Engine(0)
	var c completions
	p0 := hwPasses(e)
	const n = 300
	sendOneInFlight(t, dev, e, &c, n)
	// One pass per packet, plus the start's: the goroutine's first pass, and one for each
	// doorbell the start's state changes rang that it had not taken yet when p0 was read (a
	// -race run at -cpu 1 saw 302). Two passes per packet, the old idle wait's, give 2n.
	const startPasses = 4
	assert.LessOrEqual(t, hwPasses(e)-p0, uint64(n+startPasses))
	assert.Zero(t, c.dup.Load())
}
