package fuzz

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestEnvClosesDevice: the device of a fuzz input's env is closed when the input's run ends, so
// that a worker running the target millions of times does not keep a device (an engine goroutine
// and its ring, about 270 KB) per input. It used to leak every one: a few minutes of -fuzz at a
// few hundred inputs a second filled the machine's memory.
func TestEnvClosesDevice(t *testing.T) {
	var e *env
	t.Run("input", func(t *testing.T) { e = newEnv(t) })
	var tx sdma.TxReq
	require.NoError(t, tx.Init(0, 64, nil))
	require.ErrorIs(t, tx.AddKVAddr(e.dev, e.heap[:64]), sdma.ErrClosed)
}
