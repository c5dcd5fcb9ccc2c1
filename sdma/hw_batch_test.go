package sdma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// Deferred head write-back: a BatchSink holds packets, and the engine neither writes the head
// back, nor raises interrupts, nor lets completion unmap for a packet until the sink's Flush
// finished with it.
//
// The tests' packets carry their id in their first 8 bytes and a pattern of that id after it.
// The checking sink reads every held packet's bytes at Flush and compares them with the pattern;
// completion poisons the buffer (its callback overwrites it) and the mapper spy records each
// unmap: a completion or an unmap before the Flush that sends the packet shows up as a poisoned
// packet, and as an unmap of an id the sink had not finished.

var errBatchTest = errors.New("batch test: failed on purpose")

// batchSink is a checking BatchSink.
type batchSink struct {
	limPkts, limBytes int

	// failFlush fails, at Flush, the packets whose id it returns true for; failQueue fails them
	// at Queue; panicFlush makes the n-th Flush (1-based, over all engines) panic half-way.
	failFlush, failQueue func(id uint64) bool
	panicFlush           int64
	// onFlush, if set, runs at the start of every Flush, before the sink reads anything.
	onFlush func(engine int, ids []uint64)

	mu        sync.Mutex
	held      map[int][][][]byte // engine → the queued packets' segments (slice headers)
	finished  map[uint64]bool    // id → the sink is done with it (sent or failed): true once
	sent      map[int][]uint64   // engine → ids sent, in order
	batches   map[int][]int      // engine → sizes of the flushed batches
	bad       []string           // packets whose bytes were wrong at Flush, queued twice, ...
	failed    atomic.Int64       // packets failed (Queue or Flush, panics included)
	flushes   atomic.Int64       // Flush calls, over all engines
	queued    atomic.Int64       // Queue calls that succeeded
	inFlush   atomic.Int32       // engines inside Flush now
	delivered int                // Deliver calls
	payloads  map[uint64][]byte  // id → the bytes the packet must have (set by the rig)
}

func newBatchSink(pkts, bytes int) *batchSink {
	return &batchSink{
		limPkts: pkts, limBytes: bytes,
		held:     map[int][][][]byte{},
		finished: map[uint64]bool{},
		sent:     map[int][]uint64{},
		batches:  map[int][]int{},
		payloads: map[uint64][]byte{},
	}
}

func (s *batchSink) BatchLimit() (int, int) { return s.limPkts, s.limBytes }

// Deliver sends a lone packet at once; called while the engine holds a batch, it records a
// defect.
func (s *batchSink) Deliver(engine int, segs [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.held[engine]) > 0 {
		s.bad = append(s.bad, fmt.Sprintf("engine %d: Deliver called while a batch is held", engine))
	}
	id := batchID(segs)
	s.finish(id)
	s.sent[engine] = append(s.sent[engine], id)
	s.delivered++
	return nil
}

// batchID is the id of a packet: its first 8 bytes (the tests' packets start with one segment
// of at least 8 bytes).
func batchID(segs [][]byte) uint64 { return binary.LittleEndian.Uint64(segs[0]) }

func (s *batchSink) Queue(engine int, segs [][]byte) error {
	id := batchID(segs)
	if s.failQueue != nil && s.failQueue(id) {
		s.mu.Lock()
		s.finish(id)
		s.mu.Unlock()
		s.failed.Add(1)
		return fmt.Errorf("queue %d: %w", id, errBatchTest)
	}
	s.mu.Lock()
	s.held[engine] = append(s.held[engine], append([][]byte(nil), segs...)) // the slice headers
	s.mu.Unlock()
	s.queued.Add(1)
	return nil
}

// finish marks id done with. s.mu held.
func (s *batchSink) finish(id uint64) {
	if s.finished[id] {
		s.bad = append(s.bad, fmt.Sprintf("packet %d finished twice", id))
	}
	s.finished[id] = true
}

