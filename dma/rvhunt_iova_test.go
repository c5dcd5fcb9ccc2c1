package dma

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/pcpu"
)

// hvMapping is one mapping a worker of TestIOMMUWrapModel holds.
type hvMapping struct {
	a     Addr
	b     []byte
	h     Sole
	kind  int // 0 MapSingle, 1 MapSingleSole, 2 MapSG (one entry), 3 AllocCoherent
	co    *Coherent
	epoch uint64 // the IOMMU's epoch loaded before the map call
}

// hvGranules returns the first granule and the number of granules of [a, a+n) on m.
func hvGranules(m *IOMMU, a Addr, n int) (uint64, uint64) {
	off := uint64(a) & (1<<m.shift - 1)
	return uint64(a) >> m.shift, (off+uint64(n)-1)>>m.shift + 1
}

// TestIOMMUWrapModel: a model of the IOVA space (which worker holds each granule, and the epoch
// in which each granule was last handed out) checks the IOMMU's allocator promises while workers
// map (MapSingle, MapSingleSole, MapSG, AllocCoherent; one to eight granules, so both the per-P
// magazines and the cursor), translate (sole mappings also with their handle), hold and unmap
// (one by one and in batches), another goroutine changes GOMAXPROCS (Ps come and go, magazines
// are left behind and taken up again) and the space (shrunk, with the magazines of a large one)
// wraps many times: no granule is held by two live mappings, a granule is handed out again only
// after a wrap that followed its last hand-out, every translation returns the mapping's own
// bytes, and the table ends empty.
func TestIOMMUWrapModel(t *testing.T) {
	if !pcpu.Enabled {
		t.Skip("purego: no per-P magazines")
	}
	for _, tiny := range []bool{false, true} {
		t.Run(fmt.Sprintf("tinyindex=%v", tiny), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
			m, err := NewIOMMU(IOMMUConfig{IOVABits: 32}) // 2^20 granules: magazines
			require.NoError(t, err)
			require.NotNil(t, m.mags)
			const space = 1 << 12
			m.spacePages = space // wraps often; the magazines stay
			if tiny {
				bits := uint(0)
				for uint64(4*len(m.mags)) > uint64(2*nStripes)<<bits>>ownBlockBits {
					bits++
				}
				m.tab.useSets(bits)
			}
			hvRun(t, m, space)
		})
	}
}

