//go:build linux && !race

package udpsink

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The race detector makes sync.Pool (x/net's message buffers) drop items: allocation counts
// are only meaningful without it.

// TestQueueFlushDoesNotAllocate: the batched path's steady state allocates nothing, GSO or not.
func TestQueueFlushDoesNotAllocate(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(fmt.Sprintf("gso=%v", gso), func(t *testing.T) {
			p := newPlainPeer(t) // never read: loopback drops what does not fit
			s, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: 32, GSO: gso})
			require.NoError(t, err)
			defer s.Close()
			segs := packet(0, 0, 1024, 2)
			errs := make([]error, 32)
			run := func() {
				for range 32 {
					if err := s.Queue(0, segs); err != nil {
						t.Fatal(err)
					}
				}
				s.Flush(0, errs)
			}
			run() // warm up: the GSO control messages, x/net's pools
			assert.Zero(t, testing.AllocsPerRun(100, run))
			assert.Equal(t, gso, s.Stats().GSOMsgs > 0)
		})
	}
}
