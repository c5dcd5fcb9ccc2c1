package sdma

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEngineClosedDuringShutdownDrain: from Shutdown's start the engine is Closed (the device is
// closing: Send refuses with ErrClosed and never takes a txreq again), while during the drain it
// still runs what it holds (Running). It read false until Shutdown's Close: a caller told a
// stopped engine of a draining device (Running false, Closed false) that it may run again,
// where no Send would ever succeed (usdma answered ErrNotRunning, "a retry can succeed").
func TestEngineClosedDuringShutdownDrain(t *testing.T) {
	var c completions
	dev, e, release := engTestFullRing(t, &c)
	done := make(chan error)
	go func() { done <- dev.Shutdown(context.Background()) }()
	for e.gate.Load()&gateDraining == 0 {
		time.Sleep(time.Millisecond)
	}
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 6), &c)
	assert.ErrorIs(t, e.Send(nil, &tx, false), ErrClosed, "draining: new sends refused")
	require.NoError(t, tx.Clean())
	assert.True(t, e.Running(), "draining: it still runs what it holds")
	assert.True(t, e.Closed(), "draining: the device is closing, no Send succeeds again")
	close(release)
	require.NoError(t, <-done)
	assert.False(t, e.Running())
	assert.True(t, e.Closed())
}
