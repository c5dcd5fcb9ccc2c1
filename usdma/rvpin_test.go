package usdma

import (
	"context"
	"testing"
	"time"

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
		sendOne(t, pq, dev, 0, 8192, buf[base+i*dma.PageSize:base+(i+pages)*dma.PageSize])
	}
}

// sendOne sends v as the one-vector request of slot in fragments of frag bytes, runs engine 0 of
// the Manual device dev once and waits for the slot's completion, which must not be an error.
func sendOne(t *testing.T, pq *PktQ, dev *sdma.Device, slot, frag int, v []byte) {
	t.Helper()
	info, hdr := Message(slot, frag, testTemplate, v)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, slot))
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

// TestStatsAndInvalidateWhileCloseWaits: PktQ's doc says Stats and Invalidate may run alongside
// the queue's other calls. Close waits for a cached vector's registration that someone else's
// txreq still uses (the engine must not read unregistered memory); it held the pin cache's lock
// across that wait, so Stats and Invalidate blocked until Close's context ended. They return
// while Close waits, and Close returns once the use is gone.
func TestStatsAndInvalidateWhileCloseWaits(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, Mapper: testIOMMU(t)})
	pq := testQueue(t, Config{Device: dev})
	waiting := make(chan struct{})
	pq.test = &pqTestHooks{closeWait: func() {
		select {
		case <-waiting: // the cleanup's Close, after a failure
		default:
			close(waiting)
		}
	}}
	buf := make([]byte, 2*dma.PageSize)
	v := buf[dma.PageSize-addrOf(buf)%dma.PageSize:][:dma.PageSize]
	info, hdr := Message(0, 4096, testTemplate, v)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 0))
	require.Zero(t, pq.Stats().Pins.Unregistered, "the vector is registered")

	// Someone else's txreq uses the cached vector's registration.
	tx := new(sdma.TxReq)
	require.NoError(t, tx.Init(0, len(v), nil))
	require.NoError(t, tx.AddKVAddr(dev, v))
	defer func() { _ = tx.Clean() }() // on a failure: before the cleanup's Close

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends Close's wait if the test fails first
	closed := make(chan error, 1)
	go func() { closed <- pq.Close(ctx) }()
	select {
	case <-waiting:
	case err := <-closed:
		t.Fatalf("Close returned (%v) without waiting for the registration in use", err)
	}

	// guard bounds a call that must not wait for Close: it fails the test, and ends Close's wait,
	// if the call has not returned after a generous time (it returns at once when right).
	guard := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
			t.Fatalf("%s blocked while Close waits for the registration in use", what)
		}
	}
	var st Stats
	guard("Stats", func() { st = pq.Stats() })
	assert.Zero(t, st.Pins.Nodes)
	assert.EqualValues(t, 1, st.Pins.Invalidations)
	guard("Invalidate", func() { assert.Zero(t, pq.Invalidate(v)) })
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while the registration is in use", err)
	default:
	}

	// Close's context ends: it returns its error and keeps the registration for the next Close,
	// which returns once the use ends.
	cancel()
	require.ErrorIs(t, <-closed, context.Canceled)
	go func() { closed <- pq.Close(context.Background()) }()
	require.NoError(t, tx.Clean()) // the use ends: Close deregisters and returns
	require.NoError(t, <-closed)
	assert.Zero(t, pq.Stats().Pins.Pages)
	assert.Empty(t, pq.pins.stuck)
}
