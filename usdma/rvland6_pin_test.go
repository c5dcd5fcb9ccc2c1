package usdma

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
)

// TestPinCacheRegrowKeepsRegistrationAnotherPacketUses: a node no request holds grows while a
// packet of another request (another node's vector, inside the node's registered bytes, mapped
// through that registration) is in flight: the undo with a done context is refused, the
// registration stays, the grown bytes get one more, and every packet carries its vector with
// no fault.
func TestPinCacheRegrowKeepsRegistrationAnotherPacketUses(t *testing.T) {
	iommu := testIOMMU(t)
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: sink, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev, Slots: 4})
	buf := make([]byte, 3*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	copy(buf, pattern(len(buf), 6))
	sendOne(t, pq, dev, 0, 4096, buf[base:base+100])
	require.Len(t, registered(iommu), 1)
	inner := buf[base+10 : base+50]
	info, hdr := Message(1, 4096, testTemplate, inner)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, inner))
	grown := buf[base : base+300]
	info, hdr = Message(2, 4096, testTemplate, grown)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, grown))
	assert.Len(t, registered(iommu), 2, "the registration in use kept, the grown bytes one more")
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 1))
	require.NoError(t, waitSlot(t, pq, 2))
	assert.Zero(t, dev.Engine(0).Stats().Faults)
	pkts, _ := sink.packets()
	require.Len(t, pkts, 3)
	assert.True(t, bytes.Equal(inner, pkts[1][64:64+len(inner)]))
	assert.True(t, bytes.Equal(grown, pkts[2][64:64+len(grown)]))
	require.NoError(t, pq.Close(context.Background()))
	assert.Empty(t, streaming(iommu))
}

// TestPinCacheRegrowPartialUndoKeepsBytes: a node of two registrations, no request holding it,
// grows into memory registered otherwise while a packet of another request uses its first
// registration: the undo takes the second only, the Register of the rest fails on the foreign
// registration, and the second's bytes are registered again (as 952d8c8 does when every
// registration was undone) instead of being mapped per packet from then on.
func TestPinCacheRegrowPartialUndoKeepsBytes(t *testing.T) {
	iommu := testIOMMU(t)
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: sink, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev, Slots: 4})
	buf := make([]byte, 3*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	copy(buf, pattern(len(buf), 7))
	for s, v := range [][]byte{buf[base : base+100], buf[base : base+300]} {
		info, hdr := Message(s, 4096, testTemplate, v)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
	}
	require.Len(t, registered(iommu), 2)
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 0))
	require.NoError(t, waitSlot(t, pq, 1))
	inner := buf[base+10 : base+50] // another node, mapped through the first registration
	info, hdr := Message(2, 4096, testTemplate, inner)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, inner))
	foreign, err := dev.Register(buf[base+dma.PageSize+100 : base+dma.PageSize+200])
	require.NoError(t, err)
	grown := buf[base : base+2*dma.PageSize]
	info, hdr = Message(3, 8192, testTemplate, grown)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, grown))
	regs := registered(iommu)
	assert.Len(t, regs, 3, "the first (in use), the second again, the foreign one: %v", regs)
	_, err = dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 2))
	require.NoError(t, waitSlot(t, pq, 3))
	assert.Zero(t, dev.Engine(0).Stats().Faults)
	pkts, _ := sink.packets()
	require.Len(t, pkts, 4)
	assert.True(t, bytes.Equal(grown, pkts[3][64:64+len(grown)]))
	require.NoError(t, pq.Close(context.Background()))
	require.NoError(t, dev.Deregister(context.Background(), foreign))
	assert.Empty(t, streaming(iommu))
}
