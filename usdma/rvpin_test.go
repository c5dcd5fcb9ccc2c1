package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
)

// sendDistinctVectors sends n one-vector requests, one at a time, each of a vector of pages
// pages at its own address (vector i starts i pages into one buffer, so the vectors overlap and
// the buffer stays small): n distinct pin-cache nodes of pages pages each.
func sendDistinctVectors(t *testing.T, pq *PktQ, dev *sdma.Device, n, pages int) {
	t.Helper()
	buf := make([]byte, (n+pages+1)*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	for i := range n {
		v := buf[base+i*dma.PageSize : base+(i+pages)*dma.PageSize]
		info, hdr := Message(0, 8192, testTemplate, v)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
		_, err := dev.Engine(0).Process()
		require.NoError(t, err)
		require.NoError(t, waitSlot(t, pq, 0))
	}
}

// TestPinLimitDefault: a zero Config.PinLimit is the kernel's default cache size, 256 MB of
// pages (hfi1: user_pages.c's cache_size module parameter, 256, turned into
// cache_size * 1024 * 1024 / PAGE_SIZE pages by hfi1_can_pin_pages): a queue that sends more
// distinct vectors than that keeps at most that many pages pinned, evicting the least recently
// used. Zero meant no limit: the cache grew with every distinct vector (257 one-MiB vectors:
// 65792 pages pinned, no eviction).
func TestPinLimitDefault(t *testing.T) {
	const kernelPages = 256 * 1024 * 1024 / dma.PageSize
	require.Equal(t, kernelPages, DefaultPinLimit)
	const vecPages = 256 // 1 MiB
	n := kernelPages/vecPages + 1

	dev := testDevice(t, sdma.Config{Manual: true})
	pq := testQueue(t, Config{Device: dev})
	sendDistinctVectors(t, pq, dev, n, vecPages)
	st := pq.Stats().Pins
	assert.LessOrEqual(t, st.Pages, kernelPages)
	assert.EqualValues(t, n, st.Misses)
	assert.EqualValues(t, 1, st.Evictions, "the LRU vector, 256 pages: the new vector's count")
	assert.Equal(t, n-1, st.Nodes)
	assert.Zero(t, st.OverLimit)

	// NoPinLimit asks for no limit: every vector stays pinned.
	dev = testDevice(t, sdma.Config{Manual: true})
	pq = testQueue(t, Config{Device: dev, PinLimit: NoPinLimit})
	sendDistinctVectors(t, pq, dev, n, vecPages)
	st = pq.Stats().Pins
	assert.Equal(t, n*vecPages, st.Pages)
	assert.Equal(t, n, st.Nodes)
	assert.Zero(t, st.Evictions)
	assert.Zero(t, st.OverLimit)
}
