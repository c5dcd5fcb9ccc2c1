package sdmatest

import (
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/gosdma/gosdma/internal/cacheline"
	"github.com/gosdma/gosdma/internal/pcpu"
	"github.com/gosdma/gosdma/internal/relaxed"
	"github.com/gosdma/gosdma/internal/sinklanes"
	"github.com/gosdma/gosdma/internal/splitmix"
	"github.com/gosdma/gosdma/sdma"
)

// DiscardSink drops every packet, counting packets and bytes. It is safe for concurrent use; the
// zero value is ready. A delivery counts on its P's own cache line (internal/pcpu: the goroutine
// is pinned to its P for the two adds, so nobody else writes that line meanwhile) with no locked
// instruction; engines delivering at once on different cores (BenchmarkPacketPathParallel) share
// no written line through the sink. On a P past discardPs, or under the purego tag (no pinning),
// it counts per engine index as before (see discardCount).
type DiscardSink struct {
	// The leading pad keeps perP[0] off the line that Deliver's nil check of s reads: without it,
	// every delivery on any engine read P 0's counter line, which P 0 writes on every packet (a
	// cross-core miss per packet on each side).
	_    [cacheline.Pad]byte
	perP [discardPs]discardP           // by P index, for pinned deliveries
	per  [sdma.MaxEngines]discardCount // by engine index, for the others
}

// discardPs is how many Ps count on lines of their own; deliveries on higher P indices (more
// than 64 Ps) take the per-engine path.
const discardPs = 64

// discardP is one P's count. Written (relaxed single-writer adds) only by deliveries pinned to
// that P, one at a time; read by Packets and Bytes (atomic loads).
type discardP struct {
	packets, bytes relaxed.Counter
	_              [cacheline.Pad - 16]byte
}

// discardCount is one engine index's count, for deliveries that are not pinned. Deliveries to one
// engine come one at a time, so the usual delivery takes busy (one locked instruction), adds to
// own without locked instructions and releases it with a store-release; a delivery that finds
// busy held (engines of the same index on two devices sharing the sink) adds to shared
// atomically instead. Packets and Bytes sum both.
type discardCount struct {
	// busy is 1 while a delivery counts on own. Taken by CAS 0→1 (acquire: the previous holder's
	// adds happen before), released by a store-release of 0; read by nobody else.
	busy atomic.Uint32
	// own: written by busy's holder (one writer at a time), read by Packets and Bytes (atomic
	// loads).
	ownPackets, ownBytes relaxed.Counter
	// shared: written (atomic add) by deliveries that found busy held; read by Packets and Bytes.
	sharedPackets, sharedBytes atomic.Uint64
	_                          cpu.CacheLinePad
}

// Deliver counts the packet.
func (s *DiscardSink) Deliver(engine int, segs [][]byte) error {
	n := 0
	for _, b := range segs {
		n += len(b)
	}
	if id := pcpu.Pin(); uint(id) < discardPs {
		c := &s.perP[id]
		c.packets.Add(1)
		c.bytes.Add(uint64(n))
		pcpu.Unpin()
		return nil
	}
	pcpu.Unpin()
	c := &s.per[uint(engine)%sdma.MaxEngines]
	if c.busy.CompareAndSwap(0, 1) {
		c.ownPackets.Add(1)
		c.ownBytes.Add(uint64(n))
		relaxed.StoreRelease32(&c.busy, 0)
		return nil
	}
	c.sharedPackets.Add(1)
	c.sharedBytes.Add(uint64(n))
	return nil
}

// Packets returns the number of packets delivered.
func (s *DiscardSink) Packets() uint64 {
	var n uint64
	for i := range s.perP {
		n += s.perP[i].packets.Load()
	}
	for i := range s.per {
		c := &s.per[i]
		n += c.ownPackets.Load() + c.sharedPackets.Load()
	}
	return n
}

// Bytes returns the number of bytes delivered.
func (s *DiscardSink) Bytes() uint64 {
	var n uint64
	for i := range s.perP {
		n += s.perP[i].bytes.Load()
	}
	for i := range s.per {
		c := &s.per[i]
		n += c.ownBytes.Load() + c.sharedBytes.Load()
	}
	return n
}

