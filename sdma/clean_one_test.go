package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// TestCleanOneSoleDescriptor covers clean's case of a packet of one sole kvaddr mapping (taken
// without its loop): the mapping is undone once, at completion and at a Clean before Send; and a
// packet of one descriptor that this packet's adds did not map as a sole mapping (daddr, or an
// AHG head left by InitAHG while soles[0] still holds the handle an earlier packet's mapping
// had, the slot's hint) unmaps nothing.
func TestCleanOneSoleDescriptor(t *testing.T) {
	c := dma.NewCounting(dma.NewDirect())
	dev, err := NewDevice(Config{Mapper: c, Manual: true})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	buf := txTestPattern(64, 7)
	var tx TxReq
	unmaps := func() int { return c.Counts().UnmapSingle }

	require.NoError(t, tx.Init(0, len(buf), nil))
	require.NoError(t, tx.AddKVAddr(dev, buf))
	require.NotZero(t, tx.soles[0], "a sole mapping")
	require.NoError(t, e.Send(nil, &tx, false))
	_, err = e.Process()
	require.NoError(t, err)
	assert.Equal(t, 1, unmaps(), "completion: the mapping undone")
	assert.Zero(t, tx.NumDesc())

	require.NoError(t, tx.Init(0, len(buf), nil))
	require.NoError(t, tx.AddKVAddr(dev, buf))
	require.NoError(t, tx.Clean())
	assert.Equal(t, 2, unmaps(), "Clean before Send: the mapping undone")
	require.NotZero(t, tx.soles[0], "the slot's hint kept")

	// An AHG head of one descriptor (APPLY_UPDATE1: no edit descriptors) that no add mapped:
	// soles[0] is still the earlier mapping's handle.
	w, err := desc.AHGUpdate(0x1234, 1, 0, 16)
	require.NoError(t, err)
	require.NoError(t, tx.InitAHG(FlagUseAHG, 4, AHG{Entry: 3, Words: []uint32{w}, HeaderLen: 16}, nil))
	require.Equal(t, 1, tx.NumDesc(), "the AHG head alone")
	require.NotZero(t, tx.soles[0])
	require.NoError(t, tx.Clean())
	assert.Equal(t, 2, unmaps(), "an AHG head: nothing unmapped")

	// An AHG head and a sole mapping after it: its one mapping undone, the head's stale
	// handle unused.
	require.NoError(t, tx.InitAHG(FlagUseAHG, len(buf), AHG{Entry: 3, Words: []uint32{w}, HeaderLen: 16}, nil))
	require.NoError(t, tx.AddKVAddr(dev, buf))
	require.Equal(t, 2, tx.NumDesc())
	require.NotZero(t, tx.soles[0], "the head's slot: an earlier handle")
	require.NoError(t, tx.Clean())
	assert.Equal(t, 3, unmaps(), "AHG head and a mapping: the mapping undone")

	// A daddr descriptor: the caller's mapping stays.
	addr, err := dev.mapper.MapSingle(buf, dma.ToDevice)
	require.NoError(t, err)
	require.NoError(t, tx.Init(0, len(buf), nil))
	require.NoError(t, tx.AddDAddr(dev, addr, len(buf)))
	require.NoError(t, tx.Clean())
	assert.Equal(t, 3, unmaps(), "daddr: nothing unmapped")
	got, err := dev.mapper.Translate(addr, len(buf), dma.ToDevice)
	require.NoError(t, err, "the caller's mapping still there")
	assert.Equal(t, buf, got)

	assert.Zero(t, c.Counts().Errors)
	assert.Zero(t, dev.UnmapErrors())
}
