package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVIPPriorityFromFirstParkedTxReq: a sleeper's VIP bonus comes from the first txreq on its
// TxHead after the park (hfi1: iowait_get_priority, iowait_update_priority's list_first_entry of
// tx_head, run after iowait_sleep's list_add_tail), not from the txreq being parked. So a
// DeferOrRetry (defer_packet_queue: the packet queue's iowait has no tx_head entries) never gets
// it, and a ParkOrRetry gets it only when the VIP txreq is, or is behind, a first parked VIP
// one. Observed through the wake order of waiters that sent packets before (pkts_sent: queued at
// the tail unless their priority is above 0, and ranked priority<<4 + starved count).
func TestVIPPriorityFromFirstParkedTxReq(t *testing.T) {
	for _, tc := range []struct {
		name  string
		park  func(e *Engine, w *IOWait, tx *TxReq, seq uint32) error
		front Flags // the flags of the txreq parked on the VIP waiter's TxHead first (with first)
		ahead bool  // the kernel's outcome: the VIP waiter is woken before the plain one
		first bool  // whether a txreq is parked first
	}{
		{"defer/VIP", func(e *Engine, w *IOWait, tx *TxReq, seq uint32) error { return e.DeferOrRetry(w, tx, seq, true) }, 0, false, false},
		{"park/VIP-first", func(e *Engine, w *IOWait, tx *TxReq, seq uint32) error { return e.ParkOrRetry(w, tx, seq, true) }, 0, true, false},
		{"park/VIP-behind-plain", func(e *Engine, w *IOWait, tx *TxReq, seq uint32) error { return e.ParkOrRetry(w, tx, seq, true) }, 0, false, true},
		{"park/VIP-behind-VIP", func(e *Engine, w *IOWait, tx *TxReq, seq uint32) error { return e.ParkOrRetry(w, tx, seq, true) }, FlagVIP, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 64})
			e := dev.Engine(0)
			var order []string
			mk := recordWakes(&order)
			fillRing(t, dev, e, nil)
			plain, vip := mk("plain"), mk("vip")
			var ptx, vtx, front TxReq
			engTestBuild(t, dev, &ptx, 0, make([]byte, 8), nil)
			engTestBuild(t, dev, &vtx, FlagVIP, make([]byte, 8), nil)
			require.ErrorIs(t, e.ParkOrRetry(plain, &ptx, e.HeadSeq(), true), ErrBusy)
			if tc.first {
				engTestBuild(t, dev, &front, tc.front, make([]byte, 8), nil)
				vip.TxHead().PushBack(&front)
			}
			require.ErrorIs(t, tc.park(e, vip, &vtx, e.HeadSeq()), ErrBusy)
			_, err := e.Process()
			require.NoError(t, err)
			e.Poll()
			want := []string{"plain", "vip"}
			if tc.ahead {
				want = []string{"vip", "plain"}
			}
			assert.Equal(t, want, order)
		})
	}
}
