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

// TestCompEntryNotTornAcrossReuse: Comp reads an entry's status and then its errcode, without a
// lock, while the slot may be reused between the two loads. set_comp_state writes the errcode
// only for ERROR, so a poller that read ERROR finds that request's errcode (or a later ERROR's),
// never 0, and CompEntry promises Errcode 0 for every other state. The queue used to store
// errcode 0 with QUEUED and COMPLETE: a poller that read ERROR and then the errcode of the slot's
// next request saw {ERROR 0}, and one that read COMPLETE and then a next request's errcode saw
// {COMPLETE 70}. A test hook runs a whole request on the slot between the two loads.
func TestCompEntryNotTornAcrossReuse(t *testing.T) {
	dev := testDevice(t, sdma.Config{})
	eng := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Slots: 1})
	data := pattern(100, 1)
	info, hdr := Message(0, 4096, testTemplate, data)
	good := func() {
		waitRunning(t, eng)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
		require.NoError(t, waitSlot(t, pq, 0))
	}
	bad := func() { // the engine is stopped: ECOMM, the slot ends ERROR in Submit
		require.NoError(t, eng.Stop())
		require.ErrorIs(t, pq.Submit(context.Background(), info, &hdr, data), ErrNotRunning)
		require.NoError(t, eng.Start())
	}
	var window func()
	testHooks(pq).compWindow = func() {
		if w := window; w != nil {
			window = nil
			w()
		}
	}

	bad()
	require.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0))
	window = good
	assert.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0), "ERROR read, the slot reused and COMPLETE before the errcode load")
	assert.Equal(t, CompEntry{Status: Complete}, pq.Comp(0))
	window = bad
	assert.Equal(t, CompEntry{Status: Complete}, pq.Comp(0), "COMPLETE read, the slot reused and ERROR before the errcode load")
	assert.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0))
	window = good
	assert.Equal(t, CompEntry{Status: Error, Errcode: ECOMM}, pq.Comp(0))
	waitRunning(t, eng)
}

// TestTemplateLongerThanData: a one-packet request whose template asks for more payload than
// the data holds (lrh[2] for 4096 bytes, 3000 bytes of data) is refused with ErrInvalid and
// changes nothing: the kernel builds packet 0 for the template's length and its payload walk
// goes past the last vector (mainline; before the 2023 multi-iovec fix, tx->tlen was left over
// and sdma_send_txlist failed it -EINVAL, the slot ERROR, EINVAL). Submit
// used to clamp the template to the data and send it. Only the padding of a length that is not
// a multiple of 4 is taken (the template's length rounded up to a dword), as doc.go says.
func TestTemplateLongerThanData(t *testing.T) {
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: sink})
	pq := testQueue(t, Config{Device: dev, Slots: 2})
	data := pattern(3000, 1)
	info, _ := Message(0, 4096, testTemplate, data)
	long, _ := testTemplate.Header(4096)
	err := pq.Submit(context.Background(), info, &long, data)
	require.ErrorIs(t, err, ErrInvalid, "template of 4096 bytes for 3000")
	assert.Equal(t, CompEntry{}, pq.Comp(0))
	long, _ = testTemplate.Header(3004)
	require.ErrorIs(t, pq.Submit(context.Background(), info, &long, data), ErrInvalid, "template of 3004 bytes for 3000")

	odd := data[:2999]
	info, hdr := Message(1, 4096, testTemplate, odd) // template 3000 bytes: 2999 padded
	require.Equal(t, lrhLen(3000), templateLRH(&hdr))
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, odd))
	_, err = dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 1))
	pkts, _ := sink.packets()
	require.Len(t, pkts, 1)
	assert.Equal(t, 64+3000, len(pkts[0]))
}

// TestPinCacheEvictsNewVectorsPages: when a vector does not fit under the limit, the kernel
// evicts unused nodes until the new vector's page count is cleared (sdma_cache_evict(pq,
// npages): evict_data.target = npages), not just the excess over the limit, and looks again
// while that much was cleared. Two cached one-page vectors under a limit of 3 and a new
// two-page vector (excess 1): both are evicted (cleared 2 = npages). The cache evicted one.
func TestPinCacheEvictsNewVectorsPages(t *testing.T) {
	iommu := testIOMMU(t)
	dev := testDevice(t, sdma.Config{Manual: true, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev, PinLimit: 3})
	buf := make([]byte, 6*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	pages := func(i, n int) []byte { return buf[base+i*dma.PageSize : base+(i+n)*dma.PageSize] }
	for slot, v := range [][]byte{pages(0, 1), pages(1, 1), pages(2, 2)} {
		sendOne(t, pq, dev, slot, 4096, v)
	}
	st := pq.Stats().Pins
	assert.EqualValues(t, 2, st.Evictions, "target: the new vector's 2 pages")
	assert.Equal(t, 2, st.Pages)
	assert.Equal(t, 1, st.Nodes)
	assert.Zero(t, st.OverLimit)
}

// TestPinCacheSameAddressOtherLength: the kernel finds a vector's node by its address
// (sdma_rb_filter) and keeps one node per address: hfi1_mmu_rb_remove_unless_exact hits only
// the exact (address, length) pair, and extracts a node of the same address and another length,
// which pin_vector_pages keeps and grows by the extra pages only (pq->n_locked too). The cache
// kept a second node for the same address, counting its pages twice against PinLimit (Pages 3
// for a one-page then a two-page vector at one address, where n_locked is 2).
// TestPinCacheMatchesKernelModel checks the rest of the kernel's way with such a node.
func TestPinCacheSameAddressOtherLength(t *testing.T) {
	iommu := testIOMMU(t)
	dev := testDevice(t, sdma.Config{Manual: true, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev})
	buf := make([]byte, 4*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	for slot, v := range [][]byte{buf[base : base+dma.PageSize], buf[base : base+2*dma.PageSize], buf[base : base+2*dma.PageSize]} {
		sendOne(t, pq, dev, slot, 4096, v)
	}
	st := pq.Stats().Pins
	assert.Equal(t, 1, st.Nodes, "one node per address")
	assert.Equal(t, 2, st.Pages)
	assert.EqualValues(t, 1, st.Misses)
	assert.EqualValues(t, 1, st.Resized, "the one-page node grown to two")
	assert.EqualValues(t, 1, st.Hits)
	assert.Zero(t, st.Unregistered, "the second page is registered as the node's second registration")
	require.NoError(t, pq.Close(context.Background()))
	assert.Empty(t, streaming(iommu))
}

// TestNotDeferredOnceUnqueued: State is DEFERRED only while the queue is parked on an engine's
// wait list (or until its wakeup). When a deferred Submit's context ends, the queue leaves the
// wait list (flush_pq_iowait) and Submit returns; the state stayed DEFERRED with the queue
// parked nowhere and nothing to wake it, until the next Submit.
func TestNotDeferredOnceUnqueued(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, RingSize: 64})
	eng := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Slots: 1, Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := submitUntilDeferred(t, ctx, pq, eng, pattern(64*4096, 5))
	cancel()
	require.Error(t, submitResult(t, pq, errc))
	assert.False(t, eng.Waiting(&pq.busy), "off the wait list")
	assert.Equal(t, Active.String(), pq.State().String(), "not parked: not DEFERRED")
	drive(t, eng)
	var ce *CompError
	require.ErrorAs(t, waitSlot(t, pq, 0), &ce)
}
