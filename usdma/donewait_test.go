package usdma

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/census"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// doneWaitQueue is a one-slot queue on a Manual engine (its completions run in the test's
// Process) whose Done calls done, with 4096-byte one-packet messages, closed at the test's end.
func doneWaitQueue(t *testing.T, done func(slot int, e CompEntry)) (*PktQ, *sdma.Engine, func(ctx context.Context) error) {
	t.Helper()
	pq, eng, submit := doneWaitQueueOpen(t, done)
	closeAtEnd(t, pq)
	return pq, eng, submit
}

// doneWaitQueueOpen is doneWaitQueue's queue, left open (for a test that may leave a Submit
// hung, holding the queue's send lock, which Close would wait for).
func doneWaitQueueOpen(t *testing.T, done func(slot int, e CompEntry)) (*PktQ, *sdma.Engine, func(ctx context.Context) error) {
	t.Helper()
	dev := testDevice(t, sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}})
	eng := dev.Engine(0)
	pq, err := New(Config{Device: dev, Engine: eng, Slots: 1, MTU: 4096, Done: done})
	require.NoError(t, err)
	data := pattern(4096, 3)
	info, hdr := Message(0, 4096, testTemplate, data)
	require.EqualValues(t, 1, info.NPkts)
	return pq, eng, func(ctx context.Context) error { return pq.Submit(ctx, info, &hdr, data) }
}

// TestSubmitWaitsForTheEndingDone: Config.Done runs before its request's end is visible (the
// slot is released only after Done returns, 2f0021a), so the natural pattern, Done telling a
// producer goroutine "slot N is free" and the producer Submitting on N at once, was refused
// ErrSlotInUse whenever the producer came before Done's return (sdmaperf -mode msg had to wait
// for Comp to leave QUEUED, 6bab37d). Here the first request's Done, run by the test's Process
// of a Manual engine, hands the slot over and then waits until the producer's Submit has either
// returned (refused: the bug) or is waiting for the end (the endWait hook); the producer's
// request then goes on the slot, and both requests end once each.
func TestSubmitWaitsForTheEndingDone(t *testing.T) {
	handed := make(chan int, 1)
	returned := make(chan error, 1)
	waiting := make(chan struct{})
	var dones []CompEntry // Done runs in the test's Process only (Manual engine)
	pq, eng, submit := doneWaitQueue(t, func(slot int, e CompEntry) {
		if dones = append(dones, e); len(dones) != 1 {
			return
		}
		handed <- slot
		select { // the producer took the slot: it returned (refused), or it waits for this end
		case err := <-returned:
			returned <- err
		case <-waiting:
		}
	})
	var once sync.Once
	testHooks(pq).endWait = func(int) { once.Do(func() { close(waiting) }) }
	ctx := context.Background()
	require.NoError(t, submit(ctx))
	go func() {
		<-handed
		returned <- submit(ctx)
	}()
	n, err := eng.Process() // the first request's packet: its Done runs here
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, <-returned, "the producer's Submit on the slot the ending request's Done handed it")
	require.Equal(t, Queued, pq.Comp(0).Status, "the producer's request is on the slot")
	require.EqualValues(t, 2, pq.Stats().Requests)
	n, err = eng.Process()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []CompEntry{{Status: Complete}, {Status: Complete}}, dones, "each request told Done once")
	require.Equal(t, Complete, pq.Comp(0).Status)
	require.EqualValues(t, 2, pq.Stats().Completed)
}

// TestSubmitFromInsideDoneRefused: a Submit on the slot from inside its own Done would wait for
// itself: it is ErrSlotInUse at once, nothing changed, whether the Done runs on a completion
// pass (Process) or inside the Submit whose request ended there. In the second case the Submit
// from Done blocked on the queue's send lock, held by the Submit that runs the Done: it hung
// (census.Call reports it).
func TestSubmitFromInsideDoneRefused(t *testing.T) {
	t.Run("in Process", func(t *testing.T) {
		var inner []error
		var submit func(context.Context) error
		pq, eng, submit := doneWaitQueue(t, func(int, CompEntry) {
			inner = append(inner, submit(context.Background()))
		})
		testHooks(pq).endWait = func(int) { t.Error("a Submit from inside Done waited for the end") }
		require.NoError(t, submit(context.Background()))
		n, err := eng.Process()
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Len(t, inner, 1)
		require.ErrorIs(t, inner[0], ErrSlotInUse)
		require.ErrorContains(t, inner[0], "from inside its Done")
		require.Equal(t, Complete, pq.Comp(0).Status, "the Done's request ended, no other took the slot")
		require.EqualValues(t, 1, pq.Stats().Requests)
	})
	t.Run("in Submit", func(t *testing.T) {
		// The engine is stopped: the request, claimed, ends in Submit (ECOMM) when Submit drops
		// its hold, Done running inside Submit.
		pq, eng, submit := doneWaitQueueOpen(t, nil)
		require.NoError(t, eng.Stop())
		var inner []error
		pq.onDone = func(int, CompEntry) { inner = append(inner, submit(context.Background())) }
		r := census.Call(func() error { return submit(context.Background()) })
		require.False(t, r.Hung || r.Panicked, "the outer Submit: %v", r) // hung: the queue is left open
		require.ErrorIs(t, r.Err, ErrNotRunning, "the outer Submit")
		require.Len(t, inner, 1, "Done ran inside the outer Submit")
		require.ErrorIs(t, inner[0], ErrSlotInUse)
		require.ErrorContains(t, inner[0], "from inside its Done")
		require.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0))
		require.EqualValues(t, 1, pq.Stats().Requests)
		require.NoError(t, pq.Close(context.Background()))
	})
}

