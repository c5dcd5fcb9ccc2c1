package usdma

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// endCounter records every request end per slot, failing on an end nobody submitted.
type endCounter struct {
	mu    sync.Mutex
	ends  map[int]int
	state map[int][]CompState
}

// testHooks returns pq's test hooks, making them on first use.
func testHooks(pq *PktQ) *pqTestHooks {
	if pq.test == nil {
		pq.test = &pqTestHooks{}
	}
	return pq.test
}

func newEndCounter(pq *PktQ) *endCounter {
	c := &endCounter{ends: map[int]int{}, state: map[int][]CompState{}}
	testHooks(pq).onEnd = func(slot int, st CompState) {
		c.mu.Lock()
		c.ends[slot]++
		c.state[slot] = append(c.state[slot], st)
		c.mu.Unlock()
	}
	return c
}

func (c *endCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.ends {
		n += v
	}
	return n
}

func TestSubmitBadInputChangesNothing(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true})
	pq := testQueue(t, Config{Device: dev, Slots: 8, MTU: 4096})
	data := pattern(10000, 1)
	good, hdr := Message(1, 4096, testTemplate, data)
	for name, tc := range map[string]struct {
		info ReqInfo
		hdr  Header
		vecs [][]byte
		want error
	}{
		"slot out of range":   {info: with(good, func(i *ReqInfo) { i.CompIdx = 8 }), hdr: hdr, vecs: [][]byte{data}, want: ErrInvalid},
		"iovcnt 0":            {info: with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, -1) }), hdr: hdr, vecs: [][]byte{data}, want: ErrInvalid},
		"iovcnt mismatch":     {info: with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 2) }), hdr: hdr, vecs: [][]byte{data}, want: ErrInvalid},
		"fragsize 0":          {info: with(good, func(i *ReqInfo) { i.FragSize = 0 }), hdr: hdr, vecs: [][]byte{data}, want: ErrInvalid},
		"expected":            {info: with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Expected, 1) }), hdr: hdr, vecs: [][]byte{data}, want: ErrExpected},
		"opcode 5":            {info: with(good, func(i *ReqInfo) { i.Ctrl = 5<<4 | 2<<8 }), hdr: hdr, vecs: [][]byte{data}, want: ErrInvalid},
		"npkts 0":             {info: with(good, func(i *ReqInfo) { i.NPkts = 0 }), hdr: hdr, vecs: [][]byte{data}, want: ErrInvalid},
		"npkts wrong":         {info: with(good, func(i *ReqInfo) { i.NPkts = 4 }), hdr: hdr, vecs: [][]byte{data}, want: ErrInvalid},
		"9 vectors":           {info: with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 9) }), hdr: hdr, vecs: make9(data), want: ErrInvalid},
		"fragsize not 64s":    {info: with(good, func(i *ReqInfo) { i.FragSize = 4000 }), hdr: hdr, vecs: [][]byte{data}, want: ErrInvalid},
		"fragsize over MTU":   {info: with(good, func(i *ReqInfo) { i.FragSize = 8192 }), hdr: hdr, vecs: [][]byte{data}, want: ErrInvalid},
		"empty vector":        {info: with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 2) }), hdr: hdr, vecs: [][]byte{data, {}}, want: ErrInvalid},
		"verbs opcode":        {info: good, hdr: withH(hdr, func(h *Header) { h.setBTH(0, 0x04<<24) }), vecs: [][]byte{data}, want: ErrInvalid},
		"VL 9":                {info: good, hdr: withH(hdr, func(h *Header) { h.setPBC(0, 9<<12|h.pbc(0)&0xfff) }), vecs: [][]byte{data}, want: ErrInvalid},
		"SC != VL":            {info: good, hdr: withH(hdr, func(h *Header) { h.setLRH(0, 1<<12|2) }), vecs: [][]byte{data}, want: ErrInvalid},
		"GRH":                 {info: good, hdr: withH(hdr, func(h *Header) { h.setLRH(0, 3) }), vecs: [][]byte{data}, want: ErrInvalid},
		"template too long":   {info: good, hdr: withH(hdr, func(h *Header) { h.setLRH(2, uint16(lrhLen(8192)/4)) }), vecs: [][]byte{data}, want: ErrInvalid},
		"template no payload": {info: good, hdr: withH(hdr, func(h *Header) { h.setLRH(2, 15) }), vecs: [][]byte{data}, want: ErrInvalid},
	} {
		err := pq.Submit(context.Background(), tc.info, &tc.hdr, tc.vecs...)
		require.ErrorIs(t, err, tc.want, name)
		var re *ReqError
		require.ErrorAs(t, err, &re, name)
		for s := range pq.Slots() {
			assert.Equal(t, CompEntry{}, pq.Comp(s), "%s: slot %d changed", name, s)
		}
		st := pq.Stats()
		assert.Zero(t, st.Requests, name)
		assert.Zero(t, st.Pins.Nodes, name)
	}
	assert.ErrorIs(t, pq.Submit(context.Background(), good, nil, data), ErrInvalid)
	assert.ErrorIs(t, pq.Wait(context.Background(), 1), ErrSlotFree)
	assert.ErrorIs(t, pq.Wait(context.Background(), 99), ErrInvalid)

	// A slot in use: the first request stays in flight (a Manual engine nobody drives).
	require.NoError(t, pq.Submit(context.Background(), good, &hdr, data))
	assert.Equal(t, CompEntry{Status: Queued}, pq.Comp(1))
	err := pq.Submit(context.Background(), good, &hdr, data)
	assert.ErrorIs(t, err, ErrSlotInUse)
	assert.Equal(t, CompEntry{Status: Queued}, pq.Comp(1), "the refused request changed nothing")
	assert.EqualValues(t, 1, pq.Stats().Requests)
	_, err = dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 1))
}

