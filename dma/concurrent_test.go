package dma

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPoolBlocksExclusive: under concurrent Alloc and Free, no block is ever held by two callers
// at once, every block handed out is freed exactly once, and each holder's bytes are its own.
func TestPoolBlocksExclusive(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		p, err := NewPool(m, "x", 48, 16)
		require.NoError(t, err)
		workers, iters := 4, 3000
		if testing.Short() {
			iters = 500
		}
		var (
			mu     sync.Mutex
			held   = map[Addr]int{} // block -> worker holding it
			allocs atomic.Int64
			frees  atomic.Int64
			wg     sync.WaitGroup
		)
		for w := range workers {
			wg.Go(func() {
				var mine []Block
				for i := range iters {
					if len(mine) < 6 || i%3 != 0 {
						b, err := p.Alloc()
						if !assert.NoError(t, err) {
							return
						}
						allocs.Add(1)
						mu.Lock()
						other, dup := held[b.Addr]
						held[b.Addr] = w
						mu.Unlock()
						if !assert.False(t, dup, "block %#x handed to worker %d while worker %d holds it", b.Addr, w, other) {
							return
						}
						for j := range b.Bytes {
							b.Bytes[j] = byte(w)
						}
						mine = append(mine, b)
						continue
					}
					b := mine[0]
					mine = mine[1:]
					dev, err := m.Translate(b.Addr, len(b.Bytes), ToDevice)
					assert.NoError(t, err)
					for _, x := range dev {
						if x != byte(w) {
							assert.Failf(t, "block overwritten", "block %#x of worker %d holds %d", b.Addr, w, x)
							break
						}
					}
					mu.Lock()
					delete(held, b.Addr)
					mu.Unlock()
					assert.NoError(t, p.Free(b))
					frees.Add(1)
				}
				for _, b := range mine {
					mu.Lock()
					delete(held, b.Addr)
					mu.Unlock()
					assert.NoError(t, p.Free(b))
					frees.Add(1)
				}
			})
		}
		wg.Wait()
		require.Equal(t, allocs.Load(), frees.Load())
		require.Empty(t, held)
		require.Zero(t, p.InUse())
		require.NoError(t, p.Destroy())
		require.Zero(t, m.LiveCount())
	})
}

// TestRegionCloseRacesMaps: goroutines map pages of a region while another closes it. Every map
// either succeeds, and then the device reads the right bytes until the unmap, or fails with
// ErrClosed; Close reports ErrBusy or nothing; the memory is released exactly once, after the last
// unmap. Through a Page any map is safe; a slice of the region's bytes may only be mapped while
// the memory is known not to be released (the Region documentation), so in the rounds that map
// slices a keeper mapping pins the region until the workers are done: their MapSingle calls race
// Close and must see ErrClosed once it has run.
func TestRegionCloseRacesMaps(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		rounds := 30
		if testing.Short() {
			rounds = 8
		}
		for round := range rounds {
			const workers, pages = 3, 4
			r, err := AllocPages(pages)
			require.NoError(t, err)
			mem := r.Bytes()
			for i := range mem {
				mem[i] = byte(i / PageSize)
			}
			pgs := make([]Page, pages)
			for i := range pgs {
				pgs[i], err = r.Page(i)
				require.NoError(t, err)
			}
			slices := round%2 == 1
			var keeper Addr
			if slices {
				keeper, err = m.MapSingle(mem[:1], ToDevice)
				require.NoError(t, err)
			}
			base := sliceAddr(mem)
			var (
				wg     sync.WaitGroup
				start  = make(chan struct{})
				mapped atomic.Int64
				closed atomic.Bool // set once Close has returned
			)
			for w := range workers {
				wg.Go(func() {
					<-start
					for i := 0; ; i++ {
						pg := (w + i) % pages
						after := closed.Load()
						var a Addr
						var err error
						single := slices && i%2 == 0
						if single {
							a, err = m.MapSingle(mem[pg*PageSize+8:pg*PageSize+72], ToDevice)
						} else {
							a, err = m.MapPage(pgs[pg], 8, 64, ToDevice) // a Page taken before Close
						}
						if err != nil {
							assert.ErrorIs(t, err, ErrClosed)
							return
						}
						if after {
							assert.Failf(t, "map after Close", "page %d mapped at %#x after Close returned", pg, a)
							return
						}
						mapped.Add(1)
						got, err := m.Translate(a, 64, ToDevice)
						if assert.NoError(t, err) {
							for _, x := range got {
								if x != byte(pg) {
									assert.Failf(t, "wrong bytes", "page %d read %d", pg, x)
									break
								}
							}
						}
						if single {
							assert.NoError(t, m.UnmapSingle(a, 64, ToDevice))
						} else {
							assert.NoError(t, m.UnmapPage(a, 64, ToDevice))
						}
					}
				})
			}
			close(start)
			for mapped.Load() < workers && !t.Failed() { // let the maps get going (progress, not time)
				runtime.Gosched()
			}
			err = r.Close()
			closed.Store(true)
			if slices || err != nil {
				require.ErrorIs(t, err, ErrBusy)
			}
			wg.Wait()
			if slices {
				require.NotNil(t, regionOf(base), "pinned by the keeper")
				require.NoError(t, m.UnmapSingle(keeper, 1, ToDevice))
			}
			require.Zero(t, m.LiveCount())
			require.Nil(t, regionOf(base), "released after the last unmap")
			require.True(t, errors.Is(r.Close(), ErrClosed))
		}
	})
}
