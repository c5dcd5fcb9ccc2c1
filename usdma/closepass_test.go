package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestCloseFromAnotherQueuesDoneOnThePass: a Close of queue B from queue A's Config.Done, run by
// a completion pass of the engine B's request is in flight on, would wait for that request,
// whose completion needs the rest of the pass the caller is in: it is ErrInvalid (the queue is
// closed to new requests, as when ctx ends; a Close from elsewhere finishes). Before, it waited
// for ever with context.Background(); here the Close has a context that ends after
// census.Timeout, so that the old wait comes back as context.DeadlineExceeded. A Close of an
// idle queue from the same Done is not refused.
func TestCloseFromAnotherQueuesDoneOnThePass(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}})
	eng := dev.Engine(0)
	var pqB, pqC *PktQ
	var inner, idle []error
	pqA, err := New(Config{Device: dev, Engine: eng, Slots: 1, MTU: 4096, Done: func(int, CompEntry) {
		inner = append(inner, closeBounded(pqB))
		idle = append(idle, closeBounded(pqC))
	}})
	require.NoError(t, err)
	pqB, err = New(Config{Device: dev, Engine: eng, Slots: 1, MTU: 4096})
	require.NoError(t, err)
	pqC, err = New(Config{Device: dev, Engine: eng, Slots: 1, MTU: 4096})
	require.NoError(t, err)
	data := pattern(4096, 5)
	info, hdr := Message(0, 4096, testTemplate, data)
	require.NoError(t, pqA.Submit(context.Background(), info, &hdr, data)) // first in the ring
	require.NoError(t, pqB.Submit(context.Background(), info, &hdr, data))
	processRefused(t, eng, &inner)
	require.Equal(t, []error{nil}, idle, "the idle queue's Close from the pass")
	require.Equal(t, CompEntry{Status: Complete}, pqB.Comp(0))
	require.ErrorIs(t, pqB.Submit(context.Background(), info, &hdr, data), ErrClosed, "B is closed to new requests")
	require.NoError(t, pqB.Close(context.Background()), "a Close from elsewhere finishes")
	require.NoError(t, pqA.Close(context.Background()))
}

// sharerAfterA submits a request of pqA, then one of a new queue B on engine 0 that sends v:
// B's add uses the registration of v that another queue's pin cache holds. It returns B.
func sharerAfterA(t *testing.T, dev *sdma.Device, pqA *PktQ, v []byte) *PktQ {
	t.Helper()
	pqB, err := New(Config{Device: dev, Engine: dev.Engine(0), Slots: 1, MTU: 4096})
	require.NoError(t, err)
	a := pattern(4096, 5)
	info, hdr := Message(0, 4096, testTemplate, a)
	require.NoError(t, pqA.Submit(context.Background(), info, &hdr, a)) // first in the ring
	info, hdr = Message(0, 4096, testTemplate, v)
	require.NoError(t, pqB.Submit(context.Background(), info, &hdr, v)) // uses C's registration
	require.EqualValues(t, 1, pqB.Stats().Pins.Unregistered, "B's node overlaps C's registration")
	return pqB
}

// sharedRegOnPass makes a Manual device that registers memory and on it closerOnPass's queues A
// and C, then sharerAfterA's queue B, whose request uses C's registration after A's in the ring.
func sharedRegOnPass(t *testing.T) (dev *sdma.Device, pqA, pqB, pqC *PktQ, v []byte, closes *[]error) {
	dev = testDevice(t, sdma.Config{Manual: true, Mapper: testIOMMU(t), Sink: &sdmatest.DiscardSink{}})
	closes = new([]error)
	pqA, pqC, v = closerOnPass(t, dev, closes)
	pqB = sharerAfterA(t, dev, pqA, v)
	return dev, pqA, pqB, pqC, v, closes
}

// processRefused runs the two requests in eng's ring (A's first) and checks that A's Done ran
// once and that its Close (*closes) was refused at once, not a wait cut by its context.
func processRefused(t *testing.T, eng *sdma.Engine, closes *[]error) {
	t.Helper()
	n, err := eng.Process()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Len(t, *closes, 1, "A's Done ran once")
	require.ErrorIs(t, (*closes)[0], ErrInvalid)
	require.NotErrorIs(t, (*closes)[0], context.DeadlineExceeded)
}

