package sdma

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWakeOrderModel compares the wake order of a completion pass with a model of the kernel's
// iowait_queue (starved count, head or tail) and sdma_desc_avail (at most 20 waiters, stop at
// the first that does not fit, the top priority<<4 + starved count first in u8 arithmetic, then
// the rest in list order), over random waiters, priorities, starved counts and needs.
func TestWakeOrderModel(t *testing.T) { wakeOrderModel(t, false) }

// TestWakeOrderModelStop is TestWakeOrderModel for a Stop whose sw clean aborts a txreq in the
// ring: sdma_flush_descq's sdma_desc_avail, then sdma_flush's wakeups of the rest in list order.
func TestWakeOrderModelStop(t *testing.T) { wakeOrderModel(t, true) }

func wakeOrderModel(t *testing.T, stop bool) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 300; iter++ {
		dev, err := NewDevice(Config{Manual: true, RingSize: 64})
		require.NoError(t, err)
		e := dev.Engine(0)
		type mw struct {
			id, prio, starved, need int
		}
		var list []*mw
		nw := 1 + rng.Intn(25)
		ws := make([]IOWait, nw)
		var order []int
		for i := range ws {
			id := i
			ws[i].Init(nil, func(*IOWait, int) { order = append(order, id) }, nil)
			m := &mw{id: i, prio: rng.Intn(3), need: 1 + rng.Intn(20)}
			ws[i].SetPriority(m.prio)
			// queued without packets sent and unqueued a few times: a starved count
			for k := rng.Intn(4); k > 0; k-- {
				_, err := e.QueueWait(&ws[i], m.need, false)
				require.NoError(t, err)
				ws[i].Unqueue()
				m.starved++
			}
			pkts := rng.Intn(2) == 0
			_, err := e.QueueWait(&ws[i], m.need, pkts)
			require.NoError(t, err)
			if pkts {
				m.starved = 0
			} else {
				m.starved++
			}
			if m.prio > 0 || !pkts {
				list = append([]*mw{m}, list...)
			} else {
				list = append(list, m)
			}
		}
		// one packet in the ring: a pass (or the sw clean) with progress
		var tx TxReq
		engTestBuild(t, dev, &tx, 0, make([]byte, 8), nil)
		require.NoError(t, e.Send(nil, &tx, false))
		if stop {
			require.NoError(t, e.Stop())
		} else {
			_, err = e.Process()
			require.NoError(t, err)
		}
		avail := 63
		var batch []*mw
		for _, m := range list {
			if len(batch) == 20 || m.need > avail {
				break
			}
			avail -= m.need
			batch = append(batch, m)
		}
		var want []int
		if len(batch) > 0 {
			top := 0
			for i := 1; i < len(batch); i++ {
				if uint8(batch[i].prio<<4+batch[i].starved) > uint8(batch[top].prio<<4+batch[top].starved) {
					top = i
				}
			}
			want = append(want, batch[top].id)
			for i := range batch {
				if i != top {
					want = append(want, batch[i].id)
				}
			}
		}
		if stop {
			in := map[int]bool{}
			for _, id := range want {
				in[id] = true
			}
			for _, m := range list {
				if !in[m.id] {
					want = append(want, m.id)
				}
			}
		}
		require.Equal(t, want, order, "iter %d", iter)
		require.NoError(t, dev.Close())
	}
}
