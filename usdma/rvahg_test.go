package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestAHGStaleEntryAfterHaltInSendWindow: a request's later packets carry USE_AHG update words
// on the header its packet 0 stored (AHG_COPY). If a halt aborts packet 0 before the chip read
// it, and comes between sendPkts' last check of the request's failure and the SendList of a
// later batch (a window the kernel's user_sdma_send_pkts has), that batch went into the
// recovered ring and the chip built its headers from what the entry held before: the previous
// request's header, whose DestQP, DLID and KDETH fields sent the new request's payload to the
// old request's destination. Found by TestRVSoakUsdmaLedger (one run in a few hundred). Here
// the window is made certain: request A (DestQP 1) completes through an AHG entry; request B
// (DestQP 2) takes the same entry, and a halt with its recovery runs just before the SendList
// of B's second batch, after packet 0 was put in the ring and before the chip read it. Every
// packet that reaches the sink must name the request whose payload it carries, and B ends
// ERROR exactly once: the engine refused the batch (sdma.ErrReset, the request sends every
// batch in packet 0's epoch, SendListIn), Submit says so, and the slot is free again.
func TestAHGStaleEntryAfterHaltInSendWindow(t *testing.T) {
	sink, e, pq, run := ahgTestQueue(t)
	tmpl := testTemplate
	tmpl.DestQP = 1
	a := pattern(20*64, 1)
	info, hdr := Message(0, 64, tmpl, a)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, a))
	run()
	require.NoError(t, waitSlot(t, pq, 0), "request A completes, its header in the AHG entry")

	batches := 0
	testHooks(pq).onSend = func(int) {
		if batches++; batches != 2 {
			return
		}
		// Between B's check of its failure and its second SendList: a halt aborts B's first
		// batch (packet 0 with it, never read by the chip), and the engine recovers.
		require.NoError(t, sdmatest.InjectHalt(e, sdma.CauseHalt))
		for range 1000 {
			if e.Running() {
				break
			}
			_, _ = e.Process()
			e.Poll()
			_ = e.Start()
		}
		require.True(t, e.Running(), "the engine recovered: %v", sdmatest.EngineState(e))
	}
	tmpl.DestQP = 2
	b := pattern(20*64, 2)
	info, hdr = Message(1, 64, tmpl, b)
	ends := 0
	testHooks(pq).onEnd = func(slot int, st CompState) {
		ends++
		require.Equal(t, Error, st)
	}
	err := pq.Submit(context.Background(), info, &hdr, b)
	require.ErrorIs(t, err, sdma.ErrReset, "the engine refused B's second batch")
	require.ErrorIs(t, err, ErrFault)
	run()
	var ce *CompError
	require.ErrorAs(t, waitSlot(t, pq, 1), &ce)
	require.EqualValues(t, EFAULT, ce.Errcode)
	require.ErrorIs(t, ce, sdma.ErrReset)
	require.Equal(t, 1, ends, "B ended once")
	require.Equal(t, 2, batches, "no batch after the refused one")
	pkts, _ := sink.packets()
	for i, p := range pkts[20:] { // after A's 20
		var h Header
		copy(h[:], p[:64])
		off := int(h.Offset())
		require.EqualValues(t, 2, h.DestQP(), "packet %d after A's carries B's payload (offset %d) under DestQP %d", i, off, h.DestQP())
	}
}

// TestAHGHaltAfterPacket0WasRead: a halt and its recovery between two batches of an AHG request
// whose first batch had completed (packet 0 read by the chip: the entry holds its header, which
// a sw clean does not erase) do not fail it: the next batches go in the new epoch, as in the
// kernel, and every packet reaches the sink under the request's DestQP, payload in order.
func TestAHGHaltAfterPacket0WasRead(t *testing.T) {
	sink, e, pq, drive := ahgTestQueue(t)
	batches := 0
	var epoch uint64
	testHooks(pq).onSend = func(int) {
		if batches++; batches != 2 {
			return
		}
		drive() // the first batch, packet 0 with it, completes
		epoch = e.Epoch()
		require.NoError(t, e.Stop())
		require.NoError(t, e.Start())
	}
	tmpl := testTemplate
	tmpl.DestQP = 2
	b := pattern(20*64, 2)
	info, hdr := Message(0, 64, tmpl, b)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, b))
	drive()
	require.NoError(t, waitSlot(t, pq, 0))
	require.Greater(t, e.Epoch(), epoch, "the sw clean reset the ring between the batches")
	require.Equal(t, 2, batches)
	pkts, _ := sink.packets()
	require.Len(t, pkts, 20)
	var got []byte
	for i, p := range pkts {
		var h Header
		copy(h[:], p[:64])
		require.EqualValues(t, 2, h.DestQP(), "packet %d", i)
		got = append(got, p[64:]...)
	}
	require.Equal(t, b, got[:len(b)])
	require.EqualValues(t, 19, pq.Stats().AHGPackets)
}

// ahgTestQueue is the AHG tests' queue: two slots on engine 0 of a Manual device whose sink
// records every packet, and run, which drives the engine until it has nothing left to do.
func ahgTestQueue(t *testing.T) (sink *recSink, e *sdma.Engine, pq *PktQ, run func()) {
	sink = &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, RingSize: 256, Sink: sink})
	e = dev.Engine(0)
	pq = testQueue(t, Config{Device: dev, Slots: 2, Engine: e, Timeout: 0})
	run = func() {
		for range 100 {
			_, _ = e.Process()
			e.Poll()
		}
	}
	return sink, e, pq, run
}
