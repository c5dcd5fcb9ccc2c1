package sdma

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/internal/splitmix"
)

// The in-package tests' sinks: copies of sdmatest's captureSink and faultSink, which this
// package's own tests cannot import (sdmatest imports sdma). sdmatest's tests cover the originals.

type captureSink struct {
	mu       sync.Mutex
	pkts     map[int][][]byte
	OnPacket func(engine int, pkt []byte)
}

func (s *captureSink) Deliver(engine int, segs [][]byte) error {
	var p []byte
	for _, b := range segs {
		p = append(p, b...)
	}
	if p == nil {
		p = []byte{}
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

func (s *captureSink) Packets(engine int) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.pkts[engine]...)
}

func (s *captureSink) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.pkts {
		n += len(p)
	}
	return n
}

func (s *captureSink) Reset() {
	s.mu.Lock()
	s.pkts = nil
	s.mu.Unlock()
}

type faultSink struct {
	Sink      Sink
	FailRate  float64
	StallRate float64
	Stall     time.Duration
	Seed      uint64

	n, failed, stalled atomic.Uint64
}

func (s *faultSink) Deliver(engine int, segs [][]byte) error {
	x := splitmix.Mix(s.Seed + s.n.Add(1)*splitmix.Gamma)
	if s.StallRate > 0 && float64(x>>11)/(1<<53) < s.StallRate {
		s.stalled.Add(1)
		time.Sleep(s.Stall)
	}
	if s.FailRate > 0 && float64(splitmix.Mix(x)>>11)/(1<<53) < s.FailRate {
		s.failed.Add(1)
		return ErrInjected
	}
	if s.Sink == nil {
		return nil
	}
	return s.Sink.Deliver(engine, segs)
}

func (s *faultSink) Failed() uint64 { return s.failed.Load() }
