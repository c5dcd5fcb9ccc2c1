package usdma

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestPinCacheGrowingVectorKeepsOneRegistration: a vector sent again and again at its address,
// a few bytes longer each time, with no request holding its node in between, keeps one
// registration with the device, as the kernel keeps one page array per node (pin_sdma_pages
// replaces node->pages with the grown one). The cache added a registration per growth: 200
// growths within one page left 200 registrations (IOMMU mappings PinLimit does not count) on
// one pinned page, and every packet mapped the piece spanning two of them.
func TestPinCacheGrowingVectorKeepsOneRegistration(t *testing.T) {
	iommu := testIOMMU(t)
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: sink, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev})
	buf := make([]byte, 2*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	copy(buf, pattern(len(buf), 5))
	const growths = 200
	for i := range growths {
		sendOne(t, pq, dev, 0, 4096, buf[base:base+100+7*i])
	}
	st := pq.Stats().Pins
	assert.Equal(t, 1, st.Pages)
	assert.Equal(t, 1, st.Nodes)
	assert.EqualValues(t, growths-1, st.Resized)
	assert.Len(t, streaming(iommu), 1, "one registration for the node")
	pkts, _ := sink.packets()
	require.Len(t, pkts, growths)
	last := buf[base : base+100+7*(growths-1)]
	assert.True(t, bytes.Equal(last, pkts[growths-1][64:64+len(last)]), "the last packet carries its vector")
	require.NoError(t, pq.Close(context.Background()))
	assert.Empty(t, streaming(iommu))
	assert.Zero(t, pq.Stats().Pins.Pages)
}

// registered returns m's live registrations.
func registered(m *dma.IOMMU) []dma.Mapping {
	var out []dma.Mapping
	for _, l := range m.Live() {
		if l.Kind == dma.KindRegistered {
			out = append(out, l)
		}
	}
	return out
}

// TestPinCacheHeldGrowthBoundsRegistrations: a vector that grows while requests in flight hold
// its node gets one more registration per growth up to maxNodeRegs, the bytes past them mapped
// per packet; every packet carries its vector and Close undoes every registration.
func TestPinCacheHeldGrowthBoundsRegistrations(t *testing.T) {
	iommu := testIOMMU(t)
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: sink, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev, Slots: 8})
	buf := make([]byte, 2*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	copy(buf, pattern(len(buf), 9))
	var want []byte
	for s := range 8 {
		v := buf[base : base+100+50*s]
		info, hdr := Message(s, 4096, testTemplate, v)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
		want = append(want, v...)
	}
	assert.Len(t, registered(iommu), maxNodeRegs)
	assert.EqualValues(t, 8-maxNodeRegs, pq.Stats().Pins.Unregistered)
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	var got []byte
	for s := range 8 {
		require.NoError(t, waitSlot(t, pq, s))
	}
	pkts, _ := sink.packets()
	for s, p := range pkts {
		got = append(got, p[64:64+100+50*s]...)
	}
	assert.True(t, bytes.Equal(want, got), "every packet carries its vector")
	assert.Zero(t, dev.Engine(0).Stats().Faults)
	require.NoError(t, pq.Close(context.Background()))
	assert.Empty(t, streaming(iommu))
	assert.Zero(t, pq.Stats().Pins.Pages)
}

