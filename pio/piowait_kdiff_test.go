package pio

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// kWait is the model's struct iowait: the fields iowait_queue and sc_piobufavail use.
type kWait struct {
	priority   uint8 // iowait priority, set by iowait_get_priority from the QP's (here SetPriority's)
	starvedCnt uint8
	queued     bool // !list_empty(&priv->s_iowait.list)
}

// kPIOWait is a literal model of the kernel's piowait list: pio_wait's iowait_queue(pkts_sent,
// ...) and sc_piobufavail's batch wake order, sc_disable's flush.
type kPIOWait struct {
	w     []kWait
	prio  []uint8 // what init_priority gives each QP now
	list  []int   // sc->piowait, head first
	batch int     // PIO_WAIT_BATCH_SIZE
}

// pioWait: list_empty(&priv->s_iowait.list) ? iowait_get_priority; iowait_queue : nothing.
func (k *kPIOWait) pioWait(i int, pktsSent bool) {
	w := &k.w[i]
	if w.queued {
		return
	}
	w.priority = k.prio[i] // iowait_get_priority (no VIP txreq here: iowait_update_all_priority adds 0)
	if pktsSent {
		w.starvedCnt = 0
	} else {
		w.starvedCnt++
	}
	if w.priority > 0 || !pktsSent {
		k.list = append([]int{i}, k.list...) // list_add
	} else {
		k.list = append(k.list, i) // list_add_tail
	}
	w.queued = true
}

// updateTop is iowait_priority_update_top, with its u8 counters.
func (k *kPIOWait) updateTop(i, top, idx, topIdx int) int {
	var cnt, tcnt uint8
	cnt = uint8(int(k.w[i].priority)<<4 + int(k.w[i].starvedCnt))
	tcnt = uint8(int(k.w[top].priority)<<4 + int(k.w[top].starvedCnt))
	if cnt > tcnt {
		return idx
	}
	return topIdx
}

// piobufavail is sc_piobufavail: the woken QPs, in the order hfi1_qp_wakeup runs.
func (k *kPIOWait) piobufavail() []int {
	var qps []int
	topIdx := 0
	for len(k.list) > 0 {
		if len(qps) == k.batch {
			break
		}
		i := k.list[0]
		k.w[i].priority = k.prio[i] // iowait_get_priority(wait)
		k.list = k.list[1:]         // list_del_init
		k.w[i].queued = false
		if n := len(qps); n > 0 {
			topIdx = k.updateTop(i, qps[topIdx], n, topIdx)
		}
		qps = append(qps, i)
	}
	var woke []int
	if len(qps) > 0 {
		woke = append(woke, qps[topIdx])
	}
	for j := range qps {
		if j != topIdx {
			woke = append(woke, qps[j])
		}
	}
	return woke
}

// flush is sc_disable's: every QP, in list order.
func (k *kPIOWait) flush() []int {
	woke := k.list
	k.list = nil
	for _, i := range woke {
		k.w[i].queued = false
	}
	return woke
}

// starveClear is iowait_starve_clear(pkts_sent, w), at the end of hfi1_do_send's loop.
func (k *kPIOWait) starveClear(i int, pktsSent bool) {
	if pktsSent {
		k.w[i].starvedCnt = 0
	}
}

// cancel takes i off the list (CancelWait; the kernel's flush of a QP's wait, list_del_init).
func (k *kPIOWait) cancel(i int) bool {
	j := slices.Index(k.list, i)
	if j < 0 {
		return false
	}
	k.list = slices.Delete(k.list, j, j+1)
	k.w[i].queued = false
	return true
}

// listOf is sc's wait list, head first, as Waiter indexes.
func listOf(sc *SendContext, ws []*Waiter) []int {
	sc.waitMu.Lock()
	defer sc.waitMu.Unlock()
	var l []int
	for x := sc.waitHead; x != nil; x = x.next {
		l = append(l, slices.Index(ws, x))
	}
	return l
}

