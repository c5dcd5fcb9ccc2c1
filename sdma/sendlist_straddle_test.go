package sdma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSendListStraddlingAHaltKeepsOrder: one SendList whose batches straddle a halt and its
// recovery. The first batch (32 txreqs, SDMA_TAIL_UPDATE_THRESH) is published, the engine
// halts and recovers (the sw clean aborts the batch and resets the ring), and the second batch
// goes into the fresh ring and is sent: txreqs 32..39 reach the wire while 0..31, before them
// on the same list, were aborted. In the kernel one sdma_send_txlist holds tail_lock, which
// sdma_process_event and the sw clean take too, so a list is never split by a clean: all of its
// submitted txreqs are in the ring before the clean (and aborted with it) or all after. A user
// SDMA request (usdma) sent this way reaches the receiver with a hole in the middle: packets
// 0..2 and 16..20 of a message without 3..15 (found by a usdma soak with halts).
//
// The fix: the list is sent in one ring epoch (ring.ReserveIn); once the clean reset the ring,
// the rest of the list is flushed: every txreq completes aborted, SendList takes all 40 and
// says ErrNotRunning, as the kernel's unlock_noconn path would.
func TestSendListStraddlingAHaltKeepsOrder(t *testing.T) {
	dev, sink := engTestDevice(t, Config{Manual: true, RingSize: 128})
	e := dev.Engine(0)
	var c completions
	txs, l := sendListOf40(t, dev, &c)
	halted := false
	e.test = &engineTestHooks{listPublish: func(k int) {
		if !halted {
			halted = true
			require.NoError(t, e.injectHalt(CauseHalt)) // halts and recovers before it returns
		}
	}}
	n, err := e.SendList(nil, l)
	e.test = nil
	require.ErrorIs(t, err, ErrNotRunning)
	require.Equal(t, 40, n)
	require.Zero(t, l.Len())
	sts := sendListDrained(t, e, &c, txs)
	require.True(t, halted)
	aborted := false
	for i, st := range sts {
		if st != StatusOK {
			aborted = true
		} else if aborted {
			t.Fatalf("txreq %d completed OK after an earlier txreq of the same SendList was aborted", i)
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, p := range sink.pkts[0] {
		if p[0] >= 32 {
			t.Fatalf("txreq %d of the list reached the wire after txreqs 0..31 were aborted", p[0])
		}
	}
	for i, st := range sts {
		require.Equal(t, StatusAborted, st, "txreq %d", i)
	}
}

// sendListDrained runs four hardware and completion passes of e and returns the status each of
// txs completed with, requiring that every one completed.
func sendListDrained(t *testing.T, e *Engine, c *completions, txs []TxReq) []Status {
	for range 4 {
		_, _ = e.Process()
		e.Poll()
	}
	sts := make([]Status, len(txs))
	for i := range txs {
		st, ok := c.status(&txs[i])
		require.True(t, ok, "txreq %d never completed", i)
		sts[i] = st
	}
	return sts
}

// sendListOf40 builds 40 one-descriptor txreqs, byte 0 of each packet its index, on a list.
func sendListOf40(t *testing.T, dev *Device, c *completions) ([]TxReq, *TxList) {
	txs := make([]TxReq, 40)
	l := &TxList{}
	for i := range txs {
		buf := make([]byte, 8)
		buf[0] = byte(i)
		engTestBuild(t, dev, &txs[i], 0, buf, c)
		l.PushBack(&txs[i])
	}
	return txs, l
}

// TestSendListStraddlingAStopRestart: Stop and Start (a sw clean without a halt) between two
// batches of one SendList: as for a halt, the first batch completes aborted and the rest is
// flushed, none of it sent into the restarted ring.
func TestSendListStraddlingAStopRestart(t *testing.T) {
	dev, sink := engTestDevice(t, Config{Manual: true, RingSize: 128})
	e := dev.Engine(0)
	var c completions
	txs, l := sendListOf40(t, dev, &c)
	stopped := false
	e.test = &engineTestHooks{listPublish: func(int) {
		if !stopped {
			stopped = true
			require.NoError(t, e.Stop())
			require.NoError(t, e.Start())
		}
	}}
	n, err := e.SendList(nil, l)
	e.test = nil
	require.ErrorIs(t, err, ErrNotRunning)
	require.Equal(t, 40, n)
	for i, st := range sendListDrained(t, e, &c, txs) {
		require.Equal(t, StatusAborted, st, "txreq %d", i)
	}
	require.Zero(t, c.dup.Load())
	sink.mu.Lock()
	defer sink.mu.Unlock()
	require.Empty(t, sink.pkts[0])
}

// TestSendListResetBeforeItsFirstBatch: a halt and its recovery after SendList read the ring's
// epoch but before its first reservation: nothing of the list was in the ring, so the list is
// sent whole into the recovered ring (the epoch is read again), as a kernel list that took
// tail_lock after the clean.
func TestSendListResetBeforeItsFirstBatch(t *testing.T) {
	dev, sink := engTestDevice(t, Config{Manual: true, RingSize: 128})
	e := dev.Engine(0)
	var c completions
	txs, l := sendListOf40(t, dev, &c)
	halted := false
	e.test = &engineTestHooks{admitted: func() {
		if !halted {
			halted = true
			require.NoError(t, e.injectHalt(CauseHalt))
		}
	}}
	n, err := e.SendList(nil, l)
	e.test = nil
	require.NoError(t, err)
	require.Equal(t, 40, n)
	require.True(t, halted)
	requireSentInOrder(t, e, &c, txs, sink)
}