// TestSubmitOnSlotInFlightRefusedAtOnce: a Submit on a slot whose request is in flight, its Done
// not running, is still ErrSlotInUse at once (no wait), from any goroutine; and one whose
// context ends while it waits for the slot's ending Done is ErrSlotInUse with the context's
// error as Cause, nothing changed.
func TestSubmitOnSlotInFlightRefusedAtOnce(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var fromDone error
	var submit func(context.Context) error
	var dones int
	pq, eng, submit := doneWaitQueue(t, func(int, CompEntry) {
		if dones++; dones != 1 {
			return
		}
		errc := make(chan error, 1)
		go func() { errc <- submit(cancelled) }() // another goroutine, its context done
		fromDone = <-errc
	})
	waits := 0
	testHooks(pq).endWait = func(int) { waits++ }
	require.NoError(t, submit(context.Background()))
	errc := make(chan error, 1)
	go func() { errc <- submit(context.Background()) }()
	err := <-errc
	require.ErrorIs(t, err, ErrSlotInUse)
	require.ErrorContains(t, err, "entry 0 is in use")
	n, perr := eng.Process()
	require.NoError(t, perr)
	require.Equal(t, 1, n)
	require.ErrorIs(t, fromDone, ErrSlotInUse)
	require.ErrorIs(t, fromDone, context.Canceled, "the wait for the ending Done gave up on its context")
	require.Zero(t, waits, "no wait with the context done")
	require.EqualValues(t, 1, pq.Stats().Requests)
	require.Equal(t, Complete, pq.Comp(0).Status)
	require.NoError(t, submit(context.Background()), "the slot is free once the end is visible")
	n, perr = eng.Process()
	require.NoError(t, perr)
	require.Equal(t, 1, n)
	require.Equal(t, 2, dones)
}

// TestSubmitHandoffConcurrent: the producer-handoff pattern at speed. Done gives each ended
// request's slot to a producer over a channel, the producer Submits on it at once, while a
// driver goroutine runs the Manual engine's completions (and a request may end inside its own
// Submit, its Done on the producer). Every Submit is accepted, and every request is told Done
// exactly once, on the slot it was submitted on. Done yields after its hand-over, so that most
// Submits find the slot's end not yet published and wait for it (before the fix: ErrSlotInUse).
func TestSubmitHandoffConcurrent(t *testing.T) {
	const slots = 4
	msgs := 2000
	if testing.Short() {
		msgs = 300
	}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}})
	eng := dev.Engine(0)
	free := make(chan int, slots)
	var onSlot [slots]atomic.Int64 // the message on each slot: the producer's, read by its Done
	seen := make([]atomic.Int32, msgs)
	pq := testQueue(t, Config{Device: dev, Engine: eng, Slots: slots, MTU: 4096, Done: func(slot int, e CompEntry) {
		if e.Status != Complete {
			t.Errorf("slot %d: %+v", slot, e)
		}
		seen[onSlot[slot].Load()].Add(1)
		free <- slot      // never blocks: room for every slot
		runtime.Gosched() // Done goes on after its hand-over: the producer's Submit meets the end unpublished
	}})
	var stop atomic.Bool
	var driver sync.WaitGroup
	defer func() { stop.Store(true); driver.Wait() }()
	driver.Add(1)
	driverGone := make(chan struct{}) // closed when the driver returns: after an error, at once
	go func() {
		defer driver.Done()
		defer close(driverGone)
		for !stop.Load() {
			if n, err := eng.Process(); err != nil {
				t.Error(err)
				return
			} else if n == 0 {
				runtime.Gosched()
			}
		}
	}()
	for s := range slots {
		free <- s
	}
	// A slot comes back only through a Done, which needs the driver: once it stopped (its error
	// reported) nothing comes, and the test fails at once instead of waiting for ever. A minute
	// without a slot back is a hang guard.
	nextFree := func(i int) int { // for message i (msgs and on: the end's wait for every slot)
		t.Helper()
		select {
		case slot := <-free:
			return slot
		case <-driverGone:
			t.Fatalf("message %d of %d: no slot will come back, the driver stopped", i, msgs)
		case <-time.After(time.Minute):
			t.Fatalf("message %d of %d: no slot came back in a minute (%+v)", i, msgs, pq.Stats())
		}
		return -1
	}
	data := pattern(4096, 5)
	ctx := context.Background()
	for i := range msgs {
		slot := nextFree(i)
		onSlot[slot].Store(int64(i))
		info, hdr := Message(slot, 4096, testTemplate, data)
		if err := pq.Submit(ctx, info, &hdr, data); err != nil {
			t.Fatalf("message %d on slot %d: %v", i, slot, err)
		}
	}
	for range slots {
		nextFree(msgs) // every slot back: every request's Done ran
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Errorf("message %d: Done %d times", i, n)
		}
	}
	require.EqualValues(t, msgs, pq.Stats().Completed)
	require.NoError(t, pq.Close(ctx))
}