func with(i ReqInfo, f func(*ReqInfo)) ReqInfo { f(&i); return i }
func withH(h Header, f func(*Header)) Header   { f(&h); return h }
func make9(d []byte) [][]byte {
	v := make([][]byte, 9)
	for i := range v {
		v[i] = d[i*100 : i*100+100]
	}
	return v
}

func TestNewBadConfig(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true})
	for name, cfg := range map[string]Config{
		"nil device": {},
		"slots":      {Device: dev, Slots: -1},
		"mtu":        {Device: dev, MTU: 32},
		"vls":        {Device: dev, NumVLs: 9},
		"pin limit":  {Device: dev, PinLimit: NoPinLimit - 1},
	} {
		_, err := New(cfg)
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
}

// TestAHGExhaustedFallsBackToFullHeaders: with every AHG entry of the engine taken, a
// multi-packet request goes out with full headers, byte-identical to the AHG run.
func TestAHGExhaustedFallsBackToFullHeaders(t *testing.T) {
	run := func(exhaust bool) ([][]byte, Stats) {
		sink := &recSink{}
		dev := testDevice(t, sdma.Config{Sink: sink})
		e := dev.Engine(0)
		if exhaust {
			for range 32 {
				_, err := e.AHGAlloc()
				require.NoError(t, err)
			}
		}
		pq := testQueue(t, Config{Device: dev})
		data := pattern(30000, 9)
		info, hdr := Message(0, 8192, testTemplate, data)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
		require.NoError(t, waitSlot(t, pq, 0))
		p, _ := sink.packets()
		return p, pq.Stats()
	}
	withAHG, s1 := run(false)
	without, s2 := run(true)
	assert.EqualValues(t, 3, s1.AHGPackets)
	assert.Zero(t, s1.AHGFallbacks)
	assert.Zero(t, s2.AHGPackets)
	assert.EqualValues(t, 1, s2.AHGFallbacks)
	assert.EqualValues(t, 4, s2.FullHeaders)
	assert.Equal(t, withAHG, without, "same bytes on the wire")
}

