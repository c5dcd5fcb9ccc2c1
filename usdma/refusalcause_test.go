package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestRefusalAfterClaimMatchesSdma: a Submit refused after its claim because its engine is not
// running, or its device is closed, matches sdma's error (errors.Is(err, sdma.ErrNotRunning),
// errors.Is(err, sdma.ErrClosed)) through ReqError.Cause, as a Submit that stops after sending
// started does, and still its usdma sentinel. It matched the sentinel alone: the Cause was nil.
func TestRefusalAfterClaimMatchesSdma(t *testing.T) {
	data := pattern(1000, 1)
	info, hdr := Message(0, 256, testTemplate, data)

	t.Run("stopped", func(t *testing.T) {
		dev := testDevice(t, sdma.Config{})
		eng := dev.Engine(0)
		pq := testQueue(t, Config{Device: dev, Engine: eng})
		waitRunning(t, eng)
		require.NoError(t, eng.Stop())
		err := pq.Submit(context.Background(), info, &hdr, data)
		require.ErrorIs(t, err, ErrNotRunning)
		require.ErrorIs(t, err, sdma.ErrNotRunning)
		assert.NotErrorIs(t, err, ErrClosed)
		assert.NotErrorIs(t, err, sdma.ErrClosed)
		var re *ReqError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 0, re.Slot)
		assert.Same(t, sdma.ErrNotRunning, re.Cause)
		assert.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0))
	})

	t.Run("closed", func(t *testing.T) {
		dev := testDevice(t, sdma.Config{})
		pq := testQueue(t, Config{Device: dev})
		require.NoError(t, dev.Close())
		err := pq.Submit(context.Background(), info, &hdr, data)
		require.ErrorIs(t, err, ErrClosed)
		require.ErrorIs(t, err, sdma.ErrClosed)
		assert.NotErrorIs(t, err, ErrNotRunning)
		assert.NotErrorIs(t, err, sdma.ErrNotRunning)
		var re *ReqError
		require.ErrorAs(t, err, &re)
		assert.Same(t, sdma.ErrClosed, re.Cause)
		assert.Equal(t, CompEntry{Status: Error, Errcode: ESHUTDOWN}, pq.Comp(0))
	})

	t.Run("before the claim", func(t *testing.T) { // no Cause: the slot is untouched
		dev := testDevice(t, sdma.Config{})
		pq := testQueue(t, Config{Device: dev})
		bad := info
		bad.NPkts = 0
		err := pq.Submit(context.Background(), bad, &hdr, data)
		var re *ReqError
		require.ErrorAs(t, err, &re)
		assert.Nil(t, re.Cause)
		assert.ErrorIs(t, err, ErrInvalid)
		assert.Equal(t, CompEntry{}, pq.Comp(0))
		assert.NotErrorIs(t, err, sdma.ErrNotRunning)
	})
}