// twoSlotQueue is a two-slot queue on dev's engine 0 (a Manual engine: its completions run in
// the test's Process), not closed at the test's end, and its Submit on a slot of a 4096-byte
// one-packet message. The test sets its Done (onDone) before the first Submit.
func twoSlotQueue(t *testing.T, dev *sdma.Device) (*PktQ, *sdma.Engine, func(slot int) error) {
	t.Helper()
	eng := dev.Engine(0)
	pq, err := New(Config{Device: dev, Engine: eng, Slots: 2, MTU: 4096})
	require.NoError(t, err)
	data := pattern(4096, 3)
	return pq, eng, func(slot int) error {
		info, hdr := Message(slot, 4096, testTemplate, data)
		return pq.Submit(context.Background(), info, &hdr, data)
	}
}

// TestSubmitOnAnotherSlotFromDoneInSubmit: a Done that runs inside a Submit (its request ended
// there) may Submit on another slot: that request is accepted, sent, and ends once, told Done
// once. Before, such a Done ran with the queue's send lock held, so the Submit from it waited
// for that lock, held by its own goroutine, for ever (census.Call reports the hang; the queue
// is then left open, as Close would wait for the lock too).
func TestSubmitOnAnotherSlotFromDoneInSubmit(t *testing.T) {
	pq, eng, submit := twoSlotQueue(t, testDevice(t, sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}}))
	type done struct {
		slot int
		e    CompEntry
	}
	var dones []done
	var inner error
	pq.onDone = func(slot int, e CompEntry) {
		dones = append(dones, done{slot, e})
		if slot == 0 {
			if err := eng.Start(); err != nil {
				t.Error(err)
			}
			inner = submit(1)
		}
	}
	// The engine is stopped: the request on slot 0, claimed, ends in its Submit (ECOMM) when
	// Submit drops its hold, its Done running inside that Submit.
	require.NoError(t, eng.Stop())
	r := census.Call(func() error { return submit(0) })
	require.False(t, r.Hung || r.Panicked, "the outer Submit: %v", r)
	require.ErrorIs(t, r.Err, ErrNotRunning, "the outer Submit")
	require.NoError(t, inner, "the Submit on slot 1 from inside slot 0's Done")
	require.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0))
	require.Equal(t, Queued, pq.Comp(1).Status)
	n, err := eng.Process()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, CompEntry{Status: Complete}, pq.Comp(1))
	require.Equal(t, []done{{0, CompEntry{Status: Error, Errcode: ECOMM}}, {1, CompEntry{Status: Complete}}}, dones, "each request told Done once")
	require.EqualValues(t, 2, pq.Stats().Requests)
	require.NoError(t, pq.Close(context.Background()))
}

// TestSubmitFromDoneWhileClosing: a Submit from a Done on the completion pass while Close waits
// for the queue's requests to end is ErrClosed at once. Before, Close held the queue's send lock
// across that wait, so the Submit waited for the lock, Close for the Done, and neither returned
// (census.Call reports the hang of the pass; the device is then left open, as its Close would
// wait for that pass).
func TestSubmitFromDoneWhileClosing(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}})
	require.NoError(t, err)
	pq, eng, submit := twoSlotQueue(t, dev)
	var inner []error
	pq.onDone = func(int, CompEntry) { inner = append(inner, submit(1)) }
	require.NoError(t, submit(0))
	waiting := make(chan struct{})
	testHooks(pq).closeIdle = func() { close(waiting) }
	closed := make(chan error, 1)
	go func() { closed <- pq.Close(context.Background()) }()
	<-waiting // Close is about to wait for the request on slot 0 to end
	r := census.Call(func() error { _, err := eng.Process(); return err })
	require.False(t, r.Hung || r.Panicked, "the pass running Done: %v", r)
	require.NoError(t, r.Err)
	require.Len(t, inner, 1)
	require.ErrorIs(t, inner[0], ErrClosed)
	require.NoError(t, <-closed)
	require.Equal(t, CompEntry{Status: Complete}, pq.Comp(0))
	require.Equal(t, CompEntry{}, pq.Comp(1), "slot 1 never used")
	require.EqualValues(t, 1, pq.Stats().Requests)
	require.NoError(t, dev.Close())
}

