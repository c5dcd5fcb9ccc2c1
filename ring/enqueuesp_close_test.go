package ring

import (
	"testing"

	"github.com/gosdma/gosdma/desc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEnqueueSPMarkedWord: EnqueueSP that finds the reservation word carrying Close's mark while
// the closed flag reads clear (what it sees when it runs between Open's two stores, or between
// Close's flag and its add) refuses with ErrClosed. It used to take the marked index, 2^63 past
// the tail, as its start, pass the room check by unsigned wrap-around and publish a tail 2^63
// ahead of the hardware head (found by running EnqueueSP against a Close/Open loop: the consumer
// saw tail 0x8000000000000042 with hwHead 0x40).
func TestEnqueueSPMarkedWord(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r, err := New(64)
		require.NoError(t, err)
		_, err = r.EnqueueSP([]desc.Desc{mk(1)}, 0)
		require.NoError(t, err)
		r.Close()
		r.closed.Store(false) // Open's first store: the flag clear, the word still closed
		_, err = r.EnqueueSP([]desc.Desc{mk(2)}, 0)
		assert.Same(t, ErrClosed, err)
		r.reserved.Store(r.reserved.Load() - closedMark) // Open's second store
		assert.EqualValues(t, 1, r.Tail(), "nothing published")
		assert.EqualValues(t, 1, r.Reserved())
		at, err := r.EnqueueSP([]desc.Desc{mk(3)}, 0)
		require.NoError(t, err)
		assert.EqualValues(t, 1, at)
		assert.EqualValues(t, 2, r.Tail())
	})
}
