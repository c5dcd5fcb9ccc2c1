package usdma

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestStoppedAfterAbortErrcodeEFAULT: a request DEFERRED on a full ring whose packets in the
// ring complete aborted (the engine halts) stops sending with its later packets unsent. The
// kernel's process_request then finds has_error in user_sdma_send_pkts (-EFAULT), goes to
// free_req with seqsubmitted < npkts, waits for the packets handed over and writes
// set_comp_state(ERROR, -EFAULT): errcode EFAULT, not the aborted packets' -status (their
// callbacks return early, seqcomp != npkts - 1).
//
// The halt comes once the queue is DEFERRED, which means parked on the engine's wait list
// (TestDeferredOnlyOnceParked); the halt's flush completes the ring aborted before it wakes the
// wait list (sdma_flush), so the submitter, woken, finds the failure. The timeout is an hour: a
// SDMA_IOWAIT_TIMEOUT retry that ran while the engine was halted would get -ECOMM (the kernel's
// own race, not the order checked here), and under load the halt can come a second late.
func TestStoppedAfterAbortErrcodeEFAULT(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, RingSize: 64})
	eng := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Slots: 1, Timeout: time.Hour})
	errc := submitUntilDeferred(t, context.Background(), pq, eng, pattern(64*4096, 3))
	require.NoError(t, sdmatest.SetFaults(eng, sdmatest.FaultPlan{HaltAt: 1}))
	stop, driven := make(chan struct{}), make(chan struct{})
	go func() { // the chip: halts at its next packet, then recovers
		defer close(driven)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n, _ := eng.Process(); n == 0 {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	var once sync.Once
	end := func() { once.Do(func() { close(stop); <-driven }) }
	t.Cleanup(end)
	err := submitResult(t, pq, errc)
	require.ErrorIs(t, err, ErrFault, "sending stopped after an aborted packet: -EFAULT")
	var ce *CompError
	require.ErrorAs(t, waitSlot(t, pq, 0), &ce)
	end()
	assert.Equal(t, CompEntry{Status: Error, Errcode: EFAULT}, pq.Comp(0), "free_req's set_comp_state(ERROR, -EFAULT)")
}

// TestTemplateLRHLengthAll16Bits: compute_data_length reads the first packet's length from all
// 16 bits of the template's lrh[2] ((be16_to_cpu(req->hdr.lrh[2]) << 2) - 60), so a template
// with a bit of lrh[2] 15:12 set asks for more than a fragment and check_header_template fails
// the request (-EINVAL); and with less than a dword of data the template's length is not used
// at all (compute_data_length takes data_len, check_header_template checks the computed length).
func TestTemplateLRHLengthAll16Bits(t *testing.T) {
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: sink})
	pq := testQueue(t, Config{Device: dev, Slots: 2})
	data := pattern(10000, 1)
	info, hdr := Message(0, 4096, testTemplate, data)
	bad := withH(hdr, func(h *Header) { h.setLRH(2, h.lrh(2)|0x1000) })
	err := pq.Submit(context.Background(), info, &bad, data)
	require.ErrorIs(t, err, ErrInvalid, "lrh[2] 0x%04x: the kernel's first packet is longer than fragsize", bad.lrh(2))
	assert.Equal(t, CompEntry{}, pq.Comp(0))

	small := data[:3]
	info, _ = Message(1, 4096, testTemplate, small)
	long, _ := testTemplate.Header(8192) // a template length over the fragment: unused for 3 bytes
	require.NoError(t, pq.Submit(context.Background(), info, &long, small))
	_, err = dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 1))
	pkts, _ := sink.packets()
	require.Len(t, pkts, 1)
	var h Header
	copy(h[:], pkts[0])
	assert.Equal(t, 64+4, len(pkts[0]))
	assert.Equal(t, (lrhToICRC+4)/4, h.PktLen(), "the packet's own length")
}

