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

// spinSink is what TestSoleRevokeRace's delays add to.
var spinSink atomic.Int64

// TestSoleRevokeRace: a public unmap of a sole mapping races its owner's unmap and a reader's
// Translate, round after round, on heap buffers of one page (the owner's plain-store free), of
// two pages and of Region memory (the owner's CAS path, and the revoke's unpin). In every round:
// the public unmap is nil or ErrNotMapped, the owner's nil or ErrNotMapped, and the owner's is
// ErrNotMapped only if the public one succeeded (it revoked the mapping first); the reader never
// translates the mapping once either unmap has returned successfully before its call began, and
// what it reads is the mapped bytes; afterwards the entry is free with the mapping's generation
// (freed exactly once, by the owner, and filled by nobody), Translate faults, the table is empty
// and the Region's pins are back to none (its Close releases it: no pin leaked or dropped twice).
func TestSoleRevokeRace(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		sm := m.(SoleMapper)
		rounds := 600
		if testing.Short() {
			rounds = 200
		}
		heap := make([]byte, 3*PageSize)
		var outcomes [3]int // revoked first, owner first, both succeeded (the revoke overwritten)
		for r := range rounds {
			var reg *Region
			var buf []byte
			switch r % 3 {
			case 0:
				buf = heap[64 : 64+200]
			case 1:
				buf = heap[PageSize-100 : 2*PageSize+100]
			default:
				var err error
				reg, err = AllocPages(1)
				require.NoError(t, err)
				buf = reg.Bytes()[128 : 128+200]
			}
			want := pattern(len(buf), byte(r))
			copy(buf, want)
			a, h, err := sm.MapSingleSole(buf, ToDevice)
			require.NoError(t, err)
			if h == 0 { // an IOMMU magazine refill: a public mapping
				require.NoError(t, m.UnmapSingle(a, len(buf), ToDevice))
				if reg != nil {
					require.NoError(t, reg.Close())
				}
				continue
			}
			var (
				start          atomic.Bool
				pubOK, ownOK   atomic.Bool // an unmap returned nil
				pubErr, ownErr error
				wg             sync.WaitGroup
			)
			// Each side waits for the start, then spins a while that varies by round, so that
			// either may come first, or both at once.
			wait := func(spin int) {
				for !start.Load() {
					runtime.Gosched()
				}
				for i := 0; i < spin; i++ {
					spinSink.Add(1)
				}
			}
			wg.Add(3)
			pub := func() {
				defer wg.Done()
				wait(r * 37 % 397)
				pubErr = m.UnmapSingle(a, len(buf), ToDevice)
				pubOK.Store(pubErr == nil)
			}
			own := func() {
				defer wg.Done()
				wait(r * 53 % 389)
				ownErr = sm.UnmapSingleSole(a, len(buf), ToDevice, h)
				ownOK.Store(ownErr == nil)
			}
			if r%2 == 0 {
				go pub()
				go own()
			} else {
				go own()
				go pub()
			}
			go func() {
				defer wg.Done()
				wait(0)
				for i := 0; ; i++ {
					gone := pubOK.Load() || ownOK.Load()
					b, err := m.Translate(a, len(buf), ToDevice)
					if err == nil {
						if !assert.False(t, gone, "round %d: translated after an unmap returned", r) ||
							!assert.Equal(t, want, b, "round %d: not the mapped bytes", r) {
							return
						}
					} else if !assert.ErrorIs(t, err, ErrFault) {
						return
					}
					if err != nil && i > 0 {
						return // unmapped (revoked or freed): stays so for the rest of the round
					}
					if r%4 != 3 {
						// Let the unmaps run: at -cpu 1 a reader that never yields holds the
						// P until the scheduler preempts it (a 10 ms slice per round, most of
						// the test's time). One round in four it does not yield, so that the
						// preemption lands inside a Translate, with the unmaps in between.
						runtime.Gosched()
					}
				}
			}()
			start.Store(true)
			wg.Wait()
			if t.Failed() {
				return
			}
			require.True(t, pubErr == nil || errors.Is(pubErr, ErrNotMapped), "round %d: public %v", r, pubErr)
			require.True(t, ownErr == nil || errors.Is(ownErr, ErrNotMapped), "round %d: owner %v", r, ownErr)
			switch {
			case ownErr != nil:
				require.NoError(t, pubErr, "round %d: the owner's unmap failed but nobody revoked", r)
				outcomes[0]++
			case pubErr != nil:
				outcomes[1]++
			default:
				outcomes[2]++
			}
			e := &tableOf(t, m).ents[uint64(h&(1<<soleBits-1))-1]
			meta := e.meta.Load()
			require.Equal(t, uint64(metaFree), meta&metaState, "round %d: the entry is not free", r)
			require.Equal(t, uint64(h>>soleBits), meta>>metaGenShift, "round %d: the entry was filled or freed again", r)
			_, err = m.Translate(a, len(buf), ToDevice)
			requireFault(t, err, a, ReasonNotMapped)
			require.ErrorIs(t, sm.UnmapSingleSole(a, len(buf), ToDevice, h), ErrNotMapped)
			require.ErrorIs(t, m.UnmapSingle(a, len(buf), ToDevice), ErrNotMapped)
			require.Zero(t, m.LiveCount())
			require.Empty(t, m.Live())
			if reg != nil {
				require.NoError(t, reg.Close(), "round %d: the region's pins", r)
			}
		}
		requireTableEmpty(t, m)
		t.Logf("revoked first %d, owner first %d, both succeeded %d", outcomes[0], outcomes[1], outcomes[2])
	})
}
