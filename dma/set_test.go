package dma

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSetInRegion: Direct's set of a key is two neighbouring entries of the region (nEnt entries)
// of the index that the key's half page hashes to, at an even offset, the set of the key's cache
// line plus the half page's hash bits modulo the sets in use; the fast paths' directSet names the
// same entries; and with every set in use, keys in different cache lines of one half page have
// different sets (index.go, "Direct's sets: one line per buffer line"). The IOMMU's set of
// granule g is entry g and the entry half the index away, modulo the entries in use. For every
// number of sets in use.
func TestSetInRegion(t *testing.T) {
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
			half := key >> directHalfShift << directHalfShift
			r := d.directSet(half) &^ (nEnt - 1) // the half page's region
			j := -1
			for k := range uint64(nEnt) {
				if d.entryAt(r+k) == set.e0 {
					j = int(k)
				}
			}
			require.GreaterOrEqual(t, j, 0, "key %#x: set outside its half page's region", key)
			require.Zero(t, j%2, "key %#x", key)
			require.Less(t, j/2, 1<<bits, "key %#x: a set not in use", key)
			require.Same(t, d.entryAt(r+uint64(j)+1), set.e1, "key %#x", key)
			require.Same(t, set.e0, d.entryAt(d.directSet(key)), "key %#x: Direct's fast paths' set", key)
			if bits == setBits {
				// Every line of the half page: a set of its own.
				seen := make(map[*entry]uint64)
				for line := uint64(0); line < 1<<(directHalfShift-lineShift); line++ {
					k := half | line<<lineShift | uint64(rng.IntN(1<<lineShift))
					e := d.set(k).e0
					prev, dup := seen[e]
					require.False(t, dup, "keys %#x and %#x in two lines of a half page share a set", prev, k)
					seen[e] = k
				}
			}

			n := uint64(nStripes) << (bits + 1)
			set = m.set(key)
			require.Same(t, &m.ents[key%n], set.e0, "granule %#x", key)
			require.Same(t, &m.ents[(key+n/2)%n], set.e1, "granule %#x", key)
		}
	}
}

// TestDirectSetsTwoSenders: two senders' header and payload (40 bytes apart) in objects of one
// slab at any stride from two cache lines to a page do not share a set of Direct's index (in one
// half page by construction; across two, the regions' hash separates these seeded bases), so two
// Ps mapping them write different lines of it. A hash of the whole key sent both to one set for
// some strides (720 bytes: a 640-byte txreq with 16 bytes of free-list words and a line of pad).
func TestDirectSetsTwoSenders(t *testing.T) {
	var d table
	d.init(directShift, true)
	rng := rand.New(rand.NewPCG(5, 6))
	for stride := uint64(128); stride <= PageSize; stride += 16 {
		for range 64 {
			a := rng.Uint64()>>16&^15 + uint64(rng.IntN(1<<lineShift))&^15
			b := a + stride
			for _, x := range []uint64{a, a + 40} {
				for _, y := range []uint64{b, b + 40} {
					require.NotEqual(t, d.directSet(x), d.directSet(y), "stride %d: %#x and %#x share a set", stride, x, y)
				}
			}
		}
	}
}