func (s *batchSink) Flush(engine int, errs []error) {
	s.inFlush.Add(1)
	defer s.inFlush.Add(-1)
	s.mu.Lock()
	pkts := s.held[engine]
	s.held[engine] = nil
	s.mu.Unlock()
	if len(pkts) != len(errs) {
		s.mu.Lock()
		s.bad = append(s.bad, fmt.Sprintf("engine %d: Flush of %d errs for %d queued", engine, len(errs), len(pkts)))
		s.mu.Unlock()
	}
	if s.onFlush != nil {
		ids := make([]uint64, len(pkts))
		for i, p := range pkts {
			ids[i] = batchID(p)
		}
		s.onFlush(engine, ids)
	}
	n := s.flushes.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches[engine] = append(s.batches[engine], len(pkts))
	failed := 0
	defer func() { s.failed.Add(int64(failed)) }()
	for i, p := range pkts {
		if n == s.panicFlush && i == len(pkts)/2 {
			// Every packet of this batch fails, the ones already "sent" included: the
			// engine cannot tell which got out. Mark the rest finished before panicking.
			for _, q := range pkts[i:] {
				s.finish(batchID(q))
			}
			failed = len(pkts)
			panic("batch test: Flush panics on purpose")
		}
		id := batchID(p)
		var got []byte
		for _, seg := range p {
			got = append(got, seg...)
		}
		if want, ok := s.payloads[id]; ok && string(got) != string(want) {
			s.bad = append(s.bad, fmt.Sprintf("packet %d: bytes changed before its Flush (completed or unmapped early?)", id))
		}
		s.finish(id)
		if s.failFlush != nil && s.failFlush(id) {
			errs[i] = fmt.Errorf("flush %d: %w", id, errBatchTest)
			failed++
			continue
		}
		s.sent[engine] = append(s.sent[engine], id)
	}
}

func (s *batchSink) isFinished(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished[id]
}

func (s *batchSink) defects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}

// batchRig is a device with a batchSink and an unmap spy that checks every unmap against the
// sink: an unmap of a packet the sink has not finished is a defect.
type batchRig struct {
	t    testing.TB
	dev  *Device
	sink *batchSink
	spy  *batchSpy
	next atomic.Uint64 // the next packet id

	mu        sync.Mutex
	status    map[uint64]Status // id → completion status
	dups      []uint64          // ids completed twice
	bufs      map[uint64][]byte // id → the packet's buffer (poisoned at completion)
	txs       map[*TxReq]uint64 // txreq → id
	expect    []uint64          // ids registered
	skip      map[uint64]bool   // ids the engine refused
	completed atomic.Int64
}

// batchSpy wraps the mapper: each UnmapSingle of a packet's buffer must come after the sink
// finished the packet.
type batchSpy struct {
	dma.Mapper
	mu    sync.Mutex
	ids   map[dma.Addr]uint64 // bus address of a packet's buffer → id
	sink  *batchSink
	early []uint64 // ids unmapped before the sink finished them
}

func (s *batchSpy) UnmapSingle(addr dma.Addr, size int, dir dma.Direction) error {
	s.mu.Lock()
	id, ok := s.ids[addr]
	delete(s.ids, addr)
	s.mu.Unlock()
	if ok && !s.sink.isFinished(id) {
		s.mu.Lock()
		s.early = append(s.early, id)
		s.mu.Unlock()
	}
	return s.Mapper.UnmapSingle(addr, size, dir)
}

func newBatchRig(t testing.TB, sink *batchSink, cfg Config) *batchRig {
	t.Helper()
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	require.NoError(t, err)
	r := &batchRig{t: t, sink: sink, status: map[uint64]Status{}, bufs: map[uint64][]byte{}, txs: map[*TxReq]uint64{}, skip: map[uint64]bool{}}
	r.spy = &batchSpy{Mapper: m, ids: map[dma.Addr]uint64{}, sink: sink}
	cfg.Mapper = r.spy
	cfg.Sink = sink
	r.dev, err = NewDevice(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.dev.Close() })
	return r
}

