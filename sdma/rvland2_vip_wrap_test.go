package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVIPOnPriority255WrapsToTail: iowait_get_priority's priority++ for a VIP first txreq is on
// the kernel's u8, so a waiter of priority 255 that parks a VIP txreq after it sent packets has
// priority 0: iowait_queue puts it at the tail, behind a plain waiter queued before it, and with
// the same key (0) the wake takes list order. Kept as 256 (prio > 0), it went to the head and woke
// first. 0b732cc's test covers SetPriority's modulo, not this wrap in sleepPark.
func TestVIPOnPriority255WrapsToTail(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 64})
	e := dev.Engine(0)
	var order []string
	mk := recordWakes(&order)
	fillRing(t, dev, e, nil)
	plain, top := mk("plain"), mk("top")
	top.SetPriority(255)
	var ptx, vtx TxReq
	engTestBuild(t, dev, &ptx, 0, make([]byte, 8), nil)
	engTestBuild(t, dev, &vtx, FlagVIP, make([]byte, 8), nil)
	require.ErrorIs(t, e.ParkOrRetry(plain, &ptx, e.HeadSeq(), true), ErrBusy)
	require.ErrorIs(t, e.ParkOrRetry(top, &vtx, e.HeadSeq(), true), ErrBusy)
	_, err := e.Process()
	require.NoError(t, err)
	e.Poll()
	assert.Equal(t, []string{"plain", "top"}, order, "255 + 1 is the kernel's u8 0: queued at the tail, same key, list order")
}
