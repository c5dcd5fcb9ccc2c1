package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIOWaitUnqueue: Unqueue takes a parked iowait off its engine's wait list (hfi1:
// flush_pq_iowait), whichever engine that is, and reports false for nil, an iowait parked
// nowhere, and one already woken; an unqueued iowait is not woken, and can be queued again, on
// another engine too.
func TestIOWaitUnqueue(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Engines: 2, RingSize: 64})
	e0, e1 := dev.Engine(0), dev.Engine(1)
	woken := 0
	var w, other IOWait
	w.Init(nil, func(*IOWait, int) { woken++ }, nil)
	other.Init(nil, func(*IOWait, int) {}, nil)

	var nilW *IOWait
	assert.False(t, nilW.Unqueue())
	assert.False(t, w.Unqueue(), "parked nowhere")

	require.True(t, must(e1.QueueWait(&other, 1, true)))
	require.True(t, must(e1.QueueWait(&w, 1, true)))
	require.True(t, e1.Waiting(&w))
	assert.True(t, w.Unqueue())
	assert.False(t, e1.Waiting(&w))
	assert.True(t, e1.Waiting(&other), "the other waiter stays")
	assert.False(t, w.Unqueue(), "already off")

	// Woken (an event in s99 wakes the waiters that fit): off the list already, Unqueue says so.
	require.True(t, must(e0.QueueWait(&w, 1, false)))
	require.NoError(t, e0.Start()) // e30 on a running engine: sdma_desc_avail's wake
	assert.Equal(t, 1, woken)
	assert.False(t, e0.Waiting(&w))
	assert.False(t, w.Unqueue(), "already woken")
	woken = 0

	// Queued anew elsewhere, then woken by that engine's Close-time wake: not by e1's.
	require.True(t, must(e0.QueueWait(&w, 1, false)))
	assert.True(t, e0.Waiting(&w))
	assert.True(t, w.Unqueue())
	assert.False(t, e0.Waiting(&w))
	require.NoError(t, dev.Close())
	assert.Zero(t, woken, "an unqueued iowait is not woken for the wait it gave up")
	assert.False(t, e1.Waiting(&other), "Close woke the rest")
}