// closerOnPass makes queue A on engine 0 of dev, whose Config.Done closes *target (closeBounded)
// and records the error in *closes, and queue C, target's queue (set before any Done runs), its
// cached one-page vector v sent and completed: C's node holds v's registration.
func closerOnPass(t *testing.T, dev *sdma.Device, closes *[]error) (pqA, pqC *PktQ, v []byte) {
	t.Helper()
	var err error
	pqA, err = New(Config{Device: dev, Engine: dev.Engine(0), Slots: 1, MTU: 4096, Done: func(int, CompEntry) {
		*closes = append(*closes, closeBounded(pqC))
	}})
	require.NoError(t, err)
	pqC, err = New(Config{Device: dev, Engine: dev.Engine(0), Slots: 1, MTU: 4096})
	require.NoError(t, err)
	buf := make([]byte, 2*dma.PageSize)
	v = buf[dma.PageSize-addrOf(buf)%dma.PageSize:][:dma.PageSize]
	sendOne(t, pqC, dev, 0, 4096, v)
	require.Zero(t, pqC.Stats().Pins.Unregistered, "C's vector is registered")
	return pqA, pqC, v
}

// TestCloseFromAPassWaitingForAStuckRegistration: an idle queue C whose cached vector's
// registration another queue B's packet still uses (B sends the same memory: its add finds C's
// registration) waits in Close for B's txreq to be cleaned. From queue A's Config.Done, run by
// the pass that completes B's packet later on, that cleaning needs the rest of the pass the
// caller is in: the Close is ErrInvalid (before: it waited until its context ended,
// context.DeadlineExceeded after census.Timeout here, for ever with context.Background()). The
// registration is kept: a Close from elsewhere once B's request ended deregisters it and
// returns nil.
func TestCloseFromAPassWaitingForAStuckRegistration(t *testing.T) {
	dev, pqA, pqB, pqC, v, inner := sharedRegOnPass(t)
	eng := dev.Engine(0)
	processRefused(t, eng, inner)
	require.Equal(t, CompEntry{Status: Complete}, pqB.Comp(0))
	require.Len(t, pqC.pins.stuck, 1, "the registration is kept for the next Close")
	require.NoError(t, pqC.Close(context.Background()), "a Close from elsewhere finishes")
	require.Empty(t, pqC.pins.stuck)
	reg, err := dev.Register(v)
	require.NoError(t, err, "C's registration of the memory is gone")
	require.NoError(t, dev.Deregister(context.Background(), reg))
	require.NoError(t, pqB.Close(context.Background()))
	require.NoError(t, pqA.Close(context.Background()))
}

// TestCloseFromAPassWithAStuckRegistrationFreedSinceIsNotRefused: a registration kept for
// Close (Invalidate while someone else's txreq used it) whose use has ended by then is
// deregistered by a Close inside a pass, which returns nil: nothing is left to wait for.
func TestCloseFromAPassWithAStuckRegistrationFreedSinceIsNotRefused(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, Mapper: testIOMMU(t), Sink: &sdmatest.DiscardSink{}})
	var inner []error
	pqA, pqC, v := closerOnPass(t, dev, &inner)
	tx := new(sdma.TxReq)
	require.NoError(t, tx.Init(0, len(v), nil))
	require.NoError(t, tx.AddKVAddr(dev, v)) // someone else's use of C's registration
	require.Equal(t, 1, pqC.Invalidate(v))
	require.Len(t, pqC.pins.stuck, 1)
	require.NoError(t, tx.Clean())

	a := pattern(4096, 5)
	info, hdr := Message(0, 4096, testTemplate, a)
	require.NoError(t, pqA.Submit(context.Background(), info, &hdr, a))
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	require.Equal(t, []error{nil}, inner)
	require.Empty(t, pqC.pins.stuck)
	require.NoError(t, pqA.Close(context.Background()))
}

