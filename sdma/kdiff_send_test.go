package sdma

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
)

// A literal model of the kernel's submission side (hfi1 sdma.c: sdma_send_txreq,
// sdma_send_txlist, sdma_check_progress, submit_tx's bookkeeping, sdma_make_progress,
// sdma_flush, the sw clean's reset), on the descq_cnt/desc_avail arithmetic of the kernel (u16
// and u32, as there), for TestSendMatchesKernelModel.

// kSendTx is a txreq as the submission side sees it.
type kSendTx struct {
	id      int
	numDesc uint16
	tlen    uint16
	nextIdx uint16 // next_descq_idx
}

// kSleep is the answer of the model's sleep callback (and of the library's): the kernel's
// -EBUSY (user_sdma's defer_packet_queue when no progress), -EIOCBQUEUED (sdma_send_txreq's
// documented "tx queued to iowait") or 0 (verbs' iowait_sleep dropping the txreq of a QP that
// cannot send).
type kSleep int

const (
	kNoWait      kSleep = iota // wait == NULL
	kNoSleeper                 // an iowait without a sleep callback
	kSleepBusy                 // sleep returns -EBUSY
	kSleepDrop                 // sleep returns 0
	kSleepQueued               // sleep returns -EIOCBQUEUED
)

const kEIOCBQUEUED = -529

// kEngine is the engine's submission and completion state.
type kEngine struct {
	cnt        uint16 // descq_cnt
	mask       uint16 // sdma_mask
	tail, head uint32 // descq_tail, descq_head
	descAvail  uint16 // desc_avail
	running    bool   // __sdma_running
	txRing     map[uint16]*kSendTx
	txTail     uint16
	txHead     uint16
	flushlist  []*kSendTx
	fullCount  int // descq_full_count
	busy       int // the iowait's sdma_busy
	sleeps     []string
	done       map[int]Status // every completion, by txreq id
	hwHead     uint32         // how far the model's hardware has gone (free-running, as tail)
}

func newKEngine(cnt uint16) *kEngine {
	k := &kEngine{cnt: cnt, mask: cnt - 1, running: true, txRing: map[uint16]*kSendTx{}, done: map[int]Status{}}
	k.descAvail = k.freecnt()
	return k
}

// sdma_descq_freecnt.
func (k *kEngine) freecnt() uint16 { return k.cnt - uint16(k.tail-k.head) - 1 }

// submit_tx's bookkeeping (the descriptor words are TestTxBuildMatchesKernelModel's).
func (k *kEngine) submit(tx *kSendTx) {
	k.tail += uint32(tx.numDesc)
	tx.nextIdx = uint16(k.tail) & k.mask
	k.txRing[k.txTail&k.mask] = tx
	k.txTail++
	k.descAvail -= tx.numDesc
}

// sdma_check_progress: the sleeper is called with the iowait's answer mode.
func (k *kEngine) checkProgress(mode kSleep, tx *kSendTx, pktsSent bool) int {
	k.descAvail = k.freecnt()
	if tx.numDesc <= k.descAvail {
		return -11 // -EAGAIN
	}
	switch mode {
	case kSleepBusy:
		k.sleeps = append(k.sleeps, fmt.Sprintf("tx%d/%v", tx.id, pktsSent))
		return -16 // -EBUSY
	case kSleepDrop:
		k.sleeps = append(k.sleeps, fmt.Sprintf("tx%d/%v", tx.id, pktsSent))
		return 0
	case kSleepQueued:
		k.sleeps = append(k.sleeps, fmt.Sprintf("tx%d/%v", tx.id, pktsSent))
		return kEIOCBQUEUED
	}
	return -16
}

// sdma_send_txreq.
func (k *kEngine) sendTxreq(mode kSleep, tx *kSendTx, pktsSent bool) int {
	if tx.tlen != 0 {
		return kEINVAL
	}
	wait := mode != kNoWait
	for {
		if !k.running {
			if wait {
				k.busy++
			}
			tx.nextIdx = 0
			k.flushlist = append(k.flushlist, tx)
			return -70 // -ECOMM
		}
		if tx.numDesc > k.descAvail {
			ret := k.checkProgress(mode, tx, pktsSent)
			if ret == -11 {
				continue
			}
			k.fullCount++
			return ret
		}
		k.submit(tx)
		if wait {
			k.busy++
		}
		return 0
	}
}

// sdma_send_txlist: the return and count_out; list keeps what was not taken.
func (k *kEngine) sendTxlist(mode kSleep, list *[]*kSendTx) (int, int) {
	ret, submitted, flushed := 0, 0, 0
	wait := mode != kNoWait
loop:
	for len(*list) > 0 {
		tx := (*list)[0]
		if !k.running {
			for _, tx := range *list {
				tx.nextIdx = 0
				k.flushlist = append(k.flushlist, tx)
				flushed++
			}
			*list = nil
			ret = -70
			break
		}
		if tx.numDesc > k.descAvail {
			ret = k.checkProgress(mode, tx, submitted > 0)
			if ret == -11 {
				ret = 0
				continue
			}
			k.fullCount++
			break loop
		}
		if tx.tlen != 0 {
			ret = kEINVAL
			break
		}
		*list = (*list)[1:]
		k.submit(tx)
		submitted++
	}
	if wait {
		k.busy += submitted + flushed
	}
	return ret, submitted + flushed
}