// TestSlotInUseBeforeLaterChecks: hfi1_user_sdma_process_request checks the completion index,
// the io vector count and fragsize == 0, then claims the slot (-EBADSLT if in use), and only then
// checks the rest (npkts, the vector count against MAX_VECTORS_PER_REQ, the template). So a
// request on a busy slot that would fail a later check is -EBADSLT, and one that fails an
// earlier check is -EINVAL.
func TestSlotInUseBeforeLaterChecks(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true})
	pq := testQueue(t, Config{Device: dev, Slots: 2})
	data := pattern(10000, 1)
	good, hdr := Message(1, 4096, testTemplate, data)
	require.NoError(t, pq.Submit(context.Background(), good, &hdr, data))
	for name, tc := range map[string]struct {
		info ReqInfo
		hdr  Header
		want error
	}{
		"npkts 0":       {info: with(good, func(i *ReqInfo) { i.NPkts = 0 }), hdr: hdr, want: ErrSlotInUse},
		"npkts wrong":   {info: with(good, func(i *ReqInfo) { i.NPkts = 9 }), hdr: hdr, want: ErrSlotInUse},
		"fragsize 4000": {info: with(good, func(i *ReqInfo) { i.FragSize = 4000 }), hdr: hdr, want: ErrSlotInUse},
		"verbs opcode":  {info: good, hdr: withH(hdr, func(h *Header) { h.setBTH(0, 0x04<<24) }), want: ErrSlotInUse},
		"GRH":           {info: good, hdr: withH(hdr, func(h *Header) { h.setLRH(0, 3) }), want: ErrSlotInUse},
		"fragsize 0":    {info: with(good, func(i *ReqInfo) { i.FragSize = 0 }), hdr: hdr, want: ErrInvalid},
		"iovcnt 0":      {info: with(good, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, -1) }), hdr: hdr, want: ErrInvalid},
	} {
		err := pq.Submit(context.Background(), tc.info, &tc.hdr, data)
		assert.ErrorIs(t, err, tc.want, name)
		assert.Equal(t, CompEntry{Status: Queued}, pq.Comp(1), name)
	}
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 1))
}

// TestDeferredQueueNeedsNoDescriptors: defer_packet_queue queues pq->busy on sde->dmawait with
// no txreq on its tx_head lists (the packet stays on req->txps), so sdma_desc_avail's
// iowait_get_all_desc counts 0 descriptors for it: a completion pass always wakes the deferred
// queue, and never stops at it, whatever room the pass made. A waiter queued behind it that
// fits is woken too.
func TestDeferredQueueNeedsNoDescriptors(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, Completion: sdma.CompletePoll, RingSize: 64})
	e := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Slots: 1, DisableAHG: true, Timeout: time.Hour})
	small := make([]byte, 64)
	send := func() {
		tx := new(sdma.TxReq)
		require.NoError(t, tx.Init(0, len(small), nil))
		require.NoError(t, tx.AddKVAddr(dev, small))
		require.NoError(t, e.Send(nil, tx, true))
	}
	send() // A: the hardware moves past it now, its completion pass comes later
	_, err := e.Process()
	require.NoError(t, err)
	for range 61 { // the ring is full but for one slot (capacity 63: A and 61 more)
		send()
	}
	// A request whose first packet needs 3 descriptors (a header and two page pieces): deferred.
	backing := make([]byte, 3*4096)
	data := backing[4096-100 : 4096-100+4000]
	if addrOf(data)/4096 == (addrOf(data)+3999)/4096 {
		data = backing[8192-100 : 8192-100+4000]
	}
	info, hdr := Message(0, 4096, testTemplate, data)
	deferred := deferrals(pq)
	errc := make(chan error, 1)
	go func() { errc <- pq.Submit(context.Background(), info, &hdr, data) }()
	awaitDeferred(t, pq, deferred, errc)
	require.True(t, e.Waiting(&pq.busy), "DEFERRED: parked on the engine's wait list")
	require.Equal(t, Deferred.String(), pq.State().String(), "parked, nothing to wake it: State says so")
	var w2 sdma.IOWait
	woken := make(chan struct{}, 1)
	w2.Init(nil, func(*sdma.IOWait, int) { woken <- struct{}{} }, nil)
	queued, err := e.QueueWait(&w2, 1, true) // behind the queue: needs one descriptor
	require.NoError(t, err)
	require.True(t, queued)

	require.Equal(t, 1, e.Poll(), "the pass completes A: 2 descriptors free, fewer than the packet's 3")
	select {
	case <-woken:
	default:
		t.Error("the waiter behind the deferred queue was not woken: the pass stopped at the queue")
	}
	assert.False(t, e.Waiting(&pq.busy) && pq.Stats().Deferrals == 1, "the deferred queue was not woken")

	// Let it finish: the chip sends and completes everything.
	drive(t, e)
	require.NoError(t, submitResult(t, pq, errc))
	require.NoError(t, waitSlot(t, pq, 0))
}