// packet builds a txreq of one segment of n bytes (n >= 8, a multiple of 4): the id, then a
// pattern of it.
func (r *batchRig) packet(n int, flags Flags) (*TxReq, uint64) {
	id := r.next.Add(1)
	buf := make([]byte, n)
	binary.LittleEndian.PutUint64(buf, id)
	for i := 8; i < n; i++ {
		buf[i] = byte(id) + byte(i*7)
	}
	tx := new(TxReq)
	require.NoError(r.t, tx.Init(flags, n, r))
	require.NoError(r.t, tx.AddKVAddr(r.dev, buf))
	r.register(tx, id, buf, buf)
	return tx, id
}

// register makes tx, built by the caller with buf as its last added buffer (a whole number of
// dwords: no pad after it), packet id; want is what the sink must read.
func (r *batchRig) register(tx *TxReq, id uint64, buf, want []byte) {
	r.sink.mu.Lock()
	r.sink.payloads[id] = append([]byte(nil), want...)
	r.sink.mu.Unlock()
	ds := tx.Descs()
	r.spy.mu.Lock()
	r.spy.ids[dma.Addr(ds[len(ds)-1].Addr())] = id
	r.spy.mu.Unlock()
	r.mu.Lock()
	r.bufs[id] = buf
	r.txs[tx] = id
	r.expect = append(r.expect, id)
	r.mu.Unlock()
}

// refused drops id from the packets that must complete: the engine did not take it.
func (r *batchRig) refused(id uint64) {
	r.mu.Lock()
	r.skip[id] = true
	r.mu.Unlock()
}

// complete is every txreq's callback: it records the status once and poisons the buffer, so
// that a sink still reading it would see the change.
func (r *batchRig) Complete(tx *TxReq, st Status) {
	r.mu.Lock()
	id := r.txs[tx]
	if _, ok := r.status[id]; ok {
		r.dups = append(r.dups, id)
	}
	r.status[id] = st
	for i := 8; i < len(r.bufs[id]); i++ {
		r.bufs[id][i] = 0xee
	}
	r.mu.Unlock()
	r.completed.Add(1)
}

// check asserts the promises over every packet the rig built: each completed exactly once; one
// that completed OK was finished by the sink (sent or failed); one that completed aborted was
// never given to it; no packet was unmapped before the sink finished it, or changed before its
// Flush read it.
func (r *batchRig) check() (ok, aborted int) {
	t := r.t
	t.Helper()
	assert.Empty(t, r.sink.defects())
	r.spy.mu.Lock()
	early := append([]uint64(nil), r.spy.early...)
	r.spy.mu.Unlock()
	r.mu.Lock()
	for _, id := range early {
		// An aborted packet is unmapped without ever reaching the sink; one that completed OK
		// must have been finished by then.
		assert.NotEqual(t, StatusOK, r.status[id], "packet %d unmapped before the sink finished it", id)
	}
	defer r.mu.Unlock()
	assert.Empty(t, r.dups, "completed twice")
	for _, id := range r.expect {
		if r.skip[id] {
			continue
		}
		st, done := r.status[id]
		if !assert.True(t, done, "packet %d never completed", id) {
			continue
		}
		fin := r.sink.isFinished(id)
		switch st {
		case StatusOK:
			ok++
			assert.True(t, fin, "packet %d completed OK but the sink never finished it", id)
		case StatusAborted:
			aborted++
			assert.False(t, fin, "packet %d completed aborted but the sink had it", id)
		default:
			t.Errorf("packet %d: status %v", id, st)
		}
	}
	return ok, aborted
}

// processAll drives a Manual engine until every packet completed or the deadline passes.
func (r *batchRig) processAll(e *Engine, n int64) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.completed.Load() < n && time.Now().Before(deadline) {
		_, _ = e.Process()
		e.Poll()
	}
	require.Equal(r.t, n, r.completed.Load(), "completions")
}

