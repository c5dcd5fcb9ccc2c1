package usdma

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestSubmitCutByContextMatchesIt: a Submit whose context ends while it waits for ring room
// returns an error that matches the context's (errors.Is(err, context.Canceled)), as Wait,
// Close, sdma's SendWait and verbs' Send do, and still ErrFault with the slot; the slot ends
// ERROR once the packets in the ring complete. It used to match only ErrFault: the context's
// error was in the text alone, so a caller could not tell its own cancellation from a request
// that failed on the device.
func TestSubmitCutByContextMatchesIt(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, RingSize: 64})
	pq := testQueue(t, Config{Device: dev, Timeout: time.Hour}) // parked until the cancel: no timeout's retry
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := submitUntilDeferred(t, ctx, pq, dev.Engine(0), pattern(64*4096, 1))
	cancel()
	err := submitResult(t, pq, errc)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, ErrFault)
	var re *ReqError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 0, re.Slot)
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
	drive(t, dev.Engine(0))
	var ce *CompError
	require.ErrorAs(t, waitSlot(t, pq, 0), &ce)
	assert.EqualValues(t, EFAULT, ce.Errcode)
	require.ErrorIs(t, ce, context.Canceled) // the CompError's cause is the context's too
}

// TestSubmitOnClosedDeviceIsErrClosed: a Submit on a queue whose device is closed is refused with
// ErrClosed and its slot ends ERROR with ESHUTDOWN, as a request whose device closes while it
// sends. It got ErrNotRunning and ECOMM, the answer for an engine that is halted or stopped and
// may run again: a caller that retries on ErrNotRunning (as the fault soak does) retries for ever.
func TestSubmitOnClosedDeviceIsErrClosed(t *testing.T) {
	dev := testDevice(t, sdma.Config{})
	pq := testQueue(t, Config{Device: dev})
	require.NoError(t, dev.Close())
	data := pattern(1000, 1)
	info, hdr := Message(0, 256, testTemplate, data)
	err := pq.Submit(context.Background(), info, &hdr, data)
	require.ErrorIs(t, err, ErrClosed)
	require.NotErrorIs(t, err, ErrNotRunning)
	assert.Equal(t, CompEntry{Status: Error, Errcode: ESHUTDOWN}, pq.Comp(0))
}