// TestPinCacheInvalidateInFlight: a vector in a dma.Region is sent, the packets sit in the
// ring, the caller invalidates the vector and closes the region; the pin mapping stays until
// the request ends, so the engine reads the right bytes and never faults; then it is unmapped.
func TestPinCacheInvalidateInFlight(t *testing.T) {
	iommu := testIOMMU(t)
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: sink, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev})
	reg, err := dma.AllocPages(4)
	require.NoError(t, err)
	vec := reg.Bytes()[100 : 100+12000]
	copy(vec, pattern(len(vec), 5))
	want := append([]byte(nil), vec...)
	info, hdr := Message(3, 4096, testTemplate, vec)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, vec))
	live := len(streaming(iommu))
	require.Positive(t, live)

	assert.Equal(t, 1, pq.Invalidate(vec))
	// The memory "goes away": the region reports that a mapping (the pin) still holds it,
	// and releases it at the last unmap.
	require.ErrorContains(t, reg.Close(), "released at the last unmap")
	st := pq.Stats().Pins
	assert.Zero(t, st.Unregistered, "the vector is registered with the device")
	assert.EqualValues(t, 1, st.Deferred, "unmap deferred: a request holds the node")
	assert.Zero(t, st.Nodes)
	assert.Equal(t, 3, st.Pages, "still pinned")

	_, err = dev.Engine(0).Process()
	require.NoError(t, err, "the engine never read unmapped memory")
	require.NoError(t, waitSlot(t, pq, 3))
	pkts, _ := sink.packets()
	var got []byte
	for _, p := range pkts {
		got = append(got, p[64:]...)
	}
	assert.Equal(t, want, got[:len(want)])
	assert.Zero(t, pq.Stats().Pins.Pages, "unmapped with the request's end")
	assert.Empty(t, streaming(iommu), "every mapping undone")
	assert.Zero(t, dev.Engine(0).Stats().Faults)
}

// TestPinCacheEvictsLRU: under a limit, the least recently used vectors no request holds are
// evicted; a vector still in flight is never evicted (the pin goes over the limit instead).
func TestPinCacheEvictsLRU(t *testing.T) {
	iommu := testIOMMU(t)
	dev := testDevice(t, sdma.Config{Manual: true, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev, PinLimit: 2})
	buf := make([]byte, 6*dma.PageSize)
	// page-aligned one-page vectors
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	page := func(i int) []byte { return buf[base+i*dma.PageSize : base+(i+1)*dma.PageSize] }
	send := func(slot int, v []byte) {
		info, hdr := Message(slot, 4096, testTemplate, v)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
	}
	drive := func() {
		_, err := dev.Engine(0).Process()
		require.NoError(t, err)
	}
	send(0, page(0))
	send(1, page(1))
	drive()
	send(2, page(0)) // hit: page 0 is now the most recent
	drive()
	send(3, page(2)) // miss over the limit: evicts page 1 (LRU), not page 0
	drive()
	st := pq.Stats().Pins
	assert.EqualValues(t, 1, st.Hits)
	assert.EqualValues(t, 3, st.Misses)
	assert.EqualValues(t, 1, st.Evictions)
	assert.Equal(t, 2, st.Pages)
	send(4, page(0)) // still cached
	drive()
	assert.EqualValues(t, 2, pq.Stats().Pins.Hits)

	// In flight: page 3 and page 4 held by requests not yet processed; a third pin cannot evict them.
	send(5, page(3)) // evicts page 2 or 0 (unheld)
	send(6, page(4)) // evicts the other
	send(7, page(1)) // both cached nodes held: over the limit
	st = pq.Stats().Pins
	assert.EqualValues(t, 1, st.OverLimit)
	assert.Equal(t, 3, st.Pages)
	drive()
	for s := 0; s < 8; s++ {
		require.NoError(t, waitSlot(t, pq, s))
	}
	require.NoError(t, pq.Close(context.Background()))
	assert.Empty(t, streaming(iommu))
}

// TestCompRingHaltsStress: requests through an engine that halts at random; every request
// ends exactly once, COMPLETE or ERROR (aborted), and the ring reads the same.
func TestCompRingHaltsStress(t *testing.T) {
	dev := testDevice(t, sdma.Config{RingSize: 256})
	eng := dev.Engine(0)
	require.NoError(t, sdmatest.SetFaults(eng, sdmatest.FaultPlan{HaltRate: 0.02, Seed: 7}))
	pq := testQueue(t, Config{Device: dev, Slots: 4})
	ends := newEndCounter(pq)
	n := 200
	if testing.Short() {
		n = 60
	}
	data := pattern(40000, 2)
	submitThroughHalts(t, pq, eng, 0, n, 4, data, nil)
	for s := range 4 {
		err := waitSlot(t, pq, s)
		if err != nil {
			require.ErrorIs(t, err, ErrFault)
		}
	}
	assert.Equal(t, n, ends.total(), "every request ended exactly once")
	ok, failed := ends.outcomes(t)
	t.Logf("%d complete, %d error, %d halts", ok, failed, eng.Stats().Faults)
	if ok == 0 {
		t.Logf("engine %v, history %v", sdmatest.EngineState(eng), sdmatest.History(eng))
		var sb strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&sb, 2)
		t.Log(sb.String())
	}
	st := pq.Stats()
	assert.EqualValues(t, ok, st.Completed)
	assert.EqualValues(t, failed, st.Failed)
	assert.Positive(t, failed, "some halts hit")
	assert.Positive(t, ok)
}

