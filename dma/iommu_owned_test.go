package dma

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/pcpu"
)

// TestIOMMUOwnedBlocksStress: goroutines on every P map buffers of one to three granules from
// their P's magazine (half sole, half public), translate them and check their bytes, keep some
// alive across many others' maps (so that low entries stay taken and fills go to the high ones
// or the page lists), and unmap each once, while another goroutine allocates and frees coherent
// memory (fills at the allocator's cursor, never in an owned block). The index uses few sets, so
// the blocks are few (four per P), runs are skipped for another P's block and blocks change owner often
// (index.go, "Plain fills of a P's own block"). Every translation must return the mapping's own
// bytes, every unmap succeed once, and the table end empty. Run under -race with -cpu=1,2,4.
func TestIOMMUOwnedBlocksStress(t *testing.T) {
	if !pcpu.Enabled {
		t.Skip("purego: no per-P magazines")
	}
	m, err := NewIOMMU(IOMMUConfig{})
	require.NoError(t, err)
	bits := uint(0)
	for uint64(4*len(m.mags)) > uint64(2*nStripes)<<bits>>ownBlockBits {
		bits++
	}
	m.tab.useSets(bits) // four blocks per P, no more
	require.True(t, m.tab.owned, "the blocks are owned")
	dur := 500 * time.Millisecond
	if testing.Short() {
		dur = 100 * time.Millisecond
	}
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	for w := range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			type held struct {
				a   Addr
				h   Sole
				b   []byte
				odd bool
			}
			var keep []held
			for i := 0; time.Now().Before(stop); i++ {
				b := make([]byte, 1+(w*131+i*977)%(3*PageSize-1))
				b[0], b[len(b)-1] = byte(w), byte(i)
				sole := i%2 == 0
				a, h, err := mapTest(m, b, sole)
				if !assert.NoError(t, err) {
					return
				}
				got, err := m.Translate(a, len(b), ToDevice)
				if !assert.NoError(t, err) || !assert.Equal(t, sliceAddr(b), sliceAddr(got)) {
					return
				}
				keep = append(keep, held{a, h, b, sole})
				if len(keep) < 1+i%7 {
					continue // kept alive while others map
				}
				x := keep[0]
				keep = keep[1:]
				got, err = m.Translate(x.a, len(x.b), ToDevice)
				if !assert.NoError(t, err) || !assert.Equal(t, sliceAddr(x.b), sliceAddr(got)) {
					return
				}
				assert.NoError(t, unmapTest(m, x.a, len(x.b), x.h, x.odd))
			}
			for _, x := range keep {
				assert.NoError(t, unmapTest(m, x.a, len(x.b), x.h, x.odd))
			}
		})
	}
	wg.Go(func() {
		for time.Now().Before(stop) {
			co, err := m.AllocCoherent(100)
			if !assert.NoError(t, err) {
				return
			}
			b, err := m.Translate(co.Addr(), 100, ToDevice)
			if assert.NoError(t, err) {
				assert.Equal(t, sliceAddr(co.Bytes()), sliceAddr(b))
			}
			assert.NoError(t, m.FreeCoherent(co))
		}
	})
	wg.Wait()
	require.Zero(t, m.LiveCount())
	requireTableEmpty(t, m)
}
