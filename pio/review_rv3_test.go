package pio

import (
	"errors"
	"math"
	"testing"
)

// TestContextSizesHugeCounts: ContextSizes clipped each type's count with contexts+c >
// SendContexts, which overflows for a count near MaxInt: KrcvQueues = MaxInt came back as
// MaxInt ACK contexts with a nil error (the fixed block count wrapped too), and RcvContexts =
// SendContexts = MaxInt as kernel and user contexts of 0 credits, nil error (the pool's context
// count wrapped negative, skipping the 0-credit check). Every count is clipped to the chip's
// contexts now, and a fixed size past MaxInt is the over-commit it is.
func TestContextSizesHugeCounts(t *testing.T) {
	for _, cfg := range []SizeConfig{
		{KrcvQueues: math.MaxInt},
		{KrcvQueues: math.MaxInt, SendContexts: math.MaxInt},
		{RcvContexts: math.MaxInt, SendContexts: math.MaxInt},
		{RcvContexts: math.MaxInt},
	} {
		sz, err := ContextSizes(cfg)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%+v: %v does not match ErrInvalid", cfg, err)
			}
			continue
		}
		n := 0
		for ty, ts := range sz {
			n += ts.Count
			if ts.Count > 0 && ts.Blocks < 1 {
				t.Errorf("%+v: %d %v contexts of %d blocks, no error", cfg, ts.Count, Type(ty), ts.Blocks)
			}
		}
		if sc := cfg.withDefaults().SendContexts; n > sc || n < 0 {
			t.Errorf("%+v: %d contexts for a chip of %d: %+v", cfg, n, sc, sz)
		}
	}
	// The clip itself is unchanged: the user contexts take what is left of the chip's 160.
	sz, err := ContextSizes(SizeConfig{RcvContexts: 1000})
	if err != nil || sz[User].Count != 160-16-1-1 {
		t.Fatalf("RcvContexts 1000: %+v, %v", sz, err)
	}
}
