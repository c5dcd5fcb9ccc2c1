package sdma

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
)

// nilCtx is the bad input of the tests below: a nil context.Context (a variable, so that vet's
// and staticcheck's nil-context checks do not flag the literal).
var nilCtx context.Context

// TestNilContextRefused: every sdma entry point that takes a context refuses a nil one with
// ErrInvalid (dma.ErrInvalid for Deregister, whose errors are the mapper's), whether or not it
// would have had to wait, and changes nothing. Before, each of them panicked with a nil pointer
// dereference, but only when it had to wait (a full ring, a use or a txreq in flight, a busy
// engine): a bad input that passed every quiet test.
func TestNilContextRefused(t *testing.T) {
	t.Run("SendWait", func(t *testing.T) {
		dev, cs := engTestDevice(t, Config{Manual: true, RingSize: 64})
		e := dev.Engine(0)
		buf := txTestPattern(64, 1)
		var tx TxReq
		sent := 0
		for _, full := range []bool{false, true} {
			if full {
				for {
					var f TxReq
					require.NoError(t, f.Init(0, len(buf), nil))
					require.NoError(t, f.AddKVAddr(dev, buf))
					if err := e.Send(nil, &f, false); err != nil {
						require.ErrorIs(t, err, ErrBusy)
						require.NoError(t, f.Clean())
						break
					}
					sent++
				}
			}
			require.NoError(t, tx.Init(0, len(buf), nil))
			require.NoError(t, tx.AddKVAddr(dev, buf))
			err := e.SendWait(nilCtx, &tx)
			require.ErrorIs(t, err, ErrInvalid, "full=%v", full)
			require.NoError(t, tx.Clean(), "full=%v: the refused txreq is still the caller's", full)
		}
		_, err := e.Process()
		require.NoError(t, err)
		e.Poll()
		require.Equal(t, sent, cs.Count(), "every packet sent before the refusals is delivered, no other")
	})
	t.Run("Shutdown", func(t *testing.T) {
		dev, _ := engTestDevice(t, Config{Manual: true})
		require.ErrorIs(t, dev.Shutdown(nilCtx), ErrInvalid)
		var tx TxReq
		buf := txTestPattern(64, 2)
		require.NoError(t, tx.Init(0, len(buf), nil))
		require.NoError(t, tx.AddKVAddr(dev, buf))
		require.NoError(t, dev.Engine(0).Send(nil, &tx, false), "the device is still open")
		require.NoError(t, dev.Shutdown(context.Background()))
	})
	t.Run("IOWait.Drain", func(t *testing.T) {
		dev, _ := engTestDevice(t, Config{Manual: true})
		e := dev.Engine(0)
		var w IOWait
		w.Init(nil, nil, nil)
		require.ErrorIs(t, w.Drain(nilCtx), ErrInvalid, "idle")
		var tx TxReq
		buf := txTestPattern(64, 3)
		require.NoError(t, tx.Init(0, len(buf), nil))
		require.NoError(t, tx.AddKVAddr(dev, buf))
		require.NoError(t, e.Send(&w, &tx, false))
		require.ErrorIs(t, w.Drain(nilCtx), ErrInvalid, "busy")
		_, err := e.Process()
		require.NoError(t, err)
		e.Poll()
		require.NoError(t, w.Drain(context.Background()))
	})
	t.Run("Deregister", func(t *testing.T) {
		dev, _ := engTestDevice(t, Config{Manual: true})
		mem := txTestPattern(4096, 4)
		r, err := dev.Register(mem)
		require.NoError(t, err)
		var tx TxReq
		require.NoError(t, tx.Init(0, 64, nil))
		require.NoError(t, tx.AddKVAddr(dev, mem[:64])) // holds a use of r
		err = dev.Deregister(nilCtx, r)
		require.True(t, errors.Is(err, dma.ErrInvalid), "Deregister(nil ctx) = %v", err)
		require.NoError(t, tx.Clean())
		require.NoError(t, dev.Deregister(context.Background(), r))
	})
}
