package usdma

import (
	"sync"

	"github.com/gosdma/gosdma/dma"
)

// The pinned-page cache (hfi1: mmu_rb.c, with user_sdma's sdma_rb_* ops and pin_vector_pages).
//
// The kernel pins a vector's user pages once (get_user_pages) and keeps them in an interval
// tree keyed by address, so that a buffer sent again is not pinned again; nodes no request uses
// are evicted, least recently used first, when the pinned-page count would pass the limit, and
// the MMU notifier invalidates a node when its memory is unmapped. A node a request still uses
// (refcount > 0) is never unpinned: it is unpinned when the last request lets go.
//
// In gosdma a vector is a byte slice and "pinning" it is giving it a long-lived device mapping:
// the node maps the whole vector once (Mapper.MapSingle, ToDevice) and the packets of every
// request that sends it add their page pieces by bus address (AddDAddr), with no per-packet
// map or unmap. The mapping is what the hardware model reads through; it is undone only when
// the node is evicted or invalidated AND no request holds it, so the engine never reads memory
// that was unmapped, whatever the caller invalidates while packets are in flight. (The mapping
// also keeps Go memory reachable, and pins a dma.Region, so freed memory is never read either.)
//
// Keys are exact (address, length) pairs, as the kernel's sdma_rb_filter matches the address.
// The cache is guarded by one mutex, taken per vector per request and on a request's end,
// never per packet.
type pinCache struct {
	mapper dma.Mapper
	limit  int // pages; 0: no limit

	mu      sync.Mutex
	nodes   map[pinKey]*pinNode // live nodes (hfi1: the rb tree)
	lruHead *pinNode            // most recently used
	lruTail *pinNode            // least recently used: eviction starts here
	pages   int                 // pages pinned by every node, live or dying (hfi1: pq->n_locked)
	stats   PinStats
}

// PinStats counts the pin cache's work.
type PinStats struct {
	Hits          uint64 // vectors found pinned
	Misses        uint64 // vectors pinned anew
	Evictions     uint64 // nodes evicted to stay under the limit
	Invalidations uint64 // nodes invalidated (Invalidate, Close)
	Deferred      uint64 // unmaps deferred because a request still held the node
	OverLimit     uint64 // pins past the limit because every node was in use (the kernel pins anyway)
	Nodes         int    // live nodes now
	Pages         int    // pages pinned now (live and dying nodes)
}

type pinKey struct {
	addr uintptr
	n    int
}

// pinNode is one pinned vector (hfi1: struct sdma_mmu_node).
type pinNode struct {
	key    pinKey
	buf    []byte
	bus    dma.Addr // the device mapping of buf
	npages int
	refs   int  // requests holding the node (hfi1: node->refcount); guarded by mu
	dead   bool // out of the index (evicted or invalidated); unmapped when refs reaches 0
	prev   *pinNode
	next   *pinNode
}

func numPages(addr uintptr, n int) int {
	first := addr / dma.PageSize
	last := (addr + uintptr(n) - 1) / dma.PageSize
	return int(last-first) + 1
}

// get returns buf's node with a reference for the caller, pinning buf if it is not cached
// (hfi1: pin_vector_pages).
func (c *pinCache) get(buf []byte) (*pinNode, error) {
	key := pinKey{addrOf(buf), len(buf)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[key]; n != nil {
		n.refs++
		c.touch(n)
		c.stats.Hits++
		return n, nil
	}
	np := numPages(key.addr, key.n)
	if c.limit > 0 && c.pages+np > c.limit {
		c.evict(c.pages + np - c.limit) // hfi1: sdma_cache_evict when !hfi1_can_pin_pages
		if c.pages+np > c.limit {
			c.stats.OverLimit++
		}
	}
	bus, err := c.mapper.MapSingle(buf, dma.ToDevice)
	if err != nil {
		return nil, err
	}
	n := &pinNode{key: key, buf: buf, bus: bus, npages: np, refs: 1}
	c.nodes[key] = n
	c.pushFront(n)
	c.pages += np
	c.stats.Misses++
	return n, nil
}

// put drops a request's reference (hfi1: atomic_dec(&node->refcount) in user_sdma_free_request);
// a dying node is unmapped with its last reference.
func (c *pinCache) put(n *pinNode) {
	c.mu.Lock()
	n.refs--
	if n.refs == 0 && n.dead {
		c.unmap(n)
	}
	c.mu.Unlock()
}

// evict removes least-recently-used nodes that no request holds until target pages are
// cleared (hfi1: hfi1_mmu_rb_evict with sdma_rb_evict). mu held.
func (c *pinCache) evict(target int) {
	cleared := 0
	for n := c.lruTail; n != nil && cleared < target; {
		prev := n.prev
		if n.refs == 0 {
			cleared += n.npages
			c.remove(n)
			c.stats.Evictions++
		}
		n = prev
	}
}

// invalidate removes every node overlapping [addr, addr+size): the memory is going away
// (hfi1: the MMU notifier's hfi1_mmu_rb_invalidate). Nodes in use stay mapped until their
// last request ends. It returns the number of nodes removed.
func (c *pinCache) invalidate(addr uintptr, size int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := 0
	for key, n := range c.nodes {
		if key.addr < addr+uintptr(size) && addr < key.addr+uintptr(key.n) {
			c.remove(n)
			c.stats.Invalidations++
			k++
		}
	}
	return k
}

// remove takes n out of the index and the LRU list and unmaps it unless a request holds it.
// mu held.
func (c *pinCache) remove(n *pinNode) {
	delete(c.nodes, n.key)
	c.unlink(n)
	n.dead = true
	if n.refs == 0 {
		c.unmap(n)
	} else {
		c.stats.Deferred++
	}
}

func (c *pinCache) unmap(n *pinNode) {
	// An unmap error would mean the mapping is not the node's: a bug, not a state to recover.
	if err := c.mapper.UnmapSingle(n.bus, len(n.buf), dma.ToDevice); err != nil {
		panic("usdma: pin cache unmap: " + err.Error())
	}
	c.pages -= n.npages
	n.buf = nil
}

func (c *pinCache) pushFront(n *pinNode) {
	n.prev, n.next = nil, c.lruHead
	if c.lruHead != nil {
		c.lruHead.prev = n
	} else {
		c.lruTail = n
	}
	c.lruHead = n
}

func (c *pinCache) unlink(n *pinNode) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		c.lruHead = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		c.lruTail = n.prev
	}
	n.prev, n.next = nil, nil
}

func (c *pinCache) touch(n *pinNode) {
	if c.lruHead != n {
		c.unlink(n)
		c.pushFront(n)
	}
}

func (c *pinCache) snapshot() PinStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Nodes = len(c.nodes)
	s.Pages = c.pages
	return s
}
