package sdma

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// TestEndToEnd sends packets built from pages, heap buffers, DMA-pool headers and AHG on two
// engines with their own goroutines, and checks that they arrive byte-identical and in order per
// engine, that each txreq completes once, that the IOMMU's leak report is empty after Close and
// that no goroutine is left.
func TestEndToEnd(t *testing.T) {
	engTestNoLeak(t)
	m := engTestIOMMU(t)
	cs := &captureSink{}
	dev, err := NewDevice(Config{Mapper: m, Engines: 2, RingSize: 64, Sink: cs})
	require.NoError(t, err)
	region, err := dma.AllocPages(4)
	require.NoError(t, err)
	pool, err := dma.NewPool(m, "hdr", 64, 64)
	require.NoError(t, err)
	var blocks []dma.Block

	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c completions
	var ahgHeader [2][]byte // what each engine's AHG entry holds
	want := map[int][][]byte{}
	send := func(e *Engine, tx *TxReq, pkt []byte) {
		t.Helper()
		require.NoError(t, e.SendWait(ctx, tx))
		want[e.Index()] = append(want[e.Index()], pkt)
	}
	page0, err := region.Page(0)
	require.NoError(t, err)
	pageBytes := page0.Bytes()
	for i := range pageBytes {
		pageBytes[i] = byte(i * 13)
	}
	for r := 0; r < rounds; r++ {
		e := dev.Engine(r % 2)
		seed := byte(r)

		// Heap buffers: header + payload.
		hdr, payload := engTestPattern(24, seed), engTestPattern(1+r%300, seed+1)
		tx := new(TxReq)
		require.NoError(t, tx.Init(0, len(hdr)+len(payload), &c))
		require.NoError(t, tx.AddKVAddr(dev, hdr))
		require.NoError(t, tx.AddKVAddr(dev, payload))
		send(e, tx, padded(append(append([]byte(nil), hdr...), payload...)))

		// A DMA-pool header (daddr) + a page fragment.
		blk, err := pool.Alloc()
		require.NoError(t, err)
		blocks = append(blocks, blk)
		copy(blk.Bytes, engTestPattern(40, seed+2))
		off, n := (r*37)%2048, 1+(r*53)%2000
		tx = new(TxReq)
		require.NoError(t, tx.Init(0, 40+n, &c))
		require.NoError(t, tx.AddDAddr(dev, blk.Addr, 40))
		require.NoError(t, tx.AddPage(dev, page0, off, n))
		send(e, tx, padded(append(append([]byte(nil), blk.Bytes[:40]...), pageBytes[off:off+n]...)))

		// AHG: every 10th round stores a header (COPY), the others build from it.
		entry := r % 2 // one entry per engine here
		if r < 2 || r%10 == 0 {
			ahdr := engTestPattern(32, seed+3)
			tx = new(TxReq)
			require.NoError(t, tx.InitAHG(FlagAHGCopy, len(ahdr)+8, AHG{Entry: entry}, &c))
			require.NoError(t, tx.AddKVAddr(dev, ahdr))
			require.NoError(t, tx.AddKVAddr(dev, payload[:min(8, len(payload))]))
			if len(payload) < 8 {
				require.NoError(t, tx.AddKVAddr(dev, make([]byte, 8-len(payload))))
			}
			pkt := append(append([]byte(nil), ahdr...), payload[:min(8, len(payload))]...)
			pkt = append(pkt, make([]byte, 8-min(8, len(payload)))...)
			send(e, tx, pkt)
			ahgHeader[e.Index()] = ahdr
		}
		w, err := desc.AHGUpdate(uint16(r), 1, 0, 16)
		require.NoError(t, err)
		tx = new(TxReq)
		require.NoError(t, tx.InitAHG(FlagUseAHG, len(payload), AHG{Entry: entry, Words: []uint32{w}, HeaderLen: 32}, &c))
		require.NoError(t, tx.AddKVAddr(dev, payload))
		h := append([]byte(nil), ahgHeader[e.Index()]...)
		h[4], h[5] = byte(r), byte(r>>8)
		send(e, tx, append(h, padded(payload)...))
	}
	total := len(want[0]) + len(want[1])
	require.Eventually(t, func() bool { return c.n.Load() == int64(total) }, 30*time.Second, time.Millisecond)
	require.NoError(t, dev.Close())
	assert.Zero(t, c.dup.Load())
	for _, st := range c.seen {
		assert.Equal(t, StatusOK, st)
	}
	for i := 0; i < 2; i++ {
		got := cs.Packets(i)
		require.Equal(t, len(want[i]), len(got), "engine %d", i)
		for k := range got {
			require.Equal(t, want[i][k], got[k], "engine %d packet %d", i, k)
		}
	}
	for _, b := range blocks {
		require.NoError(t, pool.Free(b))
	}
	require.NoError(t, pool.Destroy())
	require.NoError(t, region.Close())
	assert.Empty(t, m.Live(), "IOMMU leak report")
	assert.Zero(t, m.Faults())
}
