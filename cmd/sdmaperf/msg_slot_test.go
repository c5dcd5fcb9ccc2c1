package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
	"github.com/gosdma/gosdma/usdma"
)

// TestMsgSlotReusedAfterItsEnd: -mode msg's Done (msgDone) gives the message's slot back to its
// producer, but usdma's Done runs before the request's end is visible: until it returns the slot
// reads QUEUED and a Submit on it is refused ErrSlotInUse. The producer took the slot and
// Submitted at once, so a producer whose Done ran on the engine's goroutine could meet the slot
// not yet released, and the run failed ('producer 0: usdma: request slot 7: entry 7 is in use';
// `sdmaperf -mode msg -size 4096 -mtu 4096 -D 1` failed every run). Here the Done, run by the
// test's Process of a Manual engine, waits until the producer has either returned from its next
// sendMsg (the bug) or found the slot still QUEUED and waits for it (testMsgSlotQueued); then the
// producer's message is sent on the slot.
func TestMsgSlotReusedAfterItsEnd(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}})
	require.NoError(t, err)
	defer func() { _ = dev.Close() }()
	eng := dev.Engine(0)
	p := &producer{
		run:      &sizeRun{cfg: Config{Completion: "interrupt"}, base: time.Now()},
		eng:      eng,
		slots:    make(chan int32, 1),
		bufs:     [][]byte{make([]byte, 4096)},
		msgStart: make([]int64, 1),
	}
	waiting := make(chan struct{})
	var once sync.Once
	h := func() { once.Do(func() { close(waiting) }) }
	testMsgSlotQueued.Store(&h)
	defer testMsgSlotQueued.Store(nil)
	returned := make(chan bool, 1)
	dones := 0
	pq, err := usdma.New(usdma.Config{Device: dev, Engine: eng, Slots: 1, MTU: 4096, Done: func(slot int, e usdma.CompEntry) {
		p.msgDone(slot, e)
		if dones++; dones == 1 {
			select { // the producer took the slot: it returned (refused) or waits for the end
			case ok := <-returned:
				returned <- ok
			case <-waiting:
			}
		}
	}})
	require.NoError(t, err)
	p.pq = pq
	p.msgInfo, p.msgHdr = usdma.Message(0, 4096, msgTemplate, p.bufs[0])
	p.slots <- 0
	ctx := context.Background()
	require.True(t, p.sendMsg(ctx), "first message: %v", p.err)
	go func() { returned <- p.sendMsg(ctx) }() // takes the slot once the first message's Done gives it
	n, err := eng.Process()                    // the first message's packet; its Done runs here
	require.NoError(t, err)
	require.Equal(t, 1, n)
	ok := <-returned
	require.True(t, ok, "the second message on the slot its Done gave back: %v", p.err)
	require.Equal(t, usdma.Queued, pq.Comp(0).Status, "the second message is on the slot")
	n, err = eng.Process()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 2, dones)
	require.Equal(t, usdma.Complete, pq.Comp(0).Status)
	require.NoError(t, pq.Close(ctx))
}
