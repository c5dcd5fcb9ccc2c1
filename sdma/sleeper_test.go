package sdma_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestSleeperWrappedAgain: a sleeper's answer is matched with errors.Is, so a sleeper that wraps
// ErrAgain (with context, as Go code does) is a retry, not a failed send: Send goes on, the
// txreq is submitted, and the ring-full counter does not count it.
func TestSleeperWrappedAgain(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	buf := make([]byte, 8)
	fill := make([]sdma.TxReq, 63)
	for i := range fill {
		require.NoError(t, fill[i].Init(0, len(buf), nil))
		require.NoError(t, fill[i].AddKVAddr(dev, buf))
		require.NoError(t, e.Send(nil, &fill[i], true))
	}
	require.Zero(t, e.DescqFreeCnt())
	sleeps := 0
	var w sdma.IOWait
	w.Init(func(e *sdma.Engine, _ *sdma.IOWait, _ *sdma.TxReq, _ uint32, _ bool) error {
		sleeps++
		if _, err := e.Process(); err != nil { // the hardware and a completion pass free the ring
			return err
		}
		e.Poll()
		return fmt.Errorf("sleeper: progress was made: %w", sdma.ErrAgain)
	}, func(*sdma.IOWait, int) {}, nil)
	var tx sdma.TxReq
	require.NoError(t, tx.Init(0, len(buf), nil))
	require.NoError(t, tx.AddKVAddr(dev, buf))
	before := e.Stats().RingFull
	require.NoError(t, e.Send(&w, &tx, true), "a wrapped ErrAgain is a retry")
	require.Equal(t, 1, sleeps)
	require.Equal(t, before, e.Stats().RingFull, "a retry is not a full ring")
	_, err = e.Process()
	require.NoError(t, err)
	e.Poll()
	require.True(t, e.Empty())
}