// TestPIOWaitMatchesKernelModel drives a context's wait list and a literal model of the
// kernel's (iowait_queue from pio_wait, sc_piobufavail's batch and top-priority pick,
// sc_disable's flush, hfi1_do_send's iowait_starve_clear) with the same random sequences of
// QueueWait, QueueWaitSent (pkts_sent true or false), StarveClear, SetPriority (priorities
// around the u8 key's wrap: 15, 16, 17, 255, 256, -1), CancelWait, release passes and flushes: after each step the list order, the starved counts
// and the wake order agree.
func TestPIOWaitMatchesKernelModel(t *testing.T) {
	seeds := 400
	if testing.Short() {
		seeds = 100
	}
	prios := []int{0, 0, 0, 0, 1, 2, 3, 15, 16, 17, 255, 256, -1}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x9105a17))
		nw := 2 + rng.IntN(14)
		sc := newManual(t, 64, &captureSink{})
		var woke []int
		ws := make([]*Waiter, nw)
		for i := range ws {
			ws[i] = new(Waiter)
			ws[i].Init(func(w *Waiter) { woke = append(woke, slices.Index(ws, w)) })
		}
		k := &kPIOWait{w: make([]kWait, nw), prio: make([]uint8, nw), batch: WaitBatchSize}
		var trace []string
		for step := range 200 {
			i := rng.IntN(nw)
			var want []int
			woke = woke[:0]
			switch op := rng.IntN(22); {
			case op < 4:
				p := prios[rng.IntN(len(prios))]
				ws[i].SetPriority(p)
				k.prio[i] = uint8(p)
				trace = append(trace, fmt.Sprintf("SetPriority(%d, %d)", i, p))
			case op < 7:
				if !sc.QueueWait(ws[i], sc.ReleaseSeq()) {
					t.Fatalf("seed %d step %d: QueueWait refused", seed, step)
				}
				k.pioWait(i, true)
				trace = append(trace, fmt.Sprintf("QueueWait(%d)", i))
			case op < 13:
				sent := rng.IntN(2) == 0
				if !sc.QueueWaitSent(ws[i], sc.ReleaseSeq(), sent) {
					t.Fatalf("seed %d step %d: QueueWaitSent refused", seed, step)
				}
				k.pioWait(i, sent)
				trace = append(trace, fmt.Sprintf("QueueWaitSent(%d, %v)", i, sent))
			case op < 14:
				got := sc.CancelWait(ws[i])
				if k.cancel(i) != got {
					t.Fatalf("seed %d step %d: CancelWait(%d) %v, model disagrees\n%v", seed, step, i, got, trace)
				}
				trace = append(trace, fmt.Sprintf("CancelWait(%d)", i))
			case op < 19:
				sc.piobufavail(rng.IntN(2) == 0)
				want = k.piobufavail()
				trace = append(trace, "pass")
			case op >= 20:
				sent := rng.IntN(2) == 0
				ws[i].StarveClear(sent)
				k.starveClear(i, sent)
				trace = append(trace, fmt.Sprintf("StarveClear(%d, %v)", i, sent))
			default:
				sc.wakeAll()
				want = k.flush()
				trace = append(trace, "flush")
			}
			if !slices.Equal(woke, want) {
				t.Fatalf("seed %d step %d: woke %v, the kernel %v\n%v", seed, step, woke, want, trace)
			}
			if got := listOf(sc, ws); !slices.Equal(got, k.list) && len(got)+len(k.list) != 0 {
				t.Fatalf("seed %d step %d: list %v, the kernel's %v\n%v", seed, step, got, k.list, trace)
			}
			for j := range ws {
				if got := ws[j].Starved(); got != int(k.w[j].starvedCnt) {
					t.Fatalf("seed %d step %d: waiter %d starved %d, the kernel's %d\n%v", seed, step, j, got, k.w[j].starvedCnt, trace)
				}
				if got := int(ws[j].prio.Load()); got != int(k.prio[j]) {
					t.Fatalf("seed %d step %d: waiter %d priority %d, want %d", seed, step, j, got, k.prio[j])
				}
			}
			if sc.Waiting() != len(k.list) {
				t.Fatalf("seed %d step %d: Waiting %d, the kernel's list %d", seed, step, sc.Waiting(), len(k.list))
			}
		}
	}
}

// TestPIOWaitStarveClearAsKernel: a QP starved twice, then a send pass that sent packets and
// ended without waiting (hfi1_do_send's iowait_starve_clear), starts its next wait from 0 in the
// kernel. A Waiter that says so with StarveClear(true) does too: parked behind another that sent
// nothing (both key 1), it is woken second, in list order. Without the clear its count would be 3
// and it would be woken first.
func TestPIOWaitStarveClearAsKernel(t *testing.T) {
	sc := newManual(t, 64, &captureSink{})
	var woke []string
	var a, c Waiter
	a.Init(func(*Waiter) { woke = append(woke, "a") })
	c.Init(func(*Waiter) { woke = append(woke, "c") })
	for range 2 { // a starves twice: parked with nothing sent, woken by a pass
		if !sc.QueueWaitSent(&a, sc.ReleaseSeq(), false) {
			t.Fatal("QueueWaitSent refused")
		}
		sc.piobufavail(false)
	}
	if a.Starved() != 2 {
		t.Fatalf("a starved %d, want 2", a.Starved())
	}
	a.StarveClear(false) // a pass that sent nothing: left as it is
	if a.Starved() != 2 {
		t.Fatalf("StarveClear(false): a starved %d, want 2", a.Starved())
	}
	a.StarveClear(true) // then a pass that sent packets and needed no wait
	if a.Starved() != 0 {
		t.Fatalf("StarveClear(true): a starved %d, want 0", a.Starved())
	}
	woke = woke[:0]
	sc.QueueWaitSent(&a, sc.ReleaseSeq(), false) // the head: a, key 1
	sc.QueueWaitSent(&c, sc.ReleaseSeq(), false) // the head: c, a; key 1 each
	sc.piobufavail(false)
	if !slices.Equal(woke, []string{"c", "a"}) {
		t.Fatalf("woke %v, the kernel [c a] (a tie keeps list order)", woke)
	}
}
