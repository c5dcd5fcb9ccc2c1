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