// complete_tx.
func (k *kEngine) complete(tx *kSendTx, st Status) {
	if _, dup := k.done[tx.id]; dup {
		panic(fmt.Sprintf("model completed tx%d twice", tx.id))
	}
	k.done[tx.id] = st
}

// sdma_make_progress up to the model's hardware head (free-running).
func (k *kEngine) makeProgress() { k.walk(k.hwHead, StatusOK) }

// walk moves descq_head to to, completing with st every txreq whose descriptors it passes: the
// loop of sdma_make_progress (StatusOK) and of sdma_flush_descq (StatusAborted).
func (k *kEngine) walk(to uint32, st Status) {
	for k.head != to {
		k.head++
		sw := uint16(k.head) & k.mask
		if tx := k.txRing[k.txHead&k.mask]; tx != nil && tx.nextIdx == sw {
			delete(k.txRing, k.txHead&k.mask)
			k.txHead++
			k.complete(tx, st)
		}
	}
}

// sdma_flush: the ring from head to tail (sdma_flush_descq), then the flush list, aborted.
func (k *kEngine) flush() {
	k.walk(k.tail, StatusAborted)
	for _, tx := range k.flushlist {
		k.complete(tx, StatusAborted)
	}
	k.flushlist = nil
}

// stop is e00 in s99: s00, then the sw clean (sdma_make_progress, sdma_flush, the reset).
func (k *kEngine) stop() {
	k.running = false
	k.makeProgress()
	k.flush()
	k.tail, k.head, k.hwHead = 0, 0, 0
	k.descAvail = k.freecnt()
}

// start is e30 from s00 up to s99: entering s99 flushes (sdma_set_state).
func (k *kEngine) start() {
	k.running = true
	k.flush()
}

// drain is the hardware sending everything published, then a completion pass; and, while the
// engine is not running, the flush worker.
func (k *kEngine) drain() {
	if k.running {
		k.hwHead = k.tail
		k.makeProgress()
		return
	}
	k.flush()
}

// kdiffErrnoSend is kdiffErrno for the submission side's answers.
func kdiffErrnoSend(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotRunning):
		return -70
	case errors.Is(err, ErrBusy):
		return -16
	case errors.Is(err, ErrQueued):
		return kEIOCBQUEUED
	case errors.Is(err, ErrInvalid):
		return kEINVAL
	}
	return 1
}

// kdiffRecorder records completions by txreq id.
type kdiffRecorder struct {
	ids  map[*TxReq]int
	done map[int]Status
	dup  []int
}

func (r *kdiffRecorder) Complete(tx *TxReq, st Status) {
	id := r.ids[tx]
	if _, ok := r.done[id]; ok {
		r.dup = append(r.dup, id)
	}
	r.done[id] = st
}

// TestSendMatchesKernelModel drives a Manual engine (completion by Poll) and the model of the
// kernel's submission side with the same random operations: Send and SendList of txreqs of 1 to
// 12 descriptors (some unfinished, for Send) on a 64-descriptor ring, with no iowait, an iowait
// without a sleeper, or a sleeper answering -EBUSY, -EIOCBQUEUED or 0; the hardware draining
// the ring; Stop and Start. After each it compares the return (as an errno), SendList's count and
// what it left on the list, the sleeper's calls (txreq and pkts_sent), the iowait's busy count,
// descq_full_count, the free count; and every completion's status.
func TestSendMatchesKernelModel(t *testing.T) {
	kdiffRounds(t, 0x73656e64, 60, 15, kdiffSendRound)
}

// kdiffDev is a round's device: a Manual engine (completion by Poll) on a 64-descriptor ring, and
// a coherent buffer its txreqs add by bus address (AddDAddr: nothing to map).
type kdiffDev struct {
	t   *testing.T
	dev *Device
	e   *Engine
	coh *dma.Coherent
}

// build returns a txreq of ndesc 4-byte descriptors, extra bytes short of closed, with flags and
// completer c.
func (d *kdiffDev) build(ndesc, extra int, flags Flags, c Completer) *TxReq {
	tx := new(TxReq)
	require.NoError(d.t, tx.Init(flags, 4*ndesc+extra, c))
	for range ndesc {
		require.NoError(d.t, tx.AddDAddr(d.dev, d.coh.Addr(), 4))
	}
	return tx
}

