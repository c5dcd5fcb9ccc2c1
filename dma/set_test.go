package dma

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSetInStripe: Direct's set of a key is two neighbouring entries of the index of the stripe of
// the key's page (the entries the page lists' stripe is told about: stripe.ents), at an even
// offset, and the set the hash picks among those in use; the IOMMU's set of granule g is entry g
// and the entry half the index away, modulo the entries in use. For every number of sets in use.
func TestSetInStripe(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bits := range []uint{0, 2, setBits} {
		var d, m table
		d.init(directShift, true)
		m.init(12, false)
		d.useSets(bits)
		m.useSets(bits)
		for range 2000 {
			key := rng.Uint64() >> rng.IntN(40)
			set := d.set(key)
			s := d.stripe(key >> directShift)
			j := -1
			for k := range s.ents {
				if &s.ents[k] == set.e0 {
					j = k
				}
			}
			require.GreaterOrEqual(t, j, 0, "key %#x: set outside its page's stripe", key)
			require.Zero(t, j%2, "key %#x", key)
			require.Less(t, j/2, 1<<bits, "key %#x: a set not in use", key)
			require.Same(t, &s.ents[j+1], set.e1, "key %#x", key)
			require.Same(t, set.e0, d.entryAt(d.directSet(key)), "key %#x: Direct's fast paths' set", key)

			n := uint64(nStripes) << (bits + 1)
			set = m.set(key)
			require.Same(t, &m.ents[key%n], set.e0, "granule %#x", key)
			require.Same(t, &m.ents[(key+n/2)%n], set.e1, "granule %#x", key)
		}
	}
}
