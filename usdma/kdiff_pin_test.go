package usdma

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
)

// kpinNode is struct sdma_mmu_node of the kernel model: rb.addr, rb.len, npages, refcount.
type kpinNode struct {
	addr     uintptr
	len      int
	npages   int
	refcount int
}

// kpinCache is a literal model of user_sdma.c's pinned-page cache before pin_system.c (the
// design pin.go ports: pin_vector_pages, pin_sdma_pages, sdma_cache_evict, sdma_rb_evict,
// sdma_rb_insert, user_sdma_free_request) over mmu_rb.c with the LRU fix (insert at the tail,
// an exact hit moved to the tail, eviction from the head) and user_pages.c's
// hfi1_can_pin_pages cache check. Kernel lines are quoted where they decide.
type kpinCache struct {
	limit     int                   // cache_size in pages
	tree      map[uintptr]*kpinNode // sdma_rb_filter: one node per address
	lru       []*kpinNode           // handler->lru_list, head (least recent) first
	nLocked   int                   // pq->n_locked
	evictions int                   // nodes sdma_rb_evict took
	overLimit int                   // pins done although hfi1_can_pin_pages said no
}

// canPin is hfi1_can_pin_pages' cache check: "return ((nlocked + npages) <= size)".
func (k *kpinCache) canPin(npages int) bool {
	return k.limit == NoPinLimit || k.nLocked+npages <= k.limit
}

func (k *kpinCache) lruDel(n *kpinNode) {
	for i, x := range k.lru {
		if x == n {
			k.lru = append(k.lru[:i], k.lru[i+1:]...)
			return
		}
	}
	panic("not on the LRU list")
}

// evict is sdma_cache_evict → hfi1_mmu_rb_evict → sdma_rb_evict: from the list's head, skip
// "if (atomic_read(&node->refcount)) return 0;", else "evict_data->cleared += node->npages;
// if (evict_data->cleared >= evict_data->target) *stop = true; return 1;", and sdma_rb_remove
// unpins (unpin_sdma_pages: n_locked -= npages).
func (k *kpinCache) evict(target int) int {
	cleared := 0
	for i := 0; i < len(k.lru); {
		n := k.lru[i]
		if n.refcount != 0 {
			i++
			continue
		}
		cleared += n.npages
		k.lru = append(k.lru[:i], k.lru[i+1:]...)
		delete(k.tree, n.addr)
		k.nLocked -= n.npages
		k.evictions++
		if cleared >= target {
			break
		}
	}
	return cleared
}

// get is pin_vector_pages.
func (k *kpinCache) get(addr uintptr, length int) *kpinNode {
	// hfi1_mmu_rb_remove_unless_exact: "if (node->addr == addr && node->len == len) {
	// list_move_tail(...); goto unlock; }" else extract it from the tree and the list.
	node := k.tree[addr]
	if node != nil && node.len == length {
		k.lruDel(node)
		k.lru = append(k.lru, node)
		node.refcount++ // "if (!extracted) { atomic_inc(&node->refcount); ... return 0; }"
		return node
	}
	if node != nil {
		delete(k.tree, addr)
		k.lruDel(node)
	} else {
		node = &kpinNode{addr: addr} // kzalloc, "node->rb.addr = iov_base", refcount 0
	}
	npages := numPages(addr, length) // num_user_pages
	if node.npages < npages {
		// pin_sdma_pages: "npages -= node->npages; retry: if (!hfi1_can_pin_pages(...,
		// n_locked, npages)) { cleared = sdma_cache_evict(pq, npages); if (cleared >= npages)
		// goto retry; }", then pins the extra pages after the node's, "node->rb.len =
		// iovec->iov.iov_len", "atomic_add(pinned, &pq->n_locked)"; back in pin_vector_pages
		// "node->npages += pinned".
		extra := npages - node.npages
		for !k.canPin(extra) {
			if k.evict(extra) < extra {
				break
			}
		}
		if !k.canPin(extra) {
			k.overLimit++
		}
		node.len = length
		node.npages += extra
		k.nLocked += extra
	}
	// hfi1_mmu_rb_insert: "list_add_tail(&mnode->list, &handler->lru_list)", then
	// sdma_rb_insert "atomic_inc(&node->refcount)".
	k.tree[addr] = node
	k.lru = append(k.lru, node)
	node.refcount++
	return node
}

// put is user_sdma_free_request's "atomic_dec(&node->refcount)": the node stays cached.
func (k *kpinCache) put(n *kpinNode) { n.refcount-- }