// TestPinCacheSharedVectorsUnderFailuresRace: two queues on one running engine send vectors
// drawn from a few addresses with lengths that grow and shrink (hits, resizes, evictions under a
// small PinLimit), two submitters per queue on their own slots, while the engine is stopped and
// started (requests fail with packets unsent and drop nodes the others hold, or complete
// aborted) and the memory is invalidated. Every accepted request ends exactly once, the engine
// never faults (no packet reads memory whose registration went), and after Close nothing is
// pinned or registered.
func TestPinCacheSharedVectorsUnderFailuresRace(t *testing.T) {
	iommu := testIOMMU(t)
	dev := testDevice(t, sdma.Config{Mapper: iommu, Sink: &sdmatest.DiscardSink{}})
	eng := dev.Engine(0)
	buf := make([]byte, 12*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	copy(buf, pattern(len(buf), 1))
	starts := []int{0, 100, 2 * dma.PageSize, 5*dma.PageSize + 7}
	const slots, per = 4, 150
	var pqs [2]*PktQ
	var ends [2]*endCounter
	for q := range pqs {
		pqs[q] = testQueue(t, Config{Device: dev, Slots: slots, Engine: eng, PinLimit: 6, Timeout: time.Millisecond})
		ends[q] = newEndCounter(pqs[q])
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	for q := range pqs {
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(q), uint64(g)))
				for i := range per {
					slot := g*2 + i%2
					v1 := buf[base+starts[rng.IntN(len(starts))]:][:1+rng.IntN(3*dma.PageSize)]
					v2 := buf[base+starts[rng.IntN(len(starts))]:][:1+rng.IntN(2*dma.PageSize)]
					info, hdr := Message(slot, 4096, testTemplate, v1, v2)
					_ = pqs[q].Submit(context.Background(), info, &hdr, v1, v2)
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					if err := pqs[q].Wait(ctx, slot); errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("queue %d slot %d never ended", q, slot)
					}
					cancel()
				}
			}()
		}
	}
	chaos := make(chan struct{})
	go func() {
		defer close(chaos)
		rng := rand.New(rand.NewPCG(7, 7))
		for !stop.Load() {
			switch rng.IntN(4) {
			case 0:
				_ = eng.Stop()
				runtime.Gosched()
				_ = eng.Start()
			case 1:
				off := rng.IntN(len(buf) - 2*dma.PageSize)
				pqs[rng.IntN(2)].Invalidate(buf[off : off+1+rng.IntN(2*dma.PageSize)])
			default:
				runtime.Gosched()
			}
		}
	}()
	wg.Wait()
	stop.Store(true)
	<-chaos
	for !eng.Running() {
		_ = eng.Start()
		runtime.Gosched()
	}
	for q, pq := range pqs {
		require.NoError(t, pq.Close(context.Background()))
		st := pq.Stats()
		assert.EqualValues(t, st.Requests, ends[q].total(), "queue %d: every accepted request ended once", q)
		assert.Equal(t, st.Requests, st.Completed+st.Failed, "queue %d", q)
		for s, states := range ends[q].state {
			for _, x := range states {
				assert.NotEqual(t, Queued, x, "queue %d slot %d", q, s)
			}
		}
		assert.Zero(t, st.Pins.Pages, "queue %d: nothing pinned after Close", q)
		assert.Zero(t, st.Pins.Nodes, "queue %d", q)
		t.Logf("queue %d: %+v requests %d failed %d", q, st.Pins, st.Requests, st.Failed)
	}
	assert.Zero(t, eng.Stats().Faults, "no packet read memory that was not mapped")
	assert.Empty(t, registered(iommu), "every registration undone")
}

// TestPinCacheGrowthOverForeignRegistrationKeepsPrefix: a vector that grows into memory
// registered otherwise (by hand here; another queue's vector alike) keeps its own bytes
// registered, the extra ones mapped per packet, and every packet carries its vector.
func TestPinCacheGrowthOverForeignRegistrationKeepsPrefix(t *testing.T) {
	iommu := testIOMMU(t)
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: sink, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev})
	buf := make([]byte, 3*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	copy(buf, pattern(len(buf), 4))
	sendOne(t, pq, dev, 0, 8192, buf[base:base+dma.PageSize])
	foreign, err := dev.Register(buf[base+dma.PageSize+100 : base+dma.PageSize+200])
	require.NoError(t, err)
	v := buf[base : base+2*dma.PageSize]
	sendOne(t, pq, dev, 0, 8192, v)
	assert.Len(t, registered(iommu), 2, "the node's page registered again beside the foreign registration")
	assert.EqualValues(t, 1, pq.Stats().Pins.Unregistered)
	pkts, _ := sink.packets()
	require.Len(t, pkts, 2)
	assert.True(t, bytes.Equal(v, pkts[1][64:64+len(v)]), "the packet carries its vector")
	assert.Zero(t, dev.Engine(0).Stats().Faults)
	require.NoError(t, pq.Close(context.Background()))
	require.NoError(t, dev.Deregister(context.Background(), foreign))
	assert.Empty(t, streaming(iommu))
}

// TestPinCacheEvictUndoesEveryRegistration: a node that grew while held (two registrations)
// and is then evicted for another vector's pages undoes both.
func TestPinCacheEvictUndoesEveryRegistration(t *testing.T) {
	iommu := testIOMMU(t)
	dev := testDevice(t, sdma.Config{Manual: true, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev, PinLimit: 3})
	buf := make([]byte, 6*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	for s, v := range [][]byte{buf[base : base+100], buf[base : base+2*dma.PageSize]} {
		info, hdr := Message(s, 4096, testTemplate, v)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
	}
	require.Len(t, registered(iommu), 2)
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 0))
	require.NoError(t, waitSlot(t, pq, 1))
	sendOne(t, pq, dev, 0, 4096, buf[base+3*dma.PageSize:base+5*dma.PageSize])
	st := pq.Stats().Pins
	assert.EqualValues(t, 1, st.Evictions)
	assert.Equal(t, 2, st.Pages)
	assert.Len(t, registered(iommu), 1, "the evicted node's two registrations undone")
	require.NoError(t, pq.Close(context.Background()))
	assert.Empty(t, streaming(iommu))
}
