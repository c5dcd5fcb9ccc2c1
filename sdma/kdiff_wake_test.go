package sdma

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// A literal model of the kernel's wait list (hfi1 iowait.h: iowait_queue, iowait_get_priority,
// iowait_get_all_desc; qp.c iowait_sleep's queueing; sdma.c sdma_desc_avail; iowait.c
// iowait_priority_update_top), for TestWakeOrderMatchesKernelModel.

// kWaiter is a struct iowait with its one SE's tx_head, as the model needs it.
type kWaiter struct {
	id      int
	prio    uint8 // priority
	base    uint8 // what init_priority sets
	starved uint8 // starved_cnt
	txHead  []*kSendTx
	vip     []bool // the SDMA_TXREQ_F_VIP of each tx_head entry
	queued  bool
}

type kWaitList struct{ l []*kWaiter }

// iowait_init_priority, then iowait_update_all_priority (iowait_get_priority).
func (w *kWaiter) getPriority() {
	w.prio = w.base
	if len(w.txHead) > 0 && w.vip[0] {
		w.prio++
	}
}

// iowait_get_all_desc: the first tx_head entry's num_desc (and its VIP raises the priority).
func (w *kWaiter) allDesc() uint32 {
	if len(w.txHead) == 0 {
		return 0
	}
	if w.vip[0] {
		w.prio++
	}
	return uint32(w.txHead[0].numDesc)
}

// qp.c iowait_sleep past a failed sdma_progress: the txreq goes on tx_head; the iowait is queued
// unless it is already.
func (k *kWaitList) sleep(w *kWaiter, tx *kSendTx, vip, pktsSent bool) {
	w.txHead = append(w.txHead, tx)
	w.vip = append(w.vip, vip)
	if w.queued {
		return
	}
	w.getPriority()
	// iowait_queue.
	if pktsSent {
		w.starved = 0
	} else {
		w.starved++
	}
	if w.prio > 0 || !pktsSent {
		k.l = append([]*kWaiter{w}, k.l...)
	} else {
		k.l = append(k.l, w)
	}
	w.queued = true
}

// sdma_desc_avail: the ids of the waiters woken, in the order their wakeups run.
func (k *kWaitList) descAvail(avail uint32) []int {
	var waits []*kWaiter
	tidx := 0
	i := 0
	for i < len(k.l) {
		w := k.l[i]
		if len(waits) == 20 { // SDMA_WAIT_BATCH_SIZE
			break
		}
		w.prio = w.base // iowait_init_priority
		need := w.allDesc()
		if need > avail {
			break
		}
		avail -= need
		if len(waits) > 0 {
			// iowait_priority_update_top, in u8.
			cnt := w.prio<<4 + w.starved
			top := waits[tidx]
			if cnt > top.prio<<4+top.starved {
				tidx = len(waits)
			}
		}
		k.l = append(k.l[:i], k.l[i+1:]...)
		w.queued = false
		waits = append(waits, w)
	}
	var ids []int
	if len(waits) > 0 {
		ids = append(ids, waits[tidx].id)
	}
	for j, w := range waits {
		if j != tidx {
			ids = append(ids, w.id)
		}
	}
	return ids
}

// TestWakeOrderMatchesKernelModel parks random waiters with ParkOrRetry (qp.c iowait_sleep: the
// txreq on TxHead, some VIP, some iowaits with a base priority, pkts_sent random, some parked
// twice) and lets completion passes free the ring with a blocker of random size left in it, then
// compares the order the wakeups run in and who stays parked with the model of iowait_queue and
// sdma_desc_avail (the batch of 20, the stop at the first waiter that does not fit, the
// top-priority waiter first by priority<<4 + starved_cnt in u8, the VIP of the first parked txreq
// recomputed at the wake).
func TestWakeOrderMatchesKernelModel(t *testing.T) {
	kdiffRounds(t, 0x77616b65, 150, 40, kdiffWakeRound)
}

func kdiffWakeRound(d *kdiffDev, rng *rand.Rand) error {
	e := d.e
	build := func(ndesc int, flags Flags) *TxReq { return d.build(ndesc, 0, flags, nil) }

	var order []int
	nw := 1 + rng.IntN(40)
	ws := make([]*IOWait, nw)
	kws := make([]*kWaiter, nw)
	for i := range ws {
		id := i
		ws[i] = new(IOWait)
		ws[i].Init(nil, func(*IOWait, int) { order = append(order, id) }, nil)
		kws[i] = &kWaiter{id: id}
		if rng.IntN(4) == 0 {
			p := rng.IntN(3)
			ws[i].SetPriority(p)
			kws[i].base = uint8(p)
		}
	}
	var kl kWaitList
	for step := range 12 {
		// A filler the hardware sends (not completed yet) and a blocker it does not: the next
		// Poll frees the filler's room and wakes with the blocker's still taken.
		filler := build(1+rng.IntN(20), 0)
		if err := e.Send(nil, filler, false); err != nil {
			return err
		}
		if _, err := e.Process(); err != nil {
			return err
		}
		blocker := build(1+rng.IntN(40), 0)
		if err := e.Send(nil, blocker, false); err != nil {
			return err
		}
		for range rng.IntN(2*nw + 5) {
			i := rng.IntN(nw)
			ndesc := 1 + rng.IntN(2) // small, so that a pass may wake more than a batch
			if rng.IntN(2) == 0 {
				ndesc = 1 + rng.IntN(25)
			}
			vip := rng.IntN(5) == 0
			flags := Flags(0)
			if vip {
				flags = FlagVIP
			}
			tx := build(ndesc, flags)
			pkts := rng.IntN(2) == 0
			if err := e.ParkOrRetry(ws[i], tx, e.HeadSeq(), pkts); err != ErrBusy {
				return fmt.Errorf("step %d: ParkOrRetry: %v", step, err)
			}
			kl.sleep(kws[i], &kSendTx{numDesc: uint16(ndesc)}, vip, pkts)
		}
		for pass := range 2 {
			order = order[:0]
			avail := uint32(e.ring.Size() - 1 - blocker.NumDesc())
			if pass == 1 {
				if _, err := e.Process(); err != nil {
					return err
				}
				avail = uint32(e.ring.Size() - 1)
			}
			e.Poll()
			want := kl.descAvail(avail)
			if fmt.Sprint(order) != fmt.Sprint(want) {
				return fmt.Errorf("step %d pass %d (avail %d): woke %v, kernel %v", step, pass, avail, order, want)
			}
			for _, id := range want {
				// The woken owner resends its parked txreqs; here it drops them.
				for ws[id].TxHead().Len() > 0 {
					ws[id].TxHead().PopFront()
				}
				kws[id].txHead, kws[id].vip = nil, nil
			}
		}
		for i := range ws {
			if e.Waiting(ws[i]) != kws[i].queued {
				return fmt.Errorf("step %d: waiter %d parked %v, kernel %v", step, i, e.Waiting(ws[i]), kws[i].queued)
			}
			if ws[i].Starved() != int(kws[i].starved) {
				return fmt.Errorf("step %d: waiter %d starved %d, kernel %d", step, i, ws[i].Starved(), kws[i].starved)
			}
		}
	}
	for _, w := range ws {
		w.Unqueue()
	}
	return nil
}