// TestCloseFromAPassBehindAnotherClose: while a Close of queue B from another goroutine waits
// for B's request (holding the lock that serialises Closes), a Close of B from queue A's
// Config.Done on the pass that completes that request is ErrInvalid at once, as without the
// other Close. Before, it waited for the other Close, which waited for the rest of the pass the
// caller is in: until its context ended (context.DeadlineExceeded after census.Timeout here),
// for ever with context.Background(). The other Close then returns nil.
func TestCloseFromAPassBehindAnotherClose(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, Mapper: testIOMMU(t), Sink: &sdmatest.DiscardSink{}})
	var inner []error
	pqA, pqB, _ := closerOnPass(t, dev, &inner) // A's Done closes B
	data := pattern(4096, 5)
	info, hdr := Message(0, 4096, testTemplate, data)
	require.NoError(t, pqA.Submit(context.Background(), info, &hdr, data)) // first in the ring
	require.NoError(t, pqB.Submit(context.Background(), info, &hdr, data))
	waiting := make(chan struct{})
	testHooks(pqB).closeIdle = func() { close(waiting) }
	other := make(chan error, 1)
	go func() { other <- pqB.Close(context.Background()) }()
	<-waiting // the other Close holds the lock and waits for B's request
	testHooks(pqB).closeIdle = nil
	processRefused(t, dev.Engine(0), &inner)
	require.ErrorContains(t, inner[0], "the request in slot 0 waits for")
	require.NoError(t, <-other)
	require.Equal(t, CompEntry{Status: Complete}, pqB.Comp(0))
	require.NoError(t, pqA.Close(context.Background()))
}

// TestCloseFromAPassBehindACloseWaitingForARegistration: while a Close of queue C from another
// goroutine waits for C's cached vector's registration, which queue B's packet uses, a Close of
// C from queue A's Config.Done on the pass that completes B's packet is ErrInvalid at once.
// Before, it waited behind the other Close until its context ended (context.DeadlineExceeded
// after census.Timeout here). The other Close then returns nil.
func TestCloseFromAPassBehindACloseWaitingForARegistration(t *testing.T) {
	dev, pqA, pqB, pqC, _, inner := sharedRegOnPass(t)
	eng := dev.Engine(0)
	waiting := make(chan struct{})
	testHooks(pqC).closeWait = func() { close(waiting) }
	other := make(chan error, 1)
	go func() { other <- pqC.Close(context.Background()) }()
	<-waiting // the other Close holds the lock and waits for the registration
	processRefused(t, eng, inner)
	require.NoError(t, <-other)
	require.NoError(t, pqB.Close(context.Background()))
	require.NoError(t, pqA.Close(context.Background()))
}

// TestCloseFromAPassRegistrationRefusalIsPerDevice pins down what Close's doc says of its
// registration refusal: it is per device, not per engine. Queue C's cached vector's registration
// is used by queue B's packet in flight on engine 0; a Close of C from queue A's Config.Done on a
// pass of engine 1, which does not complete B's packet, is refused (ErrInvalid) though it would
// not hang (a registration's uses do not name their engine): the registration is kept, and a
// Close once B's packet completed deregisters it.
func TestCloseFromAPassRegistrationRefusalIsPerDevice(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, Engines: 2, Mapper: testIOMMU(t), Sink: &sdmatest.DiscardSink{}})
	var pqC *PktQ
	var closes []error
	pqA, err := New(Config{Device: dev, Engine: dev.Engine(1), Slots: 1, MTU: 4096, Done: func(int, CompEntry) {
		closes = append(closes, closeBounded(pqC))
	}})
	require.NoError(t, err)
	pqC, err = New(Config{Device: dev, Engine: dev.Engine(0), Slots: 1, MTU: 4096})
	require.NoError(t, err)
	buf := make([]byte, 2*dma.PageSize)
	v := buf[dma.PageSize-addrOf(buf)%dma.PageSize:][:dma.PageSize]
	sendOne(t, pqC, dev, 0, 4096, v)
	pqB, err := New(Config{Device: dev, Engine: dev.Engine(0), Slots: 1, MTU: 4096})
	require.NoError(t, err)
	info, hdr := Message(0, 4096, testTemplate, v)
	require.NoError(t, pqB.Submit(context.Background(), info, &hdr, v)) // uses C's registration, on engine 0
	a := pattern(4096, 5)
	info, hdr = Message(0, 4096, testTemplate, a)
	require.NoError(t, pqA.Submit(context.Background(), info, &hdr, a))
	n, err := dev.Engine(1).Process()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, closes, 1)
	require.ErrorIs(t, closes[0], ErrInvalid, "refused on engine 1's pass, B's packet on engine 0")
	require.NotErrorIs(t, closes[0], context.DeadlineExceeded)
	require.Len(t, pqC.pins.stuck, 1, "the registration is kept for the next Close")
	n, err = dev.Engine(0).Process()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, pqC.Close(context.Background()))
	require.Empty(t, pqC.pins.stuck)
	require.NoError(t, pqB.Close(context.Background()))
	require.NoError(t, pqA.Close(context.Background()))
}
