package sdma

import (
	"sync"
	"sync/atomic"
)

// Sink receives each whole packet the hardware model gathered (the wire, for a software engine).
//
// Deliver is called on the engine's hardware-model goroutine (or the caller's, with Process), one
// packet at a time per engine, in ring order. segs alias mapped memory (the txreq's buffers, the
// pad, an AHG header built by the engine) and are valid only during the call: a sink that keeps
// bytes must copy them. A returned error is recorded against the engine (it does not halt it);
// a panic in Deliver is recovered and recorded the same way.
type Sink interface {
	Deliver(engine int, segs [][]byte) error
}

// DiscardSink drops every packet, counting packets and bytes. It is safe for concurrent use; the
// zero value is ready.
type DiscardSink struct {
	packets atomic.Uint64 // atomic add per packet by the delivering engines; read by Packets
	bytes   atomic.Uint64 // atomic add per packet; read by Bytes
}

// Deliver counts the packet.
func (s *DiscardSink) Deliver(_ int, segs [][]byte) error {
	n := 0
	for _, b := range segs {
		n += len(b)
	}
	s.packets.Add(1)
	s.bytes.Add(uint64(n))
	return nil
}

// Packets returns the number of packets delivered.
func (s *DiscardSink) Packets() uint64 { return s.packets.Load() }

// Bytes returns the number of bytes delivered.
func (s *DiscardSink) Bytes() uint64 { return s.bytes.Load() }

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

// SinkFunc adapts a function to the Sink interface.
type SinkFunc func(engine int, segs [][]byte) error

// Deliver calls f.
func (f SinkFunc) Deliver(engine int, segs [][]byte) error { return f(engine, segs) }
