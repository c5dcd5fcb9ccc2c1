package udpsink

import (
	"errors"
	"strings"
	"testing"
)

// TestZeroSinkFlushSaysNotMade: the zero Sink's Flush fails each entry with ErrInvalid saying the
// sink was not made by New, as its Deliver and Queue refuse it. It said "engine 0, sink built
// for 0" (ErrEngine), as if the engine number were at fault.
func TestZeroSinkFlushSaysNotMade(t *testing.T) {
	var s Sink
	errs := make([]error, 3)
	s.Flush(0, errs)
	for i, err := range errs {
		if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrEngine) || !strings.Contains(err.Error(), "not made by New") {
			t.Errorf("errs[%d] = %v, want ErrInvalid saying the Sink was not made by New", i, err)
		}
	}
	one := make([]error, 1)
	s.Flush(-1, one)
	if !errors.Is(one[0], ErrInvalid) {
		t.Errorf("Flush(-1) of the zero Sink: %v, want ErrInvalid", one[0])
	}
}

// TestZeroSinkGetters: the zero Sink's getters that 2d45b31's census left out answer as a sink
// of no engines that sent nothing: no batching limits, run 0, zero Stats.
func TestZeroSinkGetters(t *testing.T) {
	var s Sink
	if p, b := s.BatchLimit(); p != 0 || b != 0 {
		t.Errorf("BatchLimit = %d, %d", p, b)
	}
	if s.Run() != 0 || s.Stats() != (Stats{}) {
		t.Errorf("Run %d, Stats %+v", s.Run(), s.Stats())
	}
}