// comparePins checks the cache against the model: n_locked, the nodes in LRU order with their
// address, rb.len, page count and refcount, and the eviction and over-limit counts.
func comparePins(t *testing.T, step string, c *pinCache, k *kpinCache) bool {
	t.Helper()
	st := c.snapshot()
	var got, want []string
	c.mu.Lock()
	for n := c.lruTail; n != nil; n = n.prev {
		got = append(got, fmt.Sprintf("%#x+%d %dp ref%d", n.key.addr, n.key.n, n.npages, n.refs))
	}
	c.mu.Unlock()
	for _, n := range k.lru {
		want = append(want, fmt.Sprintf("%#x+%d %dp ref%d", n.addr, n.len, n.npages, n.refcount))
	}
	ok := assert.Equal(t, want, got, "%s: the LRU list, least recent first", step)
	ok = assert.Equal(t, k.nLocked, st.Pages, "%s: pages pinned (n_locked)", step) && ok
	ok = assert.Equal(t, len(k.tree), st.Nodes, "%s: nodes", step) && ok
	ok = assert.EqualValues(t, k.evictions, st.Evictions, "%s: evictions", step) && ok
	return assert.EqualValues(t, k.overLimit, st.OverLimit, "%s: pins over the limit", step) && ok
}

// TestPinCacheMatchesKernelModel drives the pin cache and the kernel model with the same random
// gets (vectors at a few addresses, with lengths that grow, shrink and repeat) and puts (a
// request ending), under limits from tight to none, and compares them after every step. The
// kernel keeps a node it finds at the vector's address with another length: a longer vector
// pins only the pages past the node's end (eviction and the limit check for those pages only,
// n_locked grows by them), a shorter one pins nothing and leaves the node (and its rb.len) as
// it was, also while a request holds it. The cache removed that node and pinned the whole
// vector anew: it evicted for the whole vector's pages, dropped the pages of a shrunk vector,
// and counted a held node's pages twice.
func TestPinCacheMatchesKernelModel(t *testing.T) {
	const bufPages = 12
	buf := make([]byte, (bufPages+1)*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	starts := []int{0, 100, dma.PageSize, 3*dma.PageSize + 7, 6 * dma.PageSize}
	for _, limit := range []int{2, 4, 7, NoPinLimit} {
		for seed := range uint64(6) {
			name := fmt.Sprintf("limit%d/seed%d", limit, seed)
			t.Run(name, func(t *testing.T) {
				iommu := testIOMMU(t)
				dev := testDevice(t, sdma.Config{Manual: true, Mapper: iommu})
				c := &pinCache{dev: dev, limit: limit, nodes: make(map[uintptr]*pinNode)}
				k := &kpinCache{limit: limit, tree: make(map[uintptr]*kpinNode)}
				rng := rand.New(rand.NewPCG(seed, uint64(limit)+1))
				type held struct {
					n *pinNode
					k *kpinNode
				}
				var hold []held
				for step := range 300 {
					if len(hold) > 0 && (rng.IntN(3) == 0 || len(hold) > 4) {
						i := rng.IntN(len(hold))
						h := hold[i]
						hold = append(hold[:i], hold[i+1:]...)
						c.put(h.n)
						k.put(h.k)
						if !comparePins(t, fmt.Sprintf("step %d: put %#x", step, h.k.addr), c, k) {
							return
						}
						continue
					}
					off := base + starts[rng.IntN(len(starts))]
					n := 1 + rng.IntN(min(4*dma.PageSize, base+bufPages*dma.PageSize-off))
					if rng.IntN(2) == 0 {
						n = (1 + rng.IntN(4)) * dma.PageSize / 2 // lengths that repeat
						n = min(n, base+bufPages*dma.PageSize-off)
					}
					v := buf[off : off+n]
					node, err := c.get(v)
					require.NoError(t, err)
					kn := k.get(addrOf(v), n)
					hold = append(hold, held{node, kn})
					if !comparePins(t, fmt.Sprintf("step %d: get %#x+%d", step, addrOf(v), n), c, k) {
						return
					}
				}
				for _, h := range hold {
					c.put(h.n)
				}
				c.invalidateAll()
				assert.Zero(t, c.snapshot().Pages)
				assert.Empty(t, streaming(iommu), "every registration undone")
			})
		}
	}
}

// TestPinCacheGrowsNodeInPlaceAsKernel: a vector sent again at its address with more pages
// while the first request still holds the node (its packets in the ring): the kernel keeps the
// node and its pages, pins only the new vector's extra pages (n_locked 1 → 3 for a one-page
// then a three-page vector), evicting for those pages only, and both requests share the node;
// a shorter vector at the address afterwards pins nothing (n_locked stays 3). Every packet
// carries the right bytes, and everything is unpinned at Close. The cache pinned the three
// pages anew beside the held one-page node, 4 pages against a limit of 3 (OverLimit), and
// unpinned the three-page node for the shorter vector.
func TestPinCacheGrowsNodeInPlaceAsKernel(t *testing.T) {
	iommu := testIOMMU(t)
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: sink, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev, PinLimit: 3})
	buf := make([]byte, 8*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	copy(buf, pattern(len(buf), 3))
	other := buf[base+5*dma.PageSize : base+6*dma.PageSize]
	sendOne(t, pq, dev, 0, 4096, other) // one unused cached page: the eviction candidate

	submit := func(slot int, v []byte) {
		info, hdr := Message(slot, 4096, testTemplate, v)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
	}
	// held: not processed yet; its length ends inside its page, so that a piece of the longer
	// vector's first page spans both registrations of the node (and is mapped per packet)
	submit(1, buf[base:base+dma.PageSize-100])
	submit(2, buf[base:base+3*dma.PageSize])
	st := pq.Stats().Pins
	assert.Equal(t, 3, st.Pages, "n_locked 2, 2 more do not fit under 3: the unused page is evicted (cleared 1 < 2: no second look), and the 2 pinned")
	assert.Equal(t, 1, st.Nodes)
	assert.EqualValues(t, 1, st.Evictions, "evicted for the 2 extra pages: the unused one-page node")
	assert.Zero(t, st.OverLimit)
	assert.Zero(t, st.Deferred, "the held node is kept, not unmapped later")
	assert.EqualValues(t, 2, st.Misses)
	assert.EqualValues(t, 1, st.Resized)
	assert.Zero(t, st.Unregistered, "the extra bytes are registered with the device")

	submit(3, buf[base:base+dma.PageSize+10]) // shorter: nothing pinned
	st = pq.Stats().Pins
	assert.Equal(t, 3, st.Pages)
	assert.EqualValues(t, 2, st.Resized)
	assert.EqualValues(t, 1, st.Evictions)

	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	for s := 1; s <= 3; s++ {
		require.NoError(t, waitSlot(t, pq, s))
	}
	pkts, _ := sink.packets()
	var got []byte
	for _, p := range pkts[1:] {
		got = append(got, p[64:]...)
	}
	want := append(append(append([]byte(nil), buf[base:base+dma.PageSize-100]...), buf[base:base+3*dma.PageSize]...), buf[base:base+dma.PageSize+10]...)
	assert.Equal(t, want, got[:len(want)], "every packet carries its vector's bytes")
	assert.Zero(t, dev.Engine(0).Stats().Faults)
	require.NoError(t, pq.Close(context.Background()))
	assert.Empty(t, streaming(iommu), "every registration undone")
	assert.Zero(t, pq.Stats().Pins.Pages)
}