// outcomes counts the recorded ends by state: COMPLETE and ERROR; any other end fails t.
func (c *endCounter) outcomes(t *testing.T) (ok, failed int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sts := range c.state {
		for _, st := range sts {
			switch st {
			case Complete:
				ok++
			case Error:
				failed++
			default:
				t.Fatalf("end state %v", st)
			}
		}
	}
	return ok, failed
}

// submitThroughHalts submits requests first..n-1 of data, request i on slot i%slots once the
// slot's previous request ended, through an engine that may halt. A request the engine refuses
// because it is not running (ErrNotRunning: hfi1_user_sdma_process_request's -ECOMM while the
// engine recovers from a halt, s50 to s40) ends ERROR at once, on this goroutine, without
// blocking; so, as PSM retries on ECOMM, the loop then waits until the engine runs again
// (beforeWait, if not nil, is called first). A loop that went straight on would, whenever it
// runs while the engine is inside its recovery (a preempted engine goroutine on a loaded
// machine with one P, say), have every remaining request refused before the engine reaches
// s99 again, and no request complete.
func submitThroughHalts(t *testing.T, pq *PktQ, eng *sdma.Engine, first, n, slots int, data []byte, beforeWait func()) {
	t.Helper()
	for i := first; i < n; i++ {
		slot := i % slots
		if i >= slots {
			_ = waitSlot(t, pq, slot)
		}
		info, hdr := Message(slot, 4096, testTemplate, data)
		err := pq.Submit(context.Background(), info, &hdr, data)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrNotRunning) { // a halt mid-send: the engine is recovering
			require.ErrorIs(t, err, ErrFault, "only a packet's abort or a halt stops sending")
			continue
		}
		if beforeWait != nil {
			beforeWait()
		}
		waitRunning(t, eng)
	}
}

// waitRunning waits until eng is running (s99) again, failing t with its state and history if
// it is not within 10 seconds: an engine that halted recovers on its own.
func waitRunning(t *testing.T, eng *sdma.Engine) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !eng.Running() {
		if time.Now().After(deadline) {
			t.Fatalf("engine did not recover: %v, history %v", sdmatest.EngineState(eng), sdmatest.History(eng))
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// TestCompRingSubmitDuringRecoveryRace makes TestCompRingHaltsStress's rare failure ("0
// complete, 60 error, 1 halts", the engine seen in s30_sw_clean_up_wait) happen every time. The
// engine did recover there; the test's submitter had run while it was inside the sw clean: the
// clean's aborts end a request, which wakes the submitter, and if the engine's goroutine is
// then preempted (one P, a loaded machine), the submitter's every next request finds the engine
// not running and ends ERROR at once, so the loop finishes before the engine reaches s99. Here
// the engine is held inside its sw clean (the callback of a txreq sent behind the aborted
// request, on the goroutine driving the manual engine, after that request ended) until the
// submitter waits for it: the requests refused meanwhile end ERROR (ECOMM), the engine then
// finishes its recovery (e40, e25, s99), and every later request completes. (The hold was in
// the aborted request's Done, which ran after its end was visible; Done now runs before, see
// TestDoneRunsBeforeTheEndIsSeen.)
func TestCompRingSubmitDuringRecoveryRace(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, RingSize: 256})
	eng := dev.Engine(0)
	require.NoError(t, sdmatest.SetFaults(eng, sdmatest.FaultPlan{HaltAt: 3}))

	held := make(chan struct{})   // closed when the driver is held inside the sw clean
	resume := make(chan struct{}) // closed to let it go on
	var resumeOnce sync.Once
	release := func() { resumeOnce.Do(func() { close(resume) }) }
	var cleanState atomic.Uint32 // the engine's state while held (sdmatest.State)
	pq := testQueue(t, Config{Device: dev, Slots: 1})
	ends := newEndCounter(pq)
	data := pattern(40000, 2)
	info, hdr := Message(0, 4096, testTemplate, data)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, data), "request 0: all its packets in the ring")
	// Behind request 0's packets: a txreq whose abort, in the same sw clean, comes after request
	// 0 ended, and holds the driver there.
	var behind sdma.TxReq
	require.NoError(t, behind.Init(0, 64, sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
		if st != sdma.StatusAborted {
			return
		}
		cleanState.Store(uint32(sdmatest.EngineState(eng)))
		close(held)
		<-resume
	})))
	require.NoError(t, behind.AddKVAddr(dev, make([]byte, 64)))
	require.NoError(t, eng.Send(nil, &behind, false))

	stop, driver := make(chan struct{}), make(chan struct{})
	go func() { // the hardware: drives the manual engine, halting at its third descriptor
		defer close(driver)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n, _ := eng.Process(); n == 0 {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	t.Cleanup(func() {
		release()
		close(stop)
		<-driver
	})
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("request 0 did not end aborted")
	}
	require.Equal(t, sdmatest.S30SwCleanUpWait, sdmatest.State(cleanState.Load()), "held inside the sw clean")

	const n = 8
	submitThroughHalts(t, pq, eng, 1, n, 1, data, release)
	require.NoError(t, waitSlot(t, pq, 0), "the last request completes")
	assert.Equal(t, n, ends.total(), "every request ended exactly once")
	ok, failed := ends.outcomes(t)
	assert.Equal(t, 2, failed, "request 0 aborted by the halt, request 1 refused during the recovery")
	assert.Equal(t, n-2, ok, "every request after the recovery completes")
	assert.EqualValues(t, 1, eng.Stats().Faults)
	h := sdmatest.History(eng)
	require.NotEmpty(t, h)
	assert.Equal(t, sdmatest.S99Running, h[len(h)-1].To, "recovered: %v", h)
}

