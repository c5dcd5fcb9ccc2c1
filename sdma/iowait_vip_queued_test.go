package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordWakes returns a maker of waiters (no sleeper) whose wakeup appends their id to *order.
func recordWakes[T any](order *[]T) func(id T) *IOWait {
	return func(id T) *IOWait {
		w := new(IOWait)
		w.Init(nil, func(*IOWait, int) { *order = append(*order, id) }, nil)
		return w
	}
}

// TestVIPPriorityOfQueuedWaiterAtWake: the kernel computes a waiter's priority again when it
// wakes it (sdma_desc_avail: iowait_init_priority, then iowait_get_all_desc, which adds one for
// a VIP first txreq on tx_head and takes that txreq's descriptors as the need). A waiter queued
// with nothing on its TxHead (DeferOrRetry, or QueueWait) on which a ParkOrRetry then parks a VIP
// txreq (queueLocked: already queued, nothing changes) is ranked by the kernel with the bonus,
// and woken before a plain waiter queued ahead of it. The model ranked by the priority taken at
// queueing (IOWait.priority), so the plain one was woken first; it now recomputes at the wake
// (refreshLocked).
func TestVIPPriorityOfQueuedWaiterAtWake(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 64})
	e := dev.Engine(0)
	var order []string
	mk := recordWakes(&order)
	fillRing(t, dev, e, nil)
	plain, vip := mk("plain"), mk("vip")
	var ptx, dtx, vtx TxReq
	engTestBuild(t, dev, &ptx, 0, make([]byte, 8), nil)
	engTestBuild(t, dev, &dtx, 0, make([]byte, 8), nil)
	engTestBuild(t, dev, &vtx, FlagVIP, make([]byte, 8), nil)
	require.ErrorIs(t, e.ParkOrRetry(plain, &ptx, e.HeadSeq(), true), ErrBusy)
	require.ErrorIs(t, e.DeferOrRetry(vip, &dtx, e.HeadSeq(), true), ErrBusy) // queued, TxHead empty
	require.ErrorIs(t, e.ParkOrRetry(vip, &vtx, e.HeadSeq(), true), ErrBusy)  // already queued: TxHead's first is VIP now
	_, err := e.Process()
	require.NoError(t, err)
	e.Poll()
	assert.Equal(t, []string{"vip", "plain"}, order, "the kernel's wake ranks vip (priority 1) first")
}
