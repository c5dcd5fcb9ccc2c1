package sdma

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDLIDSelector: hfi1's dlid_to_selector. Each hash of a DLID ((dlid>>8 ^ dlid) & 0xff) gets,
// the first time it is seen, the next number of 0..127, and keeps it; DLIDs with the same hash
// share it; the 129th hash wraps to 0; each device numbers its own; concurrent callers agree.
func TestDLIDSelector(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true})
	assert.EqualValues(t, 0, dev.DLIDSelector(0x1234)) // hash 0x26
	assert.EqualValues(t, 1, dev.DLIDSelector(0x0a51)) // hash 0x5b
	assert.EqualValues(t, 0, dev.DLIDSelector(0x1234), "kept")
	assert.EqualValues(t, 0, dev.DLIDSelector(0x0026), "same hash 0x26")
	seen := map[uint8]uint8{0x26: 0, 0x5b: 1}
	next := uint8(2)
	for h := range 256 {
		if _, ok := seen[uint8(h)]; ok {
			continue
		}
		assert.EqualValues(t, next, dev.DLIDSelector(uint16(h)), "hash %#x", h)
		seen[uint8(h)] = next
		next = (next + 1) & 0x7f
	}
	assert.EqualValues(t, 127, seen[0x7f], "the 128th hash seen (0x26 and 0x5b came first)")
	assert.EqualValues(t, 0, seen[0x80], "the 129th wraps")

	other, _ := engTestDevice(t, Config{Manual: true})
	assert.EqualValues(t, 0, other.DLIDSelector(0x0a51), "a device numbers its own")

	fresh, _ := engTestDevice(t, Config{Manual: true})
	var wg sync.WaitGroup
	got := make([][256]uint8, 4)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 256 {
				h := (i + 64*g) & 0xff
				got[g][h] = fresh.DLIDSelector(uint16(h))
			}
		}()
	}
	wg.Wait()
	count := map[uint8]int{}
	for h := range 256 {
		for g := 1; g < len(got); g++ {
			require.Equal(t, got[0][h], got[g][h], "hash %#x: one selector whoever asked", h)
		}
		count[got[0][h]]++
	}
	for sel := range uint8(128) {
		assert.Equal(t, 2, count[sel], "256 hashes over 128 selectors: each twice")
	}
}

// ExampleDevice_DLIDSelector: destinations get engine selectors in the order they first appear.
func ExampleDevice_DLIDSelector() {
	dev, _ := NewDevice(Config{Manual: true})
	defer dev.Close()
	for _, dlid := range []uint16{0x1234, 0x0a51, 0x1234, 0x0026} {
		fmt.Printf("%#04x -> %d\n", dlid, dev.DLIDSelector(dlid))
	}
	// Output:
	// 0x1234 -> 0
	// 0x0a51 -> 1
	// 0x1234 -> 0
	// 0x0026 -> 0
}