// TestCompRingMappingFaultsStress: map calls fail at random (pinning, headers) and the
// hardware's reads fault sometimes; every request still ends exactly once and nothing stays
// mapped after Close.
func TestCompRingMappingFaultsStress(t *testing.T) {
	iommu := testIOMMU(t)
	inj := dma.NewFaultInjector(iommu)
	dev := testDevice(t, sdma.Config{Mapper: inj, RingSize: 256})
	pq := testQueue(t, Config{Device: dev, Slots: 4})
	ends := newEndCounter(pq)
	inj.FailFraction(0.02, 3)
	n := 120
	if testing.Short() {
		n = 40
	}
	accepted := 0
	for i := range n {
		slot := i % 4
		if i >= 4 {
			_ = waitSlot(t, pq, slot)
		}
		data := pattern(20000+i, byte(i)) // a new vector each time: pinning maps too
		info, hdr := Message(slot, 4096, testTemplate, data)
		if i == n/2 {
			inj.FailTranslate(true) // the hardware's reads fault: a CauseMemRead halt
		}
		err := pq.Submit(context.Background(), info, &hdr, data)
		if errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
		accepted++
		if i == n/2 {
			var ce *CompError
			require.ErrorAs(t, waitSlot(t, pq, slot), &ce, "a read fault fails the request")
			inj.FailTranslate(false)
		}
	}
	for s := range 4 {
		_ = waitSlot(t, pq, s)
	}
	require.NoError(t, pq.Close(context.Background()))
	assert.Equal(t, accepted, ends.total())
	st := pq.Stats()
	assert.EqualValues(t, accepted, st.Completed+st.Failed)
	assert.Positive(t, st.Failed)
	assert.Empty(t, streaming(iommu), "no mapping left behind")
}

