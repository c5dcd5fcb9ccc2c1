package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProgressNilTx: Progress with a nil txreq after a completion pass answers false instead of
// panicking on the nil pointer (the bad-input promise: no panic from a value the caller passed).
func TestProgressNilTx(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	seq := e.HeadSeq()
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, engTestPattern(8, 1), nil)
	require.NoError(t, e.Send(nil, &tx, false))
	_, err := e.Process() // a completion pass: the seqcount moves
	require.NoError(t, err)
	assert.NotPanics(t, func() { assert.False(t, e.Progress(seq, nil)) })
}
