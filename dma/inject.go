package dma

import (
	"math"
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/splitmix"
)

// injector decides which map calls fail. All of its state is atomic, so it is safe for concurrent
// use and adds no lock to the map path.
type injector struct {
	// nth counts down to the failing call: set by FailNth, decremented by each map call while
	// positive; the call that takes it from 1 to 0 fails. Only one caller can see 0.
	nth atomic.Int64
	// frac holds math.Float64bits of the failing fraction; set by FailFraction, read per call.
	frac atomic.Uint64
	// seed is the generator seed for frac; set by FailFraction, read per call.
	seed atomic.Uint64
	// calls numbers map calls for the fraction generator: call k fails iff hash(seed, k) < frac.
	// Deterministic for a given sequence of calls.
	calls atomic.Uint64
	// all makes every map call fail; set by FailAll.
	all atomic.Bool
	// injected counts failures injected; read by Injected.
	injected atomic.Uint64
}

func (in *injector) setNth(n int) {
	if n < 0 {
		n = 0
	}
	in.nth.Store(int64(n))
}

func (in *injector) setFraction(f float64, seed int64) {
	if !(f > 0) { // also NaN
		f = 0
	}
	in.seed.Store(uint64(seed))
	in.calls.Store(0)
	in.frac.Store(math.Float64bits(min(f, 1)))
}

// fail reports whether this map call must fail, and counts it if so.
func (in *injector) fail() bool {
	if in.decide() {
		in.injected.Add(1)
		return true
	}
	return false
}

func (in *injector) decide() bool {
	if in.all.Load() {
		return true
	}
	if in.nth.Load() > 0 && in.nth.Add(-1) == 0 {
		return true
	}
	if f := math.Float64frombits(in.frac.Load()); f > 0 {
		x := splitmix.Mix(in.seed.Load() + in.calls.Add(1)*splitmix.Gamma)
		return float64(x>>11)/(1<<53) < f
	}
	return false
}