// CaptureSink keeps a copy of every packet, per engine, for tests. It is safe for concurrent use;
// the zero value is ready. It allocates for every packet.
type CaptureSink struct {
	mu       sync.Mutex                   // guards pkts
	pkts     map[int][][]byte             // engine → packets in delivery order
	OnPacket func(engine int, pkt []byte) // optional; called with the copy, under the sink's lock
}

// Deliver appends a copy of the packet (its segments concatenated).
func (s *CaptureSink) Deliver(engine int, segs [][]byte) error {
	n := 0
	for _, b := range segs {
		n += len(b)
	}
	p := make([]byte, 0, n)
	for _, b := range segs {
		p = append(p, b...)
	}
	s.mu.Lock()
	if s.pkts == nil {
		s.pkts = make(map[int][][]byte)
	}
	s.pkts[engine] = append(s.pkts[engine], p)
	if s.OnPacket != nil {
		s.OnPacket(engine, p)
	}
	s.mu.Unlock()
	return nil
}

// Packets returns the packets engine delivered so far, in order. The slice is a copy of the
// list; the packets themselves are the sink's copies and must not be modified.
func (s *CaptureSink) Packets(engine int) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.pkts[engine]...)
}

// Count returns the number of packets captured over all engines.
func (s *CaptureSink) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.pkts {
		n += len(p)
	}
	return n
}

// Reset forgets every captured packet.
func (s *CaptureSink) Reset() {
	s.mu.Lock()
	s.pkts = nil
	s.mu.Unlock()
}

// FaultSink wraps a Sink and makes chosen deliveries fail (with sdma.ErrInjected, recorded
// against the engine as an sdma.SinkError; the txreq still completes OK, as a packet lost on the
// wire) or stall (sleep before delivering: a slow wire, which backs the ring up). Decisions are
// drawn per delivery from Seed, lock-free. Safe for concurrent use if the wrapped sink is. Set
// the fields before the device uses it: sdma.NewDevice calls Validate and refuses a rate outside
// 0..1 (NaN too: above 1 every delivery would fail, NaN none) or a negative Stall; fields changed
// after NewDevice are not checked again.
type FaultSink struct {
	Sink      sdma.Sink     // the wrapped sink; nil means drop successful deliveries
	FailRate  float64       // probability that a delivery fails, 0..1
	StallRate float64       // probability that a delivery stalls first, 0..1
	Stall     time.Duration // how long a stall lasts
	Seed      uint64        // seeds the draws: the same Seed draws the same decisions in delivery order

	n       atomic.Uint64 // deliveries so far, the draw index (atomic add by each delivering engine)
	failed  atomic.Uint64 // deliveries failed (statistic; atomic add, read by Failed)
	stalled atomic.Uint64 // deliveries stalled (statistic; atomic add, read by Stalled)
}

// Validate checks the fault settings: FailRate and StallRate in 0..1 (not NaN), Stall not
// negative. A bad one is an *sdma.ConfigError (it matches sdma.ErrConfig and sdma.ErrInvalid)
// naming the field, "sdmatest.FaultSink.FailRate" say. A wrapped sink that is a nil pointer in a
// non-nil interface is refused (as sdma.NewDevice refuses one as Config.Sink), and one with a
// Validate method of its own is validated too. sdma.NewDevice calls it (see sdma.Config.Sink).
func (s *FaultSink) Validate() error {
	if err := s.validate("sdmatest.FaultSink."); err != nil {
		return err
	}
	return validateInner("sdmatest.FaultSink.Sink", " (use a nil Sink to drop the packets)", s.Sink)
}

// validate checks the fault fields, naming a bad one with prefix.
func (s *FaultSink) validate(prefix string) error {
	for _, f := range []struct {
		name string
		rate float64
	}{{"FailRate", s.FailRate}, {"StallRate", s.StallRate}} {
		if !(f.rate >= 0 && f.rate <= 1) {
			return &sdma.ConfigError{Field: prefix + f.name, Value: f.rate, Reason: "want a probability, 0..1"}
		}
	}
	if s.Stall < 0 {
		return &sdma.ConfigError{Field: prefix + "Stall", Value: s.Stall, Reason: "want a duration, 0 or more"}
	}
	return nil
}

// validateInner refuses a wrapped sink (the field named field) that is a nil pointer, func or
// other nil value in a non-nil interface, as NewDevice refuses one given as Config.Sink (every
// delivery would panic; hint follows the reason), and runs its own Validate, if it has one.
func validateInner(field, hint string, inner any) error {
	switch r := reflect.ValueOf(inner); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan, reflect.Interface:
		if r.IsNil() {
			return &sdma.ConfigError{Field: field, Value: inner, Reason: "a nil pointer in a non-nil interface" + hint}
		}
	}
	if v, ok := inner.(interface{ Validate() error }); ok {
		return v.Validate()
	}
	return nil
}

