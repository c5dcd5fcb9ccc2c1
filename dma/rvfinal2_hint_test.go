package dma

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRVF2HintConcurrent: goroutines map a few shared buffers (same address, sizes and
// directions mixed) with MapSingleSoleHint, passing their own last handle, another goroutine's
// last handle, or a random value; each live handle (entry index and generation) is held by one
// mapping only, every mapping translates to its own buffer while live, and every unmap succeeds.
func TestRVF2HintConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name string
		mk   func() SoleMapper
	}{
		{"direct", func() SoleMapper { return NewDirect() }},
		{"counting-direct", func() SoleMapper { return NewCounting(NewDirect()) }},
	} {
		t.Run(tc.name, func(t *testing.T) { rvf2Hint(t, tc.mk()) })
	}
}

func rvf2Hint(t *testing.T, sm SoleMapper) {
	m := sm.(interface {
		SoleMapper
		Mapper
	})
	mem := make([]byte, 4*PageSize)
	bufs := [][]byte{mem[64:320], mem[64:316], mem[PageSize-100 : PageSize+100], mem[2*PageSize : 2*PageSize+64]}
	const G, iters = 4, 4000
	var last [G]atomic.Uint64
	var mu sync.Mutex
	live := map[Sole]int{}
	var wg sync.WaitGroup
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			type held struct {
				a   Addr
				h   Sole
				b   []byte
				dir Direction
			}
			var hs []held
			for i := 0; i < iters; i++ {
				if len(hs) > 0 && (len(hs) > 3 || rng.IntN(2) == 0) {
					k := rng.IntN(len(hs))
					x := hs[k]
					hs[k] = hs[len(hs)-1]
					hs = hs[:len(hs)-1]
					got, err := m.Translate(x.a, len(x.b), ToDevice)
					if err != nil || &got[0] != &x.b[0] {
						t.Errorf("translate of a live mapping: %v", err)
						return
					}
					mu.Lock()
					delete(live, x.h)
					mu.Unlock()
					if err := m.UnmapSingleSole(x.a, len(x.b), x.dir, x.h); err != nil {
						t.Errorf("unmap: %v", err)
						return
					}
					continue
				}
				b := bufs[rng.IntN(len(bufs))]
				dir := ToDevice
				if rng.IntN(4) == 0 {
					dir = Bidirectional
				}
				var hint Sole
				switch rng.IntN(4) {
				case 0:
					hint = Sole(last[g].Load())
				case 1:
					hint = Sole(last[rng.IntN(G)].Load())
				case 2:
					hint = Sole(rng.Uint64())
				}
				a, h, err := m.MapSingleSoleHint(b, dir, hint)
				if err != nil {
					t.Errorf("map: %v", err)
					return
				}
				if h != 0 {
					mu.Lock()
					if o, dup := live[h]; dup {
						t.Errorf("handle %#x live twice (goroutines %d and %d)", h, o, g)
					}
					live[h] = g
					mu.Unlock()
				}
				last[g].Store(uint64(h))
				hs = append(hs, held{a, h, b, dir})
			}
			for _, x := range hs {
				mu.Lock()
				delete(live, x.h)
				mu.Unlock()
				if err := m.UnmapSingleSole(x.a, len(x.b), x.dir, x.h); err != nil {
					t.Errorf("unmap: %v", err)
				}
			}
		}(g)
	}
	wg.Wait()
	if lc, ok := m.(interface{ LiveCount() int }); ok && lc.LiveCount() != 0 {
		t.Errorf("live after all unmaps: %d", lc.LiveCount())
	}
}
