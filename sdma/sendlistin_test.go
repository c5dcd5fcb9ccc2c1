package sdma

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSendListInRefusesAResetEpoch: SendListIn with an epoch a sw clean ended refuses the list
// with ErrReset, bare, and changes nothing: whether the clean came before the call (Stop and
// Start) or between its epoch check and its first reservation (a halt and its recovery in the
// admitted hook). Every txreq stays on the list, ready, and goes whole into the ring with the
// new epoch: 40 OK completions, in order, each once, on the wire in order.
func TestSendListInRefusesAResetEpoch(t *testing.T) {
	for _, where := range []string{"before", "admitted"} {
		t.Run(where, func(t *testing.T) {
			dev, sink := engTestDevice(t, Config{Manual: true, RingSize: 128})
			e := dev.Engine(0)
			var c completions
			txs, l := sendListOf40(t, dev, &c)
			epoch := e.Epoch()
			if where == "before" {
				require.NoError(t, e.Stop())
				require.NoError(t, e.Start())
			} else {
				halted := false
				e.test = &engineTestHooks{admitted: func() {
					if !halted {
						halted = true
						require.NoError(t, e.injectHalt(CauseHalt))
					}
				}}
			}
			n, err := e.SendListIn(nil, l, epoch)
			e.test = nil
			require.Equal(t, ErrReset, err, "bare")
			require.Zero(t, n)
			require.Greater(t, e.Epoch(), epoch)
			require.Equal(t, 40, l.Len(), "nothing taken off the list")
			for i := range txs {
				require.Same(t, &txs[i], l.Front())
				l.PopFront()
				l.PushBack(&txs[i])
			}
			require.True(t, e.Empty(), "nothing of the list in the ring")
			n, err = e.SendListIn(nil, l, e.Epoch())
			require.NoError(t, err)
			require.Equal(t, 40, n)
			requireSentInOrder(t, e, &c, txs, sink)
		})
	}
}

// TestSendListInBadArguments: a nil list and an epoch the engine never had are ErrInvalid, with
// nothing sent.
func TestSendListInBadArguments(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true})
	e := dev.Engine(0)
	_, err := e.SendListIn(nil, nil, e.Epoch())
	require.ErrorIs(t, err, ErrInvalid)
	var c completions
	_, l := sendListOf40(t, dev, &c)
	n, err := e.SendListIn(nil, l, e.Epoch()+1)
	require.ErrorIs(t, err, ErrInvalid)
	require.False(t, errors.Is(err, ErrReset))
	require.Zero(t, n)
	require.Equal(t, 40, l.Len())
}

// requireSentInOrder drains e and requires every txreq of txs completed StatusOK, once, and on
// the wire of engine 0 in order (byte 0 the index, as sendListOf40 builds them).
func requireSentInOrder(t *testing.T, e *Engine, c *completions, txs []TxReq, sink *captureSink) {
	t.Helper()
	for i, st := range sendListDrained(t, e, c, txs) {
		require.Equal(t, StatusOK, st, "txreq %d", i)
	}
	require.Zero(t, c.dup.Load())
	sink.mu.Lock()
	defer sink.mu.Unlock()
	require.Len(t, sink.pkts[0], len(txs))
	for i, p := range sink.pkts[0] {
		require.EqualValues(t, i, p[0])
	}
}

// TestSendListInAfterClose: on a closed device SendListIn says ErrClosed, as SendList, also with
// an epoch from before the Close (whose sw clean reset the ring), not ErrReset.
func TestSendListInAfterClose(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true})
	e := dev.Engine(0)
	var c completions
	_, l := sendListOf40(t, dev, &c)
	epoch := e.Epoch()
	require.NoError(t, dev.Close())
	require.Greater(t, e.Epoch(), epoch)
	for _, ep := range []uint64{epoch, e.Epoch()} {
		n, err := e.SendListIn(nil, l, ep)
		require.ErrorIs(t, err, ErrClosed, "epoch %d", ep)
		require.False(t, errors.Is(err, ErrReset))
		require.Zero(t, n)
	}
}