// Engines is the wrapped sink's, so that sdma.NewDevice (and verbs.New) still refuse a sink too
// small for the device through the wrapper (see sdma.Config.Sink): the number of engine numbers
// the wrapped sink says it takes, or -1, "it does not say", if it has no Engines method (or is
// nil), which they take as a sink without the method. Read once, at construction.
func (s *FaultSink) Engines() int { return sinklanes.Forward(s.Sink) }

// Deliver draws, maybe stalls, and fails or delivers.
func (s *FaultSink) Deliver(engine int, segs [][]byte) error {
	if err := s.draw(); err != nil {
		return err
	}
	if s.Sink == nil {
		return nil
	}
	return s.Sink.Deliver(engine, segs)
}

// draw makes one packet's decisions: it may stall (sleep) and returns sdma.ErrInjected for a
// packet to fail.
func (s *FaultSink) draw() error {
	x := splitmix.Mix(s.Seed + s.n.Add(1)*splitmix.Gamma)
	if s.StallRate > 0 && float64(x>>11)/(1<<53) < s.StallRate {
		s.stalled.Add(1)
		time.Sleep(s.Stall)
	}
	if s.FailRate > 0 && float64(splitmix.Mix(x)>>11)/(1<<53) < s.FailRate {
		s.failed.Add(1)
		return sdma.ErrInjected
	}
	return nil
}

// FaultBatchSink is a FaultSink that keeps the batching of the sdma.BatchSink it wraps: each
// packet draws as with FaultSink, at Deliver or Queue (a failed one is not queued: it fails with
// sdma.ErrInjected; a stalled one sleeps first), and Flush and BatchLimit are the wrapped
// sink's. Set the fields before the device uses it; sdma.NewDevice calls Validate, as for
// FaultSink.
type FaultBatchSink struct {
	FaultSink                // the fault plan: FailRate, StallRate, Stall, Seed; its Sink is unused
	Batch     sdma.BatchSink // the wrapped sink; required (Validate refuses nil)
}

// Deliver draws, maybe stalls, and fails or delivers through the wrapped sink.
func (s *FaultBatchSink) Deliver(engine int, segs [][]byte) error {
	if err := s.draw(); err != nil {
		return err
	}
	return s.Batch.Deliver(engine, segs)
}

// Validate is FaultSink's, naming the field "sdmatest.FaultBatchSink.FailRate" say; it refuses a
// nil Batch (there is nothing to deliver to, queue on or flush) and validates the wrapped
// BatchSink if it has a Validate method.
func (s *FaultBatchSink) Validate() error {
	if err := s.validate("sdmatest.FaultBatchSink."); err != nil {
		return err
	}
	if s.Batch == nil {
		return &sdma.ConfigError{Field: "sdmatest.FaultBatchSink.Batch", Value: nil, Reason: "want the sdma.BatchSink to wrap"}
	}
	return validateInner("sdmatest.FaultBatchSink.Batch", "", s.Batch)
}

// Engines is the wrapped BatchSink's (Batch, the sink every packet goes to; not FaultSink.Sink),
// or -1 if it has no Engines method (or is nil), as for FaultSink.
func (s *FaultBatchSink) Engines() int { return sinklanes.Forward(s.Batch) }

// BatchLimit is the wrapped sink's.
func (s *FaultBatchSink) BatchLimit() (packets, bytes int) { return s.Batch.BatchLimit() }

// Queue draws, maybe stalls, and fails or queues with the wrapped sink.
func (s *FaultBatchSink) Queue(engine int, segs [][]byte) error {
	if err := s.draw(); err != nil {
		return err
	}
	return s.Batch.Queue(engine, segs)
}

// Flush is the wrapped sink's.
func (s *FaultBatchSink) Flush(engine int, errs []error) { s.Batch.Flush(engine, errs) }

// Failed returns the number of deliveries the sink failed on purpose.
func (s *FaultSink) Failed() uint64 { return s.failed.Load() }

// Stalled returns the number of deliveries it stalled.
func (s *FaultSink) Stalled() uint64 { return s.stalled.Load() }
