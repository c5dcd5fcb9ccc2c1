package sdma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlushWakesInListOrder: the sw clean's wakeups (hfi1: sdma_flush's loop over dmawait) call
// every parked waiter's wakeup in wait-list order, with no top-priority pick: that pick belongs
// to sdma_desc_avail only. Two waiters: B at the head of the list with the lower rank (priority 0,
// starved 1), A behind it with the higher (priority 1). The kernel wakes B, then A.
func TestFlushWakesInListOrder(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var order []string
	var a, b IOWait
	a.Init(nil, func(*IOWait, int) { order = append(order, "A") }, nil)
	b.Init(nil, func(*IOWait, int) { order = append(order, "B") }, nil)
	a.SetPriority(1)
	ok, err := e.QueueWait(&a, 1, true) // priority 1: at the head
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = e.QueueWait(&b, 1, false) // no packets sent: at the head, before A
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, a.rank(), b.rank(), "A ranks above B")

	require.NoError(t, e.Stop()) // the sw clean wakes every waiter
	require.Equal(t, []string{"B", "A"}, order, "sdma_flush wakes the wait list in its order")
	require.NoError(t, e.Start())
}

// TestSwCleanWakesFittingTopFirst: a sw clean that aborts txreqs left in the ring frees room, and
// sdma_flush_descq then calls sdma_desc_avail, which wakes the waiters that fit with the
// top-ranked one first; only what is left after that is woken in list order by sdma_flush's loop.
// The waiters as in TestFlushWakesInListOrder (B at the head, A ranked higher), a txreq in the
// ring: A, then B.
func TestSwCleanWakesFittingTopFirst(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 8), &c)
	require.NoError(t, e.Send(nil, &tx, false)) // not processed: the sw clean aborts it
	var order []string
	var a, b IOWait
	a.Init(nil, func(*IOWait, int) { order = append(order, "A") }, nil)
	b.Init(nil, func(*IOWait, int) { order = append(order, "B") }, nil)
	a.SetPriority(1)
	_, err := e.QueueWait(&a, 1, true)
	require.NoError(t, err)
	_, err = e.QueueWait(&b, 1, false)
	require.NoError(t, err)

	require.NoError(t, e.Stop())
	st, ok := c.status(&tx)
	require.True(t, ok)
	require.Equal(t, StatusAborted, st)
	require.Equal(t, []string{"A", "B"}, order, "sdma_desc_avail after the aborted ring: top-ranked first")
	require.EqualValues(t, 2, e.Stats().Wakeups)
	require.NoError(t, e.Start())
}