func hvRun(t *testing.T, m *IOMMU, space int) {
	owner := make([]atomic.Int32, space) // worker+1 holding the granule, 0: free
	// handedIn: the epoch loaded before the map call that last handed the granule out, -1: never.
	// The cursor must have wrapped since (epoch moved past it) before the granule, once freed, is
	// handed out again.
	handedIn := make([]atomic.Int64, space)
	for i := range handedIn {
		handedIn[i].Store(-1)
	}
	ops := 20000
	if testing.Short() {
		ops = 4000
	}
	workers := 4
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var procsDone sync.WaitGroup
	procsDone.Add(1)
	go func() {
		defer procsDone.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			runtime.GOMAXPROCS(1 + r.IntN(len(m.mags)+2)) // sometimes above the magazines
			runtime.Gosched()
		}
	}()
	var failed atomic.Bool
	fail := func(format string, args ...any) {
		if failed.CompareAndSwap(false, true) {
			t.Errorf(format, args...)
		}
	}
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			backing := make([]byte, 10*PageSize)
			var held []hvMapping
			take := func(x hvMapping) {
				g, n := hvGranules(m, x.a, len(x.b))
				for k := range n {
					i := g + k
					if i == 0 || i >= uint64(space) {
						fail("worker %d: %v granule %d outside [1,%d)", w, x.a, i, space)
						return
					}
					if prev := owner[i].Swap(int32(w + 1)); prev != 0 {
						fail("worker %d: granule %d of [%#x,+%d) handed out while worker %d holds it",
							w, i, x.a, len(x.b), prev-1)
					}
					if f := handedIn[i].Load(); f >= 0 && uint64(f) >= m.epoch.Load() {
						fail("worker %d: granule %d handed out in epoch %d, freed, and handed out again with no wrap since (epoch %d)",
							w, i, f, m.epoch.Load())
					}
					handedIn[i].Store(int64(x.epoch))
				}
			}
			check := func(x hvMapping, what string) {
				got, err := m.Translate(x.a, len(x.b), ToDevice)
				if err != nil || sliceAddr(got) != sliceAddr(x.b) || len(got) != len(x.b) {
					fail("worker %d: %s: Translate(%#x,+%d) = %#x len %d, %v; want %#x", w, what, x.a, len(x.b),
						sliceAddr(got), len(got), err, sliceAddr(x.b))
				}
				if x.h == 0 {
					return
				}
				got, err = m.TranslateSole(x.a, len(x.b), ToDevice, x.h)
				if err != nil || sliceAddr(got) != sliceAddr(x.b) || len(got) != len(x.b) {
					fail("worker %d: %s: TranslateSole(%#x,+%d) = %#x len %d, %v; want %#x", w, what, x.a, len(x.b),
						sliceAddr(got), len(got), err, sliceAddr(x.b))
				}
			}
			release := func(x hvMapping) {
				g, n := hvGranules(m, x.a, len(x.b))
				for k := range n {
					owner[g+k].Store(0)
				}
			}
			unmapOne := func(x hvMapping) {
				check(x, "before unmap")
				release(x)
				var err error
				switch x.kind {
				case 0:
					err = m.UnmapSingle(x.a, len(x.b), ToDevice)
				case 1:
					err = m.UnmapSingleSole(x.a, len(x.b), ToDevice, x.h)
				case 2:
					err = m.UnmapSG([]SG{{Buf: x.b, Addr: x.a, Len: len(x.b)}}, ToDevice)
				case 3:
					err = m.FreeCoherent(x.co)
				}
				if err != nil {
					fail("worker %d: unmap kind %d [%#x,+%d): %v", w, x.kind, x.a, len(x.b), err)
				}
			}
			for range ops {
				if failed.Load() {
					break
				}
				if len(held) > 0 && (len(held) > 12 || r.IntN(3) == 0) {
					if r.IntN(4) == 0 && len(held) > 3 { // a batch of the oldest few
						k := 1 + r.IntN(len(held)-1)
						var us []Unmap
						var rest []hvMapping
						for _, x := range held[:k] {
							if x.kind == 3 {
								rest = append(rest, x)
								continue
							}
							check(x, "before batch")
							release(x)
							kind := KindSingle
							if x.kind == 2 {
								kind = KindSG
							}
							us = append(us, Unmap{Addr: x.a, Size: len(x.b), Dir: ToDevice, Kind: kind, Sole: x.h})
						}
						if err := m.UnmapBatch(us); err != nil {
							fail("worker %d: UnmapBatch: %v", w, err)
						}
						held = append(rest, held[k:]...)
						continue
					}
					i := r.IntN(len(held))
					unmapOne(held[i])
					held[i] = held[len(held)-1]
					held = held[:len(held)-1]
					continue
				}
				x := hvMapping{kind: r.IntN(4)}
				x.epoch = m.epoch.Load()
				var err error
				switch x.kind {
				case 3:
					x.co, err = m.AllocCoherent(1 + r.IntN(3*PageSize))
					if err == nil {
						x.a, x.b = x.co.Addr(), x.co.Bytes()
					}
				default:
					off := r.IntN(PageSize)
					n := 1 + r.IntN(1+r.IntN(8*PageSize-1))
					x.b = backing[off : off+n]
					switch x.kind {
					case 0:
						x.a, err = m.MapSingle(x.b, ToDevice)
					case 1:
						x.a, x.h, err = m.MapSingleSole(x.b, ToDevice)
					case 2:
						sg := []SG{{Buf: x.b}}
						_, err = m.MapSG(sg, ToDevice)
						x.a = sg[0].Addr
					}
				}
				if err != nil {
					fail("worker %d: map kind %d of %d bytes: %v", w, x.kind, len(x.b), err)
					break
				}
				take(x)
				check(x, "after map")
				held = append(held, x)
			}
			for _, x := range held {
				unmapOne(x)
			}
		})
	}
	wg.Wait()
	close(stop)
	procsDone.Wait()
	t.Logf("epoch %d after the run", m.epoch.Load())
	require.Zero(t, m.LiveCount())
	requireTableEmpty(t, m)
}