// TestBatchSinkDeferredHead: the engine holds the head at the start of the batch the sink holds.
// In every Flush, the hardware head is exactly where the previous batch ended and completion has
// passed nothing of the batch being flushed; after it, the head and the interrupts the batch
// asked for (count interrupts here) catch up.
func TestBatchSinkDeferredHead(t *testing.T) {
	sink := newBatchSink(8, 0)
	r := newBatchRig(t, sink, Config{Manual: true, RingSize: 64, DescIntr: 4})
	e := r.dev.Engine(0)
	armCount(e) // as after a first interrupt: a new engine's count register is 0
	flushes := 0
	sink.onFlush = func(engine int, ids []uint64) {
		assert.EqualValues(t, 8*flushes, e.ring.HWHead(), "flush %d: hardware head", flushes)
		assert.EqualValues(t, 8*flushes, r.completed.Load(), "flush %d: completed", flushes)
		for _, id := range ids {
			r.mu.Lock()
			_, done := r.status[id]
			r.mu.Unlock()
			assert.False(t, done, "packet %d completed before its Flush", id)
		}
		flushes++
	}
	for range 20 {
		tx, _ := r.packet(16, 0) // one descriptor each
		require.NoError(t, e.Send(nil, tx, false))
	}
	n, err := e.Process()
	require.NoError(t, err)
	assert.Equal(t, 20, n)
	assert.EqualValues(t, 20, r.completed.Load())
	assert.EqualValues(t, 20, e.ring.HWHead())
	assert.Equal(t, []int{8, 8, 4}, sink.batches[0])
	assert.Equal(t, uint64(3), e.Stats().Flushes)
	want := make([]uint64, 20)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	assert.Equal(t, want, sink.sent[0], "sent in ring order")
	ok, aborted := r.check()
	assert.Equal(t, 20, ok)
	assert.Zero(t, aborted)
	assert.Zero(t, sink.delivered)
}

// TestBatchSinkByteBound: a batch is flushed once it holds the sink's byte bound.
func TestBatchSinkByteBound(t *testing.T) {
	sink := newBatchSink(32, 100)
	r := newBatchRig(t, sink, Config{Manual: true, RingSize: 64})
	e := r.dev.Engine(0)
	for range 10 {
		tx, _ := r.packet(40, 0)
		require.NoError(t, e.Send(nil, tx, false))
	}
	r.processAll(e, 10)
	assert.Equal(t, []int{3, 3, 3}, sink.batches[0], "40-byte packets, flushed at 100 bytes")
	assert.Equal(t, 1, sink.delivered, "the last, alone behind an empty batch, is delivered at once")
	ok, _ := r.check()
	assert.Equal(t, 10, ok)
}

// TestBatchSinkLimitOneDelivers: a BatchSink whose limit is one packet is a plain Sink.
func TestBatchSinkLimitOneDelivers(t *testing.T) {
	sink := newBatchSink(1, 0)
	r := newBatchRig(t, sink, Config{Manual: true, RingSize: 64})
	e := r.dev.Engine(0)
	for range 5 {
		tx, _ := r.packet(16, 0)
		require.NoError(t, e.Send(nil, tx, false))
	}
	r.processAll(e, 5)
	assert.Equal(t, 5, sink.delivered)
	assert.Zero(t, sink.flushes.Load())
	assert.Zero(t, e.Stats().Flushes)
	r.check()
}

// TestBatchSinkIdleFlush: one packet on an idle engine goes out at once, through Deliver as with
// a sink that does not batch, not when a batch would be full.
func TestBatchSinkIdleFlush(t *testing.T) {
	sink := newBatchSink(64, 0)
	r := newBatchRig(t, sink, Config{RingSize: 64})
	e := r.dev.Engine(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		tx, id := r.packet(16, FlagUrgent)
		require.NoError(t, e.SendWait(ctx, tx))
		require.Eventually(t, func() bool { return r.completed.Load() == int64(i+1) }, 10*time.Second, 100*time.Microsecond)
		assert.True(t, sink.isFinished(id))
	}
	assert.Empty(t, sink.batches[0])
	assert.Equal(t, 3, sink.delivered)
	assert.Zero(t, r.dev.Engine(0).Stats().Flushes)
	r.check()
}

