package sdma

import (
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/sdma/internal/sm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEventInRunningWakesWaiters: every event that leaves the engine in s99_running ends with
// sdma_desc_avail(sde, sdma_descq_freecnt(sde)) (hfi1: sdma_process_event), so a waiter parked
// on dmawait whose need fits the free room is woken by it, even when the event changes nothing
// else (e30_go_running on a running engine: Start).
func TestEventInRunningWakesWaiters(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var woken atomic.Int32
	var w IOWait
	w.Init(nil, func(*IOWait, int) { woken.Add(1) }, nil)
	queued, err := e.QueueWait(&w, 4, false) // parked with room free: no progress check
	require.NoError(t, err)
	require.True(t, queued)
	require.NoError(t, e.event(sm.E30GoRunning, "test")) // Start while running: stays in s99
	require.Equal(t, sm.S99Running, e.state())
	assert.EqualValues(t, 1, woken.Load(), "woken by the event's sdma_desc_avail")
	assert.False(t, e.Waiting(&w))

	// A need above the free room is not woken.
	queued, err = e.QueueWait(&w, 63, false)
	require.NoError(t, err)
	require.True(t, queued)
	_, err = e.ring.Enqueue([]desc.Desc{rawDesc(0, 0, true, true)}, 0) // one slot taken: 62 free
	require.NoError(t, err)
	require.NoError(t, e.event(sm.E30GoRunning, "test"))
	assert.EqualValues(t, 1, woken.Load())
	assert.True(t, e.Waiting(&w))
}