// TestCompRingCloseExactlyOnce: requests in flight when the device closes end ERROR exactly
// once; a Submit after the close is refused; the queue closes.
func TestCompRingCloseExactlyOnce(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 1024})
	require.NoError(t, err)
	pq, err := New(Config{Device: dev, Slots: 8})
	require.NoError(t, err)
	ends := newEndCounter(pq)
	data := pattern(20000, 4)
	for s := range 8 {
		info, hdr := Message(s, 4096, testTemplate, data)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
	}
	for s := range 8 {
		assert.Equal(t, Queued, pq.Comp(s).Status)
	}
	require.NoError(t, dev.Close())
	for s := range 8 {
		err := waitSlot(t, pq, s)
		var ce *CompError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, CompEntry{Status: Error, Errcode: ErrcodeAborted}, pq.Comp(s))
	}
	assert.Equal(t, 8, ends.total())
	info, hdr := Message(0, 4096, testTemplate, data)
	err = pq.Submit(context.Background(), info, &hdr, data)
	assert.ErrorIs(t, err, ErrClosed, "closed device: never runs again (ErrNotRunning is for an engine that may)")
	assert.Equal(t, 9, ends.total(), "the refused-after-claim request ended too, once")
	assert.Equal(t, CompEntry{Status: Error, Errcode: ESHUTDOWN}, pq.Comp(0))
	require.NoError(t, pq.Close(context.Background()))
	err = pq.Submit(context.Background(), info, &hdr, data)
	assert.ErrorIs(t, err, ErrClosed)
}

// TestDeferredIOWaitStress: a small ring and big messages: the queue goes DEFERRED on the
// engine's wait list and is activated by completions; every request completes.
//
// The sink holds the first packet until the queue has parked once (the deferred hook), so that
// the queue goes DEFERRED whatever the scheduling: with nothing held, a submitter held up while
// the engine kept pace (a legal schedule: its goroutine descheduled in its sleep, before the
// progress check) saw the engine's progress and retried each time, and never parked. A minute
// without a deferral is a hang guard: the sink lets go and the check of Deferrals fails.
func TestDeferredIOWaitStress(t *testing.T) {
	sink := &sdmatest.DiscardSink{}
	parked := make(chan struct{})
	var parkedOnce sync.Once
	park := func() { parkedOnce.Do(func() { close(parked) }) }
	held := sdma.SinkFunc(func(engine int, segs [][]byte) error {
		select {
		case <-parked:
		default:
			select {
			case <-parked:
			case <-time.After(time.Minute):
				park()
			}
		}
		return sink.Deliver(engine, segs)
	})
	dev := testDevice(t, sdma.Config{RingSize: 64, Sink: &sdmatest.FaultSink{Sink: held, StallRate: 0.05, Stall: 50 * time.Microsecond, Seed: 1}})
	pq := testQueue(t, Config{Device: dev, Slots: 2})
	testHooks(pq).deferred = park
	ends := newEndCounter(pq)
	data := pattern(256<<10, 6)
	n := 8
	if testing.Short() {
		n = 3
	}
	for i := range n {
		slot := i % 2
		if i >= 2 {
			require.NoError(t, waitSlot(t, pq, slot))
		}
		info, hdr := Message(slot, 8192, testTemplate, data)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
	}
	for s := range 2 {
		require.NoError(t, waitSlot(t, pq, s))
	}
	assert.Equal(t, n, ends.total())
	assert.Positive(t, pq.Stats().Deferrals, "the ring filled")
	assert.EqualValues(t, uint64(n)*32, sink.Packets())
	assert.Equal(t, Active, pq.State())
}