// TestAllFlushedErrcodeAborted: the engine stops while the request's last packets are handed
// over, so sdma_send_txlist flushes them (-ECOMM) with every packet counted as taken
// (seqsubmitted == npkts). process_request's free_req then leaves the slot alone: the writev
// returns -ECOMM and the slot ends ERROR from the last packet's callback, errcode -ABORTED.
func TestAllFlushedErrcodeAborted(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true})
	e := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Slots: 1})
	testHooks(pq).onSend = func(int) { require.NoError(t, e.Stop()) }
	data := pattern(5*4096, 4)
	info, hdr := Message(0, 4096, testTemplate, data)
	err := pq.Submit(context.Background(), info, &hdr, data)
	require.ErrorIs(t, err, ErrNotRunning, "sdma_send_txlist's -ECOMM")
	e.Poll() // the flush
	var ce *CompError
	require.ErrorAs(t, waitSlot(t, pq, 0), &ce)
	assert.Equal(t, CompEntry{Status: Error, Errcode: ErrcodeAborted}, pq.Comp(0))
	require.NoError(t, e.Start())
}

// TestDeferredOnlyOnceParked: defer_packet_queue sets pq->state DEFERRED under sde->waitlock
// after sdma_progress said park (and sdma_send_txlist holds tail_lock across the sleep, so no
// halt comes between), so a queue seen DEFERRED is on the engine's dmawait list, or was woken
// from it (ACTIVE again). Until the sleeper has decided, the queue is ACTIVE: a halt then is one
// before the send (-ECOMM, or a send into the recovered ring), not one the parked queue is woken
// from after the flush (-EFAULT).
func TestDeferredOnlyOnceParked(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, RingSize: 64})
	eng := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Slots: 1, Timeout: time.Hour})
	var inWindow []QState
	testHooks(pq).deferWindow = func() {
		inWindow = append(inWindow, pq.State())
		assert.False(t, eng.Waiting(&pq.busy), "not parked before the progress check")
	}
	errc := submitUntilDeferred(t, context.Background(), pq, eng, pattern(64*4096, 5))
	drive(t, eng) // the chip: sends and completes everything
	require.NoError(t, submitResult(t, pq, errc))
	require.NoError(t, waitSlot(t, pq, 0))
	require.NotEmpty(t, inWindow, "the queue never slept")
	for i, s := range inWindow {
		assert.Equal(t, Active.String(), s.String(), "sleep %d: ACTIVE until the sleeper parks the queue", i)
	}
	assert.Equal(t, Active.String(), pq.State().String())
}

// submitUntilDeferred submits data as one request of 4096-byte fragments under ctx on a goroutine
// and returns its Submit's result channel once the queue is DEFERRED, checking that it is parked
// on eng's wait list then and that State says DEFERRED (the callers' queues wait an hour: no
// timeout's retry unparks it meanwhile, and nothing drives the engine yet).
func submitUntilDeferred(t *testing.T, ctx context.Context, pq *PktQ, eng *sdma.Engine, data []byte) <-chan error {
	t.Helper()
	deferred := deferrals(pq)
	info, hdr := Message(0, 4096, testTemplate, data)
	errc := make(chan error, 1)
	go func() { errc <- pq.Submit(ctx, info, &hdr, data) }()
	awaitDeferred(t, pq, deferred, errc)
	require.True(t, eng.Waiting(&pq.busy), "DEFERRED: parked on the engine's wait list")
	require.Equal(t, Deferred.String(), pq.State().String(), "parked, nothing to wake it: State says so")
	return errc
}

// deferrals returns a channel that is told (without blocking: one signal held) each time pq's
// Submit makes the queue DEFERRED, parked on an engine's wait list (the deferred hook). Call it
// before the Submit starts.
func deferrals(pq *PktQ) <-chan struct{} {
	ch := make(chan struct{}, 1)
	testHooks(pq).deferred = func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return ch
}

// awaitDeferred waits for deferred (from deferrals) while errc, the Submit's result, has not
// come: a Submit that returns first fails t at once, and a queue not DEFERRED within a minute
// (a hang guard, not a timing assumption) fails it with the queue's state and counters.
func awaitDeferred(t *testing.T, pq *PktQ, deferred <-chan struct{}, errc <-chan error) {
	t.Helper()
	select {
	case <-deferred:
	case err := <-errc:
		t.Fatalf("Submit returned %v before the queue deferred", err)
	case <-time.After(time.Minute):
		t.Fatalf("the queue never deferred: %v, %+v", pq.State(), pq.Stats())
	}
}

// submitResult is the result of the Submit whose errc awaitDeferred waited on, once it comes: a
// minute without it is a hang guard, not a timing assumption, and fails t with the queue's state
// and counters rather than the binary's timeout.
func submitResult(t *testing.T, pq *PktQ, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("the Submit did not return: %v, %+v", pq.State(), pq.Stats())
		return nil
	}
}