// TestBatchSinkFailuresMidBatch: packets failed by Queue, by Flush, and a whole batch failed by
// a panicking Flush each complete OK once (lost on the wire), are counted as sink errors, and
// are never unmapped before the sink gave them up; the others are sent in order.
func TestBatchSinkFailuresMidBatch(t *testing.T) {
	sink := newBatchSink(8, 0)
	sink.failQueue = func(id uint64) bool { return id%7 == 5 }
	sink.failFlush = func(id uint64) bool { return id%3 == 1 }
	sink.panicFlush = 2
	r := newBatchRig(t, sink, Config{Manual: true, RingSize: 64, DescIntr: 8})
	e := r.dev.Engine(0)
	const n = 40
	for range n {
		tx, _ := r.packet(24, 0)
		require.NoError(t, e.Send(nil, tx, false))
	}
	r.processAll(e, n)
	ok, aborted := r.check()
	assert.Equal(t, n, ok)
	assert.Zero(t, aborted)
	st := e.Stats()
	assert.EqualValues(t, sink.failed.Load(), st.SinkErrors, "one sink error per failed packet")
	assert.Greater(t, st.SinkErrors, uint64(n/3))
	assert.ErrorIs(t, e.SinkError(), ErrSink)
	assert.Len(t, sink.batches[0], 5)
	// Sent: every packet but the failed ones and the panicking second batch (ids 9..16).
	var want []uint64
	for id := uint64(1); id <= n; id++ {
		if id%7 != 5 && id%3 != 1 && (id < 9 || id > 16) {
			want = append(want, id)
		}
	}
	var got []uint64
	for _, id := range sink.sent[0] {
		if id < 9 || id > 16 {
			got = append(got, id)
		}
	}
	assert.Equal(t, want, got)
}

// TestBatchSinkHaltWhileHeld: a halt while the sink holds packets flushes them first: the
// packets before the halt are sent and complete OK, the ones after it are never given to the
// sink and complete aborted.
func TestBatchSinkHaltWhileHeld(t *testing.T) {
	sink := newBatchSink(8, 0)
	r := newBatchRig(t, sink, Config{Manual: true, RingSize: 64, faults: faultPlan{HaltAt: 13}})
	e := r.dev.Engine(0)
	for range 20 {
		tx, _ := r.packet(16, 0)
		require.NoError(t, e.Send(nil, tx, false))
	}
	_, err := e.Process()
	var h *HaltError
	require.ErrorAs(t, err, &h)
	assert.EqualValues(t, 12, h.Index, "halted at packet 13")
	assert.Equal(t, []int{8, 4}, sink.batches[0], "the held 4 were flushed before the halt")
	r.processAll(e, 20)
	ok, aborted := r.check()
	assert.Equal(t, 12, ok)
	assert.Equal(t, 8, aborted)
	assert.Len(t, sink.sent[0], 12)
}

// TestBatchSinkAHGHeaders: APPLY_UPDATE packets held in one batch each keep their own header
// (the engine builds each in its batch slot, not in one scratch buffer).
func TestBatchSinkAHGHeaders(t *testing.T) {
	sink := newBatchSink(16, 0)
	r := newBatchRig(t, sink, Config{Manual: true, RingSize: 256})
	e := r.dev.Engine(0)
	// The COPY packet stores a 32-byte header whose first dword is its id.
	id := r.next.Add(1)
	hdr := make([]byte, 32)
	binary.LittleEndian.PutUint64(hdr, id)
	for i := 8; i < 32; i++ {
		hdr[i] = byte(i)
	}
	pay := engTestPattern(8, 1)
	tx := new(TxReq)
	require.NoError(t, tx.InitAHG(FlagAHGCopy, len(hdr)+len(pay), AHG{Entry: 3}, r))
	require.NoError(t, tx.AddKVAddr(r.dev, hdr))
	require.NoError(t, tx.AddKVAddr(r.dev, pay))
	r.register(tx, id, pay, append(append([]byte(nil), hdr...), pay...))
	require.NoError(t, e.Send(nil, tx, false))
	// Each APPLY packet rewrites the header's low 16 bits with its own id.
	for range 12 {
		id := r.next.Add(1)
		w, err := desc.AHGUpdate(uint16(id), 0, 0, 16)
		require.NoError(t, err)
		pay := engTestPattern(12, byte(id))
		tx := new(TxReq)
		require.NoError(t, tx.InitAHG(FlagUseAHG, len(pay), AHG{Entry: 3, Words: []uint32{w}, HeaderLen: len(hdr)}, r))
		require.NoError(t, tx.AddKVAddr(r.dev, pay))
		want := append([]byte(nil), hdr...)
		binary.LittleEndian.PutUint16(want, uint16(id))
		r.register(tx, id, pay, append(want, pay...))
		require.NoError(t, e.Send(nil, tx, false))
	}
	r.processAll(e, 13)
	assert.Equal(t, []int{13}, sink.batches[0])
	ok, _ := r.check()
	assert.Equal(t, 13, ok)
}