// TestSubmitConcurrent: goroutines submit on their own slots of one queue while pollers read
// the completion ring without locks; every request ends exactly once, each slot's entries go
// QUEUED -> COMPLETE, and the pollers never see a state out of the enum.
func TestSubmitConcurrent(t *testing.T) {
	sink := &sdmatest.DiscardSink{}
	dev := testDevice(t, sdma.Config{Engines: 2, Sink: sink})
	var done [16]atomic.Int32
	pq := testQueue(t, Config{Device: dev, Slots: 16, Engine: dev.Engine(1), Done: func(slot int, e CompEntry) {
		if e.Status != Complete {
			t.Errorf("slot %d: %+v", slot, e)
		}
		done[slot].Add(1)
	}})
	ends := newEndCounter(pq)
	per := 32 // a multiple of the 4 slots each goroutine uses
	if testing.Short() {
		per = 8
	}
	var stop atomic.Bool
	var polls sync.WaitGroup
	for range 2 {
		polls.Add(1)
		go func() {
			defer polls.Done()
			for !stop.Load() {
				for s := range pq.Slots() {
					if e := pq.Comp(s); e.Status > Error || (e.Status != Error && e.Errcode != 0) {
						t.Errorf("slot %d: %+v", s, e)
					}
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range per {
				slot := g*4 + i%4
				if i >= 4 {
					if err := waitSlot(t, pq, slot); err != nil {
						t.Error(err)
						return
					}
				}
				data := pattern(1+rng.IntN(40000), byte(i))
				tp := testTemplate
				tp.DLID = uint16(rng.IntN(1 << 16))
				info, hdr := Message(slot, 4096, tp, data)
				if err := pq.Submit(context.Background(), info, &hdr, data); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for s := range 16 {
		require.NoError(t, waitSlot(t, pq, s))
	}
	stop.Store(true)
	polls.Wait()
	assert.Equal(t, 4*per, ends.total())
	assert.EqualValues(t, 4*per, pq.Stats().Completed)
	for s := range done {
		assert.EqualValues(t, per/4, done[s].Load(), "Done once per request of slot %d", s)
	}
	assert.Zero(t, dev.Engine(0).Stats().Packets, "Config.Engine carries every request")
}

// streaming returns the live mappings other than coherent memory (the device's pad).
func streaming(m *dma.IOMMU) []dma.Mapping {
	var out []dma.Mapping
	for _, l := range m.Live() {
		if l.Kind != dma.KindCoherent {
			out = append(out, l)
		}
	}
	return out
}

// TestSubmitSteadyStateAllocs: once the vector is pinned and the allocator warm, a message's
// whole way (Submit, the engine, the completions, the slot's end) allocates nothing.
func TestSubmitSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, ahg := range []bool{true, false} {
		dev := testDevice(t, sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}})
		pq := testQueue(t, Config{Device: dev, DisableAHG: !ahg})
		e := dev.Engine(0)
		data := pattern(100000, 1)
		info, hdr := Message(0, 8192, testTemplate, data)
		send := func() {
			if err := pq.Submit(context.Background(), info, &hdr, data); err != nil {
				t.Fatal(err)
			}
			for pq.Comp(0).Status == Queued {
				if _, err := e.Process(); err != nil {
					t.Fatal(err)
				}
				e.Poll()
			}
		}
		send()
		assert.Zero(t, testing.AllocsPerRun(50, send), "ahg %v", ahg)
		assert.EqualValues(t, 52, pq.Stats().Completed) // one before, one warm-up run of AllocsPerRun, 50 measured
	}
}

// TestSendsAtMostMaxPktsPerQueue: a 100-packet request goes to the engine in passes of at most
// MAX_PKTS_PER_QUEUE packets (user_sdma_send_pkts), all of them in order.
func TestSendsAtMostMaxPktsPerQueue(t *testing.T) {
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, RingSize: 4096, Sink: sink})
	pq := testQueue(t, Config{Device: dev})
	var passes []int
	testHooks(pq).onSend = func(n int) { passes = append(passes, n) }
	data := pattern(100*4096, 8)
	info, hdr := Message(0, 4096, testTemplate, data)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
	assert.Equal(t, []int{16, 16, 16, 16, 16, 16, 4}, passes)
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 0))
	pkts, _ := sink.packets()
	require.Len(t, pkts, 100)
	for k, p := range pkts {
		var h Header
		copy(h[:], p)
		assert.Equal(t, (testTemplate.PSN+uint32(k))&psnMask, h.PSN(), "packet %d in order", k)
	}
}

// TestIOWaitTimeoutRetries: the queue is DEFERRED on a full ring and no completion pass runs
// for a while (a polled engine nobody polls yet): Submit's wait runs out Config.Timeout
// (SDMA_IOWAIT_TIMEOUT) and tries again, more than once, and the request completes once
// completions resume.
func TestIOWaitTimeoutRetries(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, Completion: sdma.CompletePoll, RingSize: 64})
	e := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Timeout: 2 * time.Millisecond})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the chip: it sends, but completions wait until Submit timed out twice
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = e.Process()
			if pq.Stats().Timeouts >= 2 {
				e.Poll()
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	data := pattern(64*4096, 2)
	info, hdr := Message(0, 4096, testTemplate, data)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
	require.NoError(t, waitSlot(t, pq, 0))
	close(stop)
	wg.Wait()
	st := pq.Stats()
	assert.Positive(t, st.Deferrals)
	assert.GreaterOrEqual(t, st.Timeouts, uint64(2), "the wait ran out and Submit retried")
	assert.Equal(t, Active, pq.State())
}
