package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

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
	n, err := eng.Process()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Len(t, inner, 1, "A's Done ran once")
	require.ErrorIs(t, inner[0], ErrInvalid)
	require.NotErrorIs(t, inner[0], context.DeadlineExceeded)
	require.Equal(t, []error{nil}, idle, "the idle queue's Close from the pass")
	require.Equal(t, CompEntry{Status: Complete}, pqB.Comp(0))
	require.ErrorIs(t, pqB.Submit(context.Background(), info, &hdr, data), ErrClosed, "B is closed to new requests")
	require.NoError(t, pqB.Close(context.Background()), "a Close from elsewhere finishes")
	require.NoError(t, pqA.Close(context.Background()))
}