// kdiffRounds runs round n times (short with -short), each on a fresh kdiffDev, with a generator
// seeded with seed.
func kdiffRounds(t *testing.T, seed uint64, n, short int, round func(*kdiffDev, *rand.Rand) error) {
	rng, n := kdiffRand(seed, n, short)
	for i := range n {
		dev, err := NewDevice(Config{Manual: true, Completion: CompletePoll, RingSize: 64})
		require.NoError(t, err)
		coh, err := dev.Mapper().AllocCoherent(64)
		require.NoError(t, err)
		err = round(&kdiffDev{t: t, dev: dev, e: dev.Engine(0), coh: coh}, rng)
		require.NoError(t, dev.Mapper().FreeCoherent(coh))
		require.NoError(t, dev.Close())
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
}

func kdiffSendRound(d *kdiffDev, rng *rand.Rand) error {
	t, e := d.t, d.e
	k := newKEngine(64)
	rec := &kdiffRecorder{ids: map[*TxReq]int{}, done: map[int]Status{}}
	var sleeps []string
	mode := kSleep(rng.IntN(5))
	var w *IOWait
	if mode != kNoWait {
		w = new(IOWait)
		var sleep SleepFunc
		switch mode {
		case kSleepBusy, kSleepDrop, kSleepQueued:
			sleep = func(_ *Engine, _ *IOWait, tx *TxReq, _ uint32, pktsSent bool) error {
				sleeps = append(sleeps, fmt.Sprintf("tx%d/%v", rec.ids[tx], pktsSent))
				switch mode {
				case kSleepBusy:
					return ErrBusy
				case kSleepQueued:
					return ErrQueued
				}
				return nil
			}
		}
		w.Init(sleep, func(*IOWait, int) {}, nil)
	}
	nextID := 0
	build := func(ndesc int, finished bool) (*TxReq, *kSendTx) {
		nextID++
		extra := 0
		if !finished {
			extra = 4
		}
		tx := d.build(ndesc, extra, 0, rec)
		rec.ids[tx] = nextID
		return tx, &kSendTx{id: nextID, numDesc: uint16(ndesc), tlen: uint16(extra)}
	}
	ndesc := func() int { return 1 + rng.IntN(12) }
	var log []string
	for step := range 40 {
		var what string
		switch r := rng.IntN(10); {
		case r < 4: // Send
			finished := rng.IntN(10) != 0
			tx, ktx := build(ndesc(), finished)
			pkts := rng.IntN(2) == 0
			got := kdiffErrnoSend(e.Send(w, tx, pkts))
			want := k.sendTxreq(mode, ktx, pkts)
			what = fmt.Sprintf("Send tx%d (%d descs, tlen %d): %d", ktx.id, ktx.numDesc, ktx.tlen, want)
			if got != want {
				return fmt.Errorf("step %d %s: library %d\n%v", step, what, got, log)
			}
		case r < 7: // SendList
			var l TxList
			var kl []*kSendTx
			for range 1 + rng.IntN(8) {
				tx, ktx := build(ndesc(), true)
				l.PushBack(tx)
				kl = append(kl, ktx)
			}
			n, err := e.SendList(w, &l)
			got := kdiffErrnoSend(err)
			want, wantN := k.sendTxlist(mode, &kl)
			what = fmt.Sprintf("SendList: %d, count %d, %d left", want, wantN, len(kl))
			if got != want || n != wantN || l.Len() != len(kl) {
				return fmt.Errorf("step %d %s: library %d (%v), count %d, %d left\n%v", step, what, got, err, n, l.Len(), log)
			}
			for tx, i := l.Front(), 0; tx != nil; tx, i = l.Next(tx), i+1 {
				if rec.ids[tx] != kl[i].id {
					return fmt.Errorf("step %d %s: left tx%d at %d, kernel tx%d", step, what, rec.ids[tx], i, kl[i].id)
				}
			}
		case r < 9:
			what = "drain"
			if _, err := e.Process(); err != nil && !errors.Is(err, ErrNotRunning) {
				return err
			}
			e.Poll()
			k.drain()
		default:
			if k.running {
				what = "Stop"
				require.NoError(t, e.Stop())
				k.stop()
			} else {
				what = "Start"
				require.NoError(t, e.Start())
				k.start()
			}
		}
		log = append(log, what)
		if fmt.Sprint(sleeps) != fmt.Sprint(k.sleeps) {
			return fmt.Errorf("step %d %s: sleeper calls %v, kernel %v\n%v", step, what, sleeps, k.sleeps, log)
		}
		// A round sends everything with its one iowait (or none): every completion drops its
		// busy count (complete_tx's iowait_sdma_dec).
		if w != nil && w.Busy() != k.busy-len(k.done) {
			return fmt.Errorf("step %d %s: busy %d, kernel %d\n%v", step, what, w.Busy(), k.busy-len(k.done), log)
		}
		if got := int(e.Stats().RingFull); got != k.fullCount {
			return fmt.Errorf("step %d %s: descq_full_count %d, kernel %d\n%v", step, what, got, k.fullCount, log)
		}
		if k.running && e.DescqFreeCnt() != int(k.freecnt()) {
			return fmt.Errorf("step %d %s: freecnt %d, kernel %d\n%v", step, what, e.DescqFreeCnt(), k.freecnt(), log)
		}
		if fmt.Sprint(rec.done) != fmt.Sprint(k.done) || len(rec.dup) != 0 {
			return fmt.Errorf("step %d %s: completions %v (twice: %v), kernel %v\n%v", step, what, rec.done, rec.dup, k.done, log)
		}
	}
	return nil
}
