package sdma

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSendListSleeperNilStops: hfi1's sdma_send_txlist, when the ring is full and the sleeper
// returns 0 (verbs' iowait_sleep for a QP that cannot send), takes the nodesc path's
// 'descq_full_count++; goto update_tail' and returns 0 with *count_out = the txreqs taken, the
// rest still at the head of the list. gosdma's SendList does the same. It used to take a sleeper's nil as
// "look again" and, with no room and no completion to make any (a Manual engine, or a ring
// whose packets are stuck), called the sleeper in a busy loop forever.
func TestSendListSleeperNilStops(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var w IOWait
	w.Init(func(*Engine, *IOWait, *TxReq, uint32, bool) error { return nil }, func(*IOWait, int) {}, nil)
	var l TxList
	txs := make([]TxReq, 70)
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, make([]byte, 8), nil)
		l.PushBack(&txs[i])
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() { n, err := e.SendList(&w, &l); done <- result{n, err} }()
	select {
	case r := <-done:
		assert.NoError(t, r.err)
		assert.Equal(t, 63, r.n, "the ring's capacity went in")
		assert.Equal(t, 7, l.Len(), "the rest stays at the head of the list")
	case <-time.After(5 * time.Second):
		t.Fatal("SendList did not return: the sleeper's nil made it look again forever")
	}
}