// TestPinCacheInvalidateReachesGrownBytes: a vector that ends in its node's last page but past
// the node's length pins no page (the kernel leaves rb.len as it was) and has its extra bytes
// registered with the node; invalidating just those bytes removes the node and undoes every
// registration, as for any memory the node holds: with the node held by both requests (two
// registrations, the packets in the ring), once they end; with the node unused (one
// registration: the grown vector registered whole), at once.
func TestPinCacheInvalidateReachesGrownBytes(t *testing.T) {
	iommu := testIOMMU(t)
	dev := testDevice(t, sdma.Config{Manual: true, Mapper: iommu})
	pq := testQueue(t, Config{Device: dev})
	buf := make([]byte, 2*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	for s, v := range [][]byte{buf[base : base+100], buf[base : base+200]} {
		info, hdr := Message(s, 4096, testTemplate, v)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
	}
	st := pq.Stats().Pins
	require.EqualValues(t, 1, st.Resized)
	require.Equal(t, 1, st.Pages, "no page pinned for the longer vector")
	require.Len(t, registered(iommu), 2, "the held node's two registrations")
	assert.Equal(t, 1, pq.Invalidate(buf[base+150:base+200]))
	assert.Len(t, registered(iommu), 2, "kept under the packets in flight")
	_, err := dev.Engine(0).Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 0))
	require.NoError(t, waitSlot(t, pq, 1))
	assert.Zero(t, pq.Stats().Pins.Pages)
	assert.Empty(t, streaming(iommu), "every registration undone")

	sendOne(t, pq, dev, 0, 4096, buf[base:base+100])
	sendOne(t, pq, dev, 1, 4096, buf[base:base+200])
	require.Len(t, streaming(iommu), 1, "no request held the node: the grown vector registered whole")
	assert.Equal(t, 1, pq.Invalidate(buf[base+150:base+200]))
	assert.Zero(t, pq.Stats().Pins.Pages)
	assert.Empty(t, streaming(iommu), "every registration undone")
}

