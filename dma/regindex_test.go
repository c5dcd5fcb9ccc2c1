package dma

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRegIndexFind: the registrations' index answers every address as a scan of the
// registrations would: the one whose range holds it (its first and last byte included), or none
// (below the first, in a gap, past the last), by bus address and by CPU address.
func TestRegIndexFind(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var l []*Registration
		next := uint64(1 + rng.IntN(100))
		for range rng.IntN(12) {
			n := 1 + rng.IntN(64)
			r := &Registration{buf: make([]byte, n), addr: Addr(next)}
			r.cpu = uintptr(next*3 + 7) // another order of the same ranges' sizes
			l = append(l, r)
			next += uint64(n + rng.IntN(3)*rng.IntN(40)) // sometimes adjacent, sometimes a gap
		}
		rng.Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
		bus, cpus := newRegIndex(l, busKey), newRegIndex(l, cpuKey)
		scan := func(x uint64, key func(*Registration) uint64) *Registration {
			for _, r := range l {
				if x >= key(r) && x-key(r) < uint64(len(r.buf)) {
					return r
				}
			}
			return nil
		}
		for x := uint64(0); x < 4*next+20; x++ {
			require.Same(t, scan(x, busKey), bus.find(x), "round %d: bus %d", round, x)
			require.Same(t, scan(x, cpuKey), cpus.find(x), "round %d: cpu %d", round, x)
		}
	}
}

// TestRegistryFindAndHitOne: Registry.Find (the adds' lookup) and regSet.hitOne (Translate's
// fast path) answer as a scan of the registrations would, with none, one (hitOne's and Find's
// case without a search) and several registrations: Find gives the registration wholly holding a
// non-empty buffer and the buffer's bus address, also for a registration being deregistered
// (Acquire tells that, not Find); hitOne gives, with exactly one registration, the registration
// and offset of a range it wholly holds in a direction it allows, and nil otherwise (the general
// path answers then).
func TestRegistryFindAndHitOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	back := make([]byte, 512)
	dirs := []Direction{Bidirectional, ToDevice, FromDevice}
	for round := range 60 {
		var l []*Registration
		at := rng.IntN(8)
		for range []int{0, 1, 1, 2, 5}[round%5] {
			n := 1 + rng.IntN(48)
			if at+n > len(back) {
				break
			}
			r := &Registration{buf: back[at : at+n : at+n], addr: Addr(1<<20 + rng.IntN(1<<16)), dir: dirs[rng.IntN(3)]}
			r.cpu = sliceAddr(r.buf)
			if rng.IntN(4) == 0 {
				r.state.Store(regDying)
			}
			l = append(l, r)
			at += n + rng.IntN(3)*rng.IntN(9) // adjacent or a gap
		}
		var rg regs
		rg.publish(l)
		ry := rg.Registry()
		s := rg.set.Load()
		holder := func(off, n int) *Registration { // the scan: the registration holding back[off:off+n]
			for _, r := range l {
				start := int(r.cpu - sliceAddr(back))
				if n > 0 && off >= start && off+n <= start+len(r.buf) {
					return r
				}
			}
			return nil
		}
		for off := 0; off < at+4 && off < len(back); off++ {
			for n := 0; n <= 50 && off+n <= len(back); n++ {
				want := holder(off, n)
				r, addr := ry.Find(back[off : off+n])
				require.Same(t, want, r, "round %d: Find [%d,+%d)", round, off, n)
				if want != nil {
					require.Equal(t, want.addr+Addr(off-int(want.cpu-sliceAddr(back))), addr, "round %d: Find's address", round)
				}
			}
		}
		for _, r := range l { // hitOne by bus address, around each registration
			for d := -3; d < len(r.buf)+3; d++ {
				for size := 1; size <= len(r.buf)+2; size++ {
					for _, acc := range []Direction{ToDevice, FromDevice} {
						a := Addr(int(r.addr) + d)
						got, off := s.hitOne(a, size, acc)
						ok := len(l) == 1 && d >= 0 && d+size <= len(r.buf) && r.dir.Allows(acc)
						if !ok {
							require.Nil(t, got, "round %d: hitOne %d+%d of [%d,+%d) %v", round, d, size, r.addr, len(r.buf), acc)
							continue
						}
						require.Same(t, r, got, "round %d: hitOne", round)
						require.Equal(t, d, off)
					}
				}
			}
		}
	}
}
