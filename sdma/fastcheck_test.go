package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFastChecksAgree: the inlined common-case tests of the send and add paths (sendable,
// addable) never pass a txreq that the full checks (check, checkAdd) refuse, in every state a
// txreq can be in, and pass the ordinary ready or building txreq.
func TestFastChecksAgree(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	other, _ := engTestDevice(t, Config{Manual: true})
	e := dev.Engine(0)
	buf := txTestPattern(4096, 1)
	build := func(n, added int, d *Device) *TxReq {
		tx := new(TxReq)
		require.NoError(t, tx.Init(0, n, nil))
		for added > 0 {
			k := min(added, 100)
			require.NoError(t, tx.AddKVAddr(d, buf[:k]))
			added -= k
		}
		return tx
	}
	inFlight := build(64, 64, dev)
	inFlight.state.Store(txInFlight)
	cleaned := build(64, 64, dev)
	require.NoError(t, cleaned.Clean())
	coalescing := build(4000, 0, dev)
	for range 63 {
		require.NoError(t, coalescing.AddKVAddr(dev, buf[:1]))
	}
	require.NoError(t, coalescing.AddKVAddr(dev, buf[:1])) // past 63: coalescing
	require.True(t, coalescing.coalescing)
	pastRing := build(63, 0, dev) // 63 one-byte fragments and the pad: 64 descriptors
	for range 63 {
		require.NoError(t, pastRing.AddKVAddr(dev, buf[:1]))
	}
	require.Equal(t, 64, pastRing.NumDesc())
	cases := map[string]*TxReq{
		"past the ring": pastRing,
		"nil":           nil,
		"uninitialised": new(TxReq),
		"initialised":   build(64, 0, dev),
		"half built":    build(64, 32, dev),
		"closed":        build(64, 64, dev),
		"other device":  build(64, 64, other),
		"in flight":     inFlight,
		"cleaned":       cleaned,
		"coalescing":    coalescing,
	}
	for name, tx := range cases {
		if e.sendable(tx) && e.fits(tx) {
			assert.NoError(t, e.check(tx), "%s: sendable and fits but check refuses", name)
		}
		if tx == nil {
			continue
		}
		for _, d := range []*Device{nil, dev, other} {
			for _, n := range []int{-1, 0, 1, 32, 64, 65, 4000} {
				saved := tx.dev
				if tx.addable(d, n) {
					tx.dev = saved
					assert.NoError(t, tx.checkAdd("test", d, n), "%s: addable(%d) but checkAdd refuses", name, n)
				}
				tx.dev = saved
			}
		}
	}
	assert.True(t, e.sendable(cases["closed"]), "a closed txreq is sendable")
	assert.False(t, e.sendable(cases["other device"]), "another device's txreq")
	assert.False(t, e.fits(cases["past the ring"]), "64 descriptors in a ring of 64")
	assert.True(t, cases["half built"].addable(dev, 32))
	assert.False(t, cases["half built"].addable(dev, 33))
	assert.False(t, cases["half built"].addable(other, 1))
}