// TestPinCacheDropsFailedRequestsVectors: a request that stops with packets unsent takes its
// vectors out of the pin cache, as hfi1_user_sdma_process_request's free_req does ("if
// (req->seqsubmitted < req->info.npkts) { ... user_sdma_free_request(req, true); }", whose
// unpin branch is hfi1_mmu_rb_remove: the node leaves the tree and sdma_rb_remove unpins it),
// where a request that ended through its completions (user_sdma_txreq_cb's
// user_sdma_free_request(req, false)) leaves them cached. Here a request on a stopped engine
// (-ECOMM after the pinning) leaves nothing pinned, while one whose packets all went to the
// engine and completed aborted keeps its node; and a request cut short while deferred takes
// out a node another request in flight holds too, unmapped once that one ends (the kernel
// unpins it under that request's packets). The cache kept the failed requests' nodes pinned.
func TestPinCacheDropsFailedRequestsVectors(t *testing.T) {
	iommu := testIOMMU(t)
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: sink, Mapper: iommu, RingSize: 64})
	eng := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Slots: 4, Timeout: time.Hour})
	buf := make([]byte, 80*dma.PageSize)
	base := int(dma.PageSize - addrOf(buf)%dma.PageSize)
	copy(buf, pattern(len(buf), 7))
	v := buf[base : base+2*dma.PageSize]

	require.NoError(t, eng.Stop())
	info, hdr := Message(0, 4096, testTemplate, v)
	require.ErrorIs(t, pq.Submit(context.Background(), info, &hdr, v), ErrNotRunning)
	var ce *CompError
	require.ErrorAs(t, waitSlot(t, pq, 0), &ce)
	assert.EqualValues(t, ECOMM, ce.Errcode)
	st := pq.Stats().Pins
	assert.Zero(t, st.Nodes, "the failed request's node is out of the cache")
	assert.Zero(t, st.Pages, "and unpinned")
	assert.EqualValues(t, 1, st.Dropped)
	assert.Empty(t, streaming(iommu), "its registration undone")
	require.NoError(t, eng.Start())

	// Every packet handed over, then aborted: ended through its completions, the node stays.
	info, hdr = Message(1, 4096, testTemplate, v)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
	require.NoError(t, eng.Stop())
	require.ErrorAs(t, waitSlot(t, pq, 1), &ce)
	st = pq.Stats().Pins
	assert.Equal(t, 1, st.Nodes, "ended through its completions: the node stays cached")
	assert.Equal(t, 2, st.Pages)
	assert.EqualValues(t, 1, st.Dropped)
	require.NoError(t, eng.Start())

	// Slot 2 holds v's node in the ring; slot 3 sends v and a vector larger than the ring,
	// goes DEFERRED and is cut short by its context.
	info, hdr = Message(2, 4096, testTemplate, v)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, v))
	big := buf[base+4*dma.PageSize : base+74*dma.PageSize]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info, hdr = Message(3, 4096, testTemplate, v, big)
	deferred := deferrals(pq)
	errc := make(chan error, 1)
	go func() { errc <- pq.Submit(ctx, info, &hdr, v, big) }()
	awaitDeferred(t, pq, deferred, errc)
	cancel()
	require.ErrorIs(t, submitResult(t, pq, errc), context.Canceled)
	_, err := eng.Process()
	require.NoError(t, err)
	require.NoError(t, waitSlot(t, pq, 2))
	require.ErrorAs(t, waitSlot(t, pq, 3), &ce)
	st = pq.Stats().Pins
	assert.Zero(t, st.Nodes, "slot 3 stopped with packets unsent: its nodes are out of the cache")
	assert.Zero(t, st.Pages, "and unpinned, v's once slot 2 ended")
	assert.EqualValues(t, 3, st.Dropped)
	assert.Empty(t, streaming(iommu), "every registration undone")
	pkts, _ := sink.packets()
	require.GreaterOrEqual(t, len(pkts), 2)
	assert.Equal(t, v, append(append([]byte(nil), pkts[0][64:]...), pkts[1][64:]...), "slot 2's packets, the first the engine read, carry v")
}
