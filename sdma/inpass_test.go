package sdma_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// inPassSeen sends one packet on dev's engine 0 whose completion records what InPass of each
// engine says there, runs the completion (process, on a Manual device; else the engine's
// goroutine), and returns what it saw.
func inPassSeen(t *testing.T, dev *sdma.Device, process func()) []bool {
	t.Helper()
	seen := make(chan []bool, 1)
	var tx sdma.TxReq
	payload := []byte("data")
	require.NoError(t, tx.Init(0, len(payload), sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) {
		var s []bool
		for i := range dev.NumEngines() {
			s = append(s, dev.Engine(i).InPass())
		}
		seen <- s
	})))
	require.NoError(t, tx.AddBytes(dev, payload))
	require.NoError(t, dev.Engine(0).Send(nil, &tx, false))
	process()
	return <-seen
}

// TestEngineInPass: InPass is true inside a callback that a pass of the engine runs, on the
// engine's goroutine or on a Manual engine's Process caller, and false for another engine and
// outside any pass (the layer above's Close tells from it a wait that would wait for itself).
func TestEngineInPass(t *testing.T) {
	t.Run("manual", func(t *testing.T) {
		dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Manual: true})
		require.NoError(t, err)
		defer dev.Close()
		seen := inPassSeen(t, dev, func() {
			n, err := dev.Engine(0).Process()
			require.NoError(t, err)
			require.Equal(t, 1, n)
		})
		require.Equal(t, []bool{true, false}, seen)
		require.False(t, dev.Engine(0).InPass(), "outside the pass")
	})
	t.Run("goroutine", func(t *testing.T) {
		dev, err := sdma.NewDevice(sdma.Config{Engines: 2})
		require.NoError(t, err)
		defer dev.Close()
		require.Equal(t, []bool{true, false}, inPassSeen(t, dev, func() {}))
		require.False(t, dev.Engine(0).InPass(), "outside the pass")
	})
}

// ExampleEngine_InPass: a completion callback that must not wait for its own engine's
// completions (they come after it returns) asks InPass first.
func ExampleEngine_InPass() {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	var tx sdma.TxReq
	payload := []byte("data")
	_ = tx.Init(0, len(payload), sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) {
		fmt.Println("in the completion: in a pass of engine 0:", e.InPass())
	}))
	_ = tx.AddBytes(dev, payload)
	_ = e.Send(nil, &tx, false)
	_, _ = e.Process()
	fmt.Println("after Process: in a pass of engine 0:", e.InPass())
	// Output:
	// in the completion: in a pass of engine 0: true
	// after Process: in a pass of engine 0: false
}
