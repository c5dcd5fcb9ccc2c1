package dma

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIndexKeepsHeapBuffersAlive: a mapping of Go heap memory keeps it reachable while mapped,
// with the mapper's index entry (or record) as the only reference, while the garbage collector
// runs and the freed memory is reused: the owner's stores of an entry's pointer (store_amd64.go)
// are plain stores, and the pointer must stay one the collector sees. The buffers are allocated,
// filled, mapped and dropped by the caller; a second goroutine keeps collecting and allocating
// (filling freed memory with other bytes); every mapping must still translate to its own bytes.
// (Go pointer assignments carry the write barrier by construction; a missing one would show here
// only by chance, so this checks reachability, not the barrier.)
func TestIndexKeepsHeapBuffersAlive(t *testing.T) {
	impls(t, func(t *testing.T, m testMapper) {
		type mapped struct {
			addr Addr
			size int
			fill byte
		}
		n := 2000
		if testing.Short() {
			n = 500
		}
		var (
			stop  atomic.Bool
			wg    sync.WaitGroup
			churn atomic.Pointer[[]byte] // keeps the churn's allocations from being optimised away
		)
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				b := make([]byte, 64+i%4000)
				for j := range b {
					b[j] = 0xEE
				}
				churn.Store(&b)
				if i%64 == 0 {
					runtime.GC()
				}
			}
		})
		live := make([]mapped, 0, n)
		for i := range n {
			size := 16 + i%(2*PageSize) // small (the entry keeps the pointer when free) and large
			b := make([]byte, size)
			fill := byte(i%250 + 1)
			for j := range b {
				b[j] = fill
			}
			a, err := m.MapSingle(b, ToDevice)
			require.NoError(t, err)
			live = append(live, mapped{a, size, fill})
			if i%100 == 0 {
				runtime.GC()
			}
		}
		runtime.GC()
		runtime.GC()
		stop.Store(true)
		wg.Wait()
		for _, x := range live {
			got, err := m.Translate(x.addr, x.size, ToDevice)
			require.NoError(t, err)
			for j, c := range got {
				if c != x.fill {
					t.Fatalf("mapping at %#x: byte %d is %#x, want %#x (the buffer was collected while mapped)", uint64(x.addr), j, c, x.fill)
				}
			}
		}
		for _, x := range live {
			require.NoError(t, m.UnmapSingle(x.addr, x.size, ToDevice))
		}
		requireTableEmpty(t, m)
	})
}
