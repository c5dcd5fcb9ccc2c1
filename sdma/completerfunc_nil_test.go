package sdma

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNilCompleterFuncIsNoCallback: a txreq initialised with a nil CompleterFunc (a nil func in a
// non-nil Completer) completes like one with no callback: nothing panics, no callback error is
// recorded, the txreq is free again. Init stores it as given; CompleterFunc.Complete tests for nil.
func TestNilCompleterFuncIsNoCallback(t *testing.T) {
	dev, cs := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var f CompleterFunc
	require.NotPanics(t, func() { f.Complete(nil, StatusOK) })
	buf := engTestPattern(64, 3)
	for i := range 3 {
		var tx TxReq
		require.NoError(t, tx.Init(0, len(buf), f))
		require.NoError(t, tx.AddKVAddr(dev, buf))
		require.NoError(t, e.Send(nil, &tx, false))
		_, err := e.Process()
		require.NoError(t, err)
		require.NoError(t, e.CallbackError(), "packet %d", i)
		require.Equal(t, txFree, tx.state.Load(), "packet %d", i)
	}
	require.Equal(t, 3, cs.Count())
}
