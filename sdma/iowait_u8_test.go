package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStarvedCountIsKernelU8: struct iowait's starved_cnt and priority are u8, and
// iowait_priority_update_top compares (priority << 4) + starved_cnt computed in u8: the starved
// count wraps from 255 to 0, and so does the wake-order key. A waiter queued 256 times without
// sending has starved count 0 in the kernel; a VIP waiter (priority 1) starved 240 times has key
// (16 + 240) & 0xff = 0, below a waiter starved once, which the kernel wakes first. gosdma's
// count and key were ints that grew without bound.
func TestStarvedCountIsKernelU8(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 64})
	e := dev.Engine(0)
	var order []int
	mk := recordWakes(&order)
	starve := func(w *IOWait, n int) {
		for range n {
			require.True(t, must(e.QueueWait(w, 2, false)))
			require.True(t, w.Unqueue())
		}
	}
	w := mk(0)
	starve(w, 255)
	assert.Equal(t, 255, w.Starved())
	starve(w, 1)
	assert.Equal(t, 0, w.Starved(), "starved_cnt is a u8: 255 + 1 wraps to 0")

	vip, other := mk(1), mk(2)
	vip.SetPriority(1)
	starve(vip, 239)
	require.True(t, must(e.QueueWait(vip, 2, false)))   // starved 240, priority 1: key 256 & 0xff = 0
	require.True(t, must(e.QueueWait(other, 2, false))) // starved 1: key 1
	fillRing(t, dev, e, nil)
	_, err := e.Process()
	require.NoError(t, err)
	e.Poll()
	assert.Equal(t, []int{2, 1}, order, "the kernel's u8 key: the waiter starved once (1) before the VIP one ((16+240)&0xff = 0)")
}