// TestBatchSinkCloseWhileHeldConcurrent: Close while the sink holds a batch (its Flush blocked)
// waits for the Flush; nothing of the batch completes or is unmapped before it returns, and then
// every packet completes exactly once.
func TestBatchSinkCloseWhileHeldConcurrent(t *testing.T) {
	engTestNoLeak(t)
	sink := newBatchSink(16, 0)
	entered, release := make(chan []uint64, 1), make(chan struct{})
	var once sync.Once
	sink.onFlush = func(_ int, ids []uint64) {
		once.Do(func() {
			entered <- ids
			<-release
		})
	}
	r := newBatchRig(t, sink, Config{RingSize: 64})
	e := r.dev.Engine(0)
	accepted := 0
	for range 40 {
		tx, id := r.packet(16, 0)
		if err := e.Send(nil, tx, false); err != nil {
			r.refused(id)
			continue
		}
		accepted++
	}
	held := <-entered
	require.NotEmpty(t, held)
	closed := make(chan error)
	go func() { closed <- r.dev.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while the sink held a batch")
	case <-time.After(20 * time.Millisecond):
	}
	r.mu.Lock()
	for _, id := range held {
		_, done := r.status[id]
		assert.False(t, done, "packet %d completed while its Flush was blocked", id)
	}
	r.mu.Unlock()
	close(release)
	require.NoError(t, <-closed)
	ok, aborted := r.check()
	assert.Equal(t, accepted, ok+aborted)
	assert.GreaterOrEqual(t, ok, len(held))
}

// TestBatchSinkStressConcurrent: engines with their own goroutines, several producers each,
// sink failures at Queue and Flush, random halts and count interrupts; then Shutdown. Every
// accepted packet completes exactly once, OK ones were finished by the sink, aborted ones never
// reached it, nothing was unmapped before the sink finished it, and each producer's packets were
// sent in the order it sent them.
func TestBatchSinkStressConcurrent(t *testing.T) {
	engTestNoLeak(t)
	sink := newBatchSink(16, 2048)
	sink.failQueue = func(id uint64) bool { return id%31 == 7 }
	sink.failFlush = func(id uint64) bool { return id%17 == 3 }
	sink.panicFlush = 5
	const engines, producers = 2, 2
	per := 400
	if testing.Short() {
		per = 150
	}
	r := newBatchRig(t, sink, Config{Engines: engines, RingSize: 64, DescIntr: 16,
		faults: faultPlan{HaltRate: 0.01, Seed: 7}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	prod := map[uint64]int{} // id → producer
	for p := range engines * producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := r.dev.Engine(p % engines)
			for i := range per {
				tx, id := r.packet(8+4*((i*5+p)%40), 0)
				mu.Lock()
				prod[id] = p
				mu.Unlock()
				switch err := e.SendWait(ctx, tx); {
				case err == nil, errors.Is(err, ErrNotRunning):
				default:
					r.refused(id)
					t.Errorf("producer %d: %v", p, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, r.dev.Shutdown(ctx))
	ok, aborted := r.check()
	assert.Equal(t, engines*producers*per, ok+aborted)
	var halts uint64
	for i := range engines {
		halts += r.dev.Engine(i).Stats().Faults
		last := map[int]uint64{}
		for _, id := range sink.sent[i] {
			p := prod[id]
			assert.Greater(t, id, last[p], "engine %d: producer %d's packets out of order", i, p)
			last[p] = id
		}
	}
	t.Logf("ok %d, aborted %d, halts %d, sink failures %d, flushes %d", ok, aborted, halts, sink.failed.Load(), sink.flushes.Load())
}
