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
