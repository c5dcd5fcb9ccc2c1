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

// refusedBuf reports whether a map of buf in direction dir is refused before anything is mapped:
// an empty buffer or a bad direction (ErrInvalid), or memory of a closed Region (ErrClosed). Fault
// injection counts only the map calls that would be carried out, so such a call does not draw:
// core's map calls check before they draw, and FaultInjector asks this (and refusedPage,
// refusedSG, coherentSizeOK) before it does.
func refusedBuf(buf []byte, dir Direction) bool {
	if len(buf) == 0 || !dir.Valid() {
		return true
	}
	a := sliceAddr(buf)
	if !mayBeRegion(a) {
		return false
	}
	r := regionOf(a)
	return r != nil && r.Closed()
}

// pageRangeOK reports whether size bytes at offset lie in page p of a Region (MapPage's check).
func pageRangeOK(p Page, offset, size int) bool {
	return p.r != nil && p.i >= 0 && p.i < p.r.n && offset >= 0 && size > 0 && offset <= PageSize-size
}

// refusedPage is refusedBuf for MapPage's arguments.
func refusedPage(p Page, offset, size int, dir Direction) bool {
	return !pageRangeOK(p, offset, size) || !dir.Valid() || p.r.Closed()
}

// refusedSG is refusedBuf for MapSG's: no entries, or an entry refusedBuf refuses.
func refusedSG(sg []SG, dir Direction) bool {
	if len(sg) == 0 {
		return true
	}
	for i := range sg {
		if refusedBuf(sg[i].Buf, dir) {
			return true
		}
	}
	return false
}

// coherentSizeOK reports whether AllocCoherent takes size (positive, and a whole number of pages
// of it fits an int).
func coherentSizeOK(size int) bool { return size > 0 && size <= int(^uint(0)>>1)-PageSize }

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