// TestCloseFromInsideDoneRefused: a Close from inside a Config.Done would wait for that Done's
// own request to end, which comes only after Done returns: it is ErrInvalid at once and changes
// nothing (the queue stays open: a later Submit is accepted), whether the Done runs on a
// completion pass (Process) or inside the Submit whose request ended there. Before, it waited
// for ever with context.Background(); here the Close runs on Done's own goroutine with a
// context that ends after census.Timeout, so that the old wait comes back as
// context.DeadlineExceeded (it had set the queue closed).
func TestCloseFromInsideDoneRefused(t *testing.T) {
	check := func(t *testing.T, pq *PktQ, inner []error) {
		t.Helper()
		require.Len(t, inner, 1, "Done ran once")
		require.ErrorIs(t, inner[0], ErrInvalid)
		require.ErrorContains(t, inner[0], "inside a Config.Done")
		require.False(t, pq.closed.Load(), "the refused Close changed nothing")
	}
	t.Run("in Process", func(t *testing.T) {
		var inner []error
		var pq *PktQ
		pq, eng, submit := doneWaitQueueOpen(t, func(int, CompEntry) {
			inner = append(inner, closeBounded(pq))
		})
		require.NoError(t, submit(context.Background()))
		n, err := eng.Process()
		require.NoError(t, err)
		require.Equal(t, 1, n)
		check(t, pq, inner)
		require.Equal(t, Complete, pq.Comp(0).Status)
		require.NoError(t, submit(context.Background()), "the queue is still open")
		n, err = eng.Process()
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.NoError(t, pq.Close(context.Background()))
	})
	t.Run("in Submit", func(t *testing.T) {
		// The engine is stopped: the request, claimed, ends in Submit (ECOMM) when Submit drops
		// its hold, Done running inside Submit.
		pq, eng, submit := doneWaitQueueOpen(t, nil)
		require.NoError(t, eng.Stop())
		var inner []error
		pq.onDone = func(int, CompEntry) {
			inner = append(inner, closeBounded(pq))
		}
		require.ErrorIs(t, submit(context.Background()), ErrNotRunning)
		check(t, pq, inner)
		require.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0))
		require.NoError(t, pq.Close(context.Background()))
	})
}

// closeBounded closes pq on the calling goroutine with a context that ends after
// census.Timeout: a Close that would wait for ever returns the context's error.
func closeBounded(pq *PktQ) error {
	ctx, cancel := context.WithTimeout(context.Background(), census.Timeout)
	defer cancel()
	return pq.Close(ctx)
}

// TestCloseBehindAnotherCloseKeepsItsContext: a Close while another Close waits for the
// queue's requests to end returns its own context's error when that context ends, as Close
// promises. Before, it waited for the other Close's whole wait first (the lock that serialises
// Closes, taken without looking at the context): with the other Close's context.Background()
// and a request that does not end, for ever (census.Call reports the hang). A Close with no
// other Close in the way takes the lock whatever its context (an idle queue closes with a done
// context, as before).
func TestCloseBehindAnotherCloseKeepsItsContext(t *testing.T) {
	pq, eng, submit := doneWaitQueueOpen(t, nil)
	require.NoError(t, submit(context.Background()))
	waiting := make(chan struct{})
	testHooks(pq).closeIdle = func() { close(waiting) }
	first := make(chan error, 1)
	go func() { first <- pq.Close(context.Background()) }()
	<-waiting // the first Close waits for the request on slot 0 to end
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	r := census.Call(func() error { return pq.Close(cancelled) })
	require.False(t, r.Hung || r.Panicked, "the second Close: %v", r)
	require.ErrorIs(t, r.Err, context.Canceled, "the second Close")
	n, err := eng.Process()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, <-first)
	require.Equal(t, CompEntry{Status: Complete}, pq.Comp(0))
	testHooks(pq).closeIdle = nil
	require.NoError(t, pq.Close(context.Background()), "a Close after the wait")
	// With no other Close, one whose context is already done still does its work: an idle
	// queue closes (nil), every time (not a random pick between the lock and the context).
	for i := range 64 {
		pq, _, _ := doneWaitQueueOpen(t, nil)
		require.NoError(t, pq.Close(cancelled), "an idle queue's Close with a done context, %d", i)
	}
}
