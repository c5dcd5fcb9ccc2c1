package usdma

import (
	"context"
	"sync"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
)

// The pinned-page cache (hfi1: mmu_rb.c, with user_sdma's sdma_rb_* ops and pin_vector_pages).
//
// The kernel pins a vector's user pages once (get_user_pages) and keeps them in an interval
// tree keyed by address, so that a buffer sent again is not pinned again; nodes no request uses
// are evicted, least recently used first, when the pinned-page count would pass the limit, and
// the MMU notifier invalidates a node when its memory is unmapped. A node a request still uses
// (refcount > 0) is never unpinned: it is unpinned when the last request lets go.
//
// In gosdma a vector is a byte slice, and pinning it is registering it with the device
// (sdma.Device.Register, dma's memory registration): the memory is mapped once, and the page
// pieces of every packet that sends it are added with AddKVAddr, which finds the registration
// and computes the bus address with no map, lock or allocation (sdma_txadd_page's pinned pages,
// without the per-packet dma_map_page). Each txreq holds a use of the registration from its add
// to its clean, and the registration is undone only when the node is evicted or invalidated AND
// no request holds it, and Deregister itself waits for uses in flight: the engine never reads
// unregistered memory, whatever the caller invalidates while packets are in flight. (The
// registration also keeps Go memory reachable and pins a dma.Region, so freed memory is never
// read either.) When the mapper does not register memory, or the vector overlaps memory
// registered otherwise, the node holds no registration and the pieces are mapped per packet
// (MapSingle, unmapped at completion), which is just as safe, only slower.
//
// Nodes are found by address, as the kernel's sdma_rb_filter matches the address, one node per
// address: a hit is the exact (address, length) pair. A vector at a cached address with another
// length keeps that node (hfi1_mmu_rb_remove_unless_exact extracts it, pin_vector_pages puts it
// back): a longer vector pins only the pages past the node's end (pin_sdma_pages: the limit
// check and the eviction for those pages, the node's length becomes the vector's), a shorter one
// (or one that ends in the node's last page) pins nothing and leaves the node's length, and
// requests in flight on the node keep it. A node no request holds is registered anew whole
// for the longer vector (one registration, as the kernel keeps one page array per node); a held
// one gets the extra bytes as one more registration, starting where its registered bytes end,
// up to maxNodeRegs (a piece spanning two registrations is mapped per packet).
// The cache is guarded by one mutex, taken per vector per request and on a request's end,
// never per packet.
type pinCache struct {
	dev   *sdma.Device
	limit int // pages, or NoPinLimit; read-only after New

	mu      sync.Mutex
	nodes   map[uintptr]*pinNode // live nodes by address (hfi1: the rb tree)
	lruHead *pinNode             // most recently used
	lruTail *pinNode             // least recently used: eviction starts here
	pages   int                  // pages pinned by every node, live or dying (hfi1: pq->n_locked)
	stuck   []*pinNode           // dead nodes whose registration someone else still uses: added by unmap, taken by Close (invalidateAll), which waits for them without mu
	// draining: a Close waits for the registrations it took out of stuck (set by invalidateAll
	// when it took some, cleared by drainStuck's end); read by mayWait.
	draining bool
	stats    PinStats
}

// PinStats counts the pin cache's work.
type PinStats struct {
	Hits          uint64 // vectors found pinned
	Misses        uint64 // vectors pinned anew
	Dropped       uint64 // nodes taken out because a request using them stopped with packets unsent
	Resized       uint64 // vectors found at a cached address with another length: the node kept, only the pages past its end pinned (if any)
	Evictions     uint64 // nodes evicted to stay under the limit
	Invalidations uint64 // nodes invalidated (Invalidate, Close)
	Deferred      uint64 // unmaps deferred because a request still held the node
	OverLimit     uint64 // pins past the limit because every node was in use (the kernel pins anyway)
	Unregistered  uint64 // vectors that could not be registered and are mapped per packet
	Nodes         int    // live nodes now
	Pages         int    // pages pinned now (live and dying nodes)
}

type pinKey struct {
	addr uintptr
	n    int
}

// pinNode is one pinned vector (hfi1: struct sdma_mmu_node).
type pinNode struct {
	key pinKey // the address and hfi1's rb.len: the length of the vector that last pinned pages
	buf []byte // the longest vector seen at the address
	// regs register buf[:regEnd] with the device, in address order: one for the longest vector
	// registered while no request held the node, each later one for the bytes a longer vector
	// added while one did (at most maxNodeRegs); empty (or short) where a Register failed:
	// those pieces are mapped per packet.
	regs   []*dma.Registration
	regEnd int
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
	n := c.nodes[key.addr]
	if n != nil && n.key == key {
		n.refs++
		c.touch(n)
		c.stats.Hits++
		return n, nil
	}
	if n != nil {
		// hfi1: hfi1_mmu_rb_remove_unless_exact extracts the node of this address and another
		// length (off the LRU list: the eviction below cannot take it) and pin_vector_pages
		// keeps it, with its pages and the requests that hold it.
		c.unlink(n)
		c.stats.Resized++
	} else {
		n = &pinNode{key: pinKey{addr: key.addr}}
		c.nodes[key.addr] = n
		c.stats.Misses++
	}
	if np := numPages(key.addr, key.n); n.npages < np {
		c.pin(n, np-n.npages)
		n.npages = np
		n.key.n = key.n // hfi1: pin_sdma_pages' node->rb.len = iov_len, only when it pinned
	}
	if len(buf) > len(n.buf) {
		n.buf = buf
	}
	c.register(n, buf)
	n.refs++ // hfi1: hfi1_mmu_rb_insert's sdma_rb_insert
	c.pushFront(n)
	return n, nil
}

// pin makes room for extra more pages and counts them pinned (hfi1: pin_sdma_pages' retry:
// while !hfi1_can_pin_pages, sdma_cache_evict(pq, npages) with npages the pages to pin, not the
// excess over the limit, looking again only if that much was cleared; else it pins anyway, and
// atomic_add(pinned, &pq->n_locked)). mu held; the node being pinned is off the LRU list.
func (c *pinCache) pin(n *pinNode, extra int) {
	for !c.canPin(extra) {
		if c.evict(extra) < extra {
			break
		}
	}
	if !c.canPin(extra) {
		c.stats.OverLimit++
	}
	c.pages += extra
}

// maxNodeRegs bounds a node's registrations: the bytes of a longer vector past them are mapped
// per packet instead (see register).
const maxNodeRegs = 4

// register registers the bytes of buf past n's registered ones with the device. When no request
// holds n, its registrations are undone first (a done context: they go only if no packet uses
// them, someone else's included) and buf is registered whole, so that a vector that grows keeps
// one registration, as the kernel keeps one page array per node (pin_sdma_pages replaces
// node->pages); else, or if some are in use, the bytes past them are one more registration of
// n, up to maxNodeRegs. A Register that fails (no registrar, or memory registered otherwise), or
// one past maxNodeRegs, leaves those bytes to be mapped per packet. mu held.
func (c *pinCache) register(n *pinNode, buf []byte) {
	if len(buf) <= n.regEnd {
		return
	}
	merged := n.regEnd // the bytes registered before: those past n.regEnd below were undone
	if len(n.regs) > 0 && n.refs == 0 {
		if c.deregister(n, canceled) != nil {
			// Those left (a prefix: deregister undoes the last first) cover buf up to the last.
			last := n.regs[len(n.regs)-1].Bytes()
			n.regEnd = int(addrOf(last)-n.key.addr) + len(last)
		} else {
			n.regEnd = 0
		}
	}
	if len(n.regs) >= maxNodeRegs {
		c.stats.Unregistered++
		return
	}
	reg, err := c.dev.Register(buf[n.regEnd:])
	if err != nil {
		c.stats.Unregistered++ // no registrar, or overlapping another registration
		if merged <= n.regEnd {
			return
		}
		// The longer vector overlaps memory registered otherwise: the bytes registered before
		// and undone above (all, or those past a registration in use) are registered again,
		// the rest mapped per packet.
		if reg, err = c.dev.Register(buf[n.regEnd:merged]); err != nil {
			return
		}
		n.regs, n.regEnd = append(n.regs, reg), merged
		return
	}
	n.regs = append(n.regs, reg)
	n.regEnd = len(buf)
}

// canPin reports whether np more pages fit under the limit (hfi1: hfi1_can_pin_pages' cache
// check, "nlocked + npages > cache_limit_pages" refuses; its RLIMIT_MEMLOCK checks are not
// modelled). mu held.
func (c *pinCache) canPin(np int) bool {
	return c.limit == NoPinLimit || c.pages+np <= c.limit
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

// drop drops the reference of a request that stopped with packets unsent and takes n out of
// the cache (hfi1: hfi1_user_sdma_process_request's free_req, user_sdma_free_request(req, true):
// hfi1_mmu_rb_remove, and sdma_rb_remove unpins the node); it is unmapped once no request holds
// it, where the kernel unpins it under the packets of the requests that still do.
func (c *pinCache) drop(n *pinNode) {
	c.mu.Lock()
	n.refs--
	if !n.dead {
		c.remove(n)
		c.stats.Dropped++
	} else if n.refs == 0 {
		c.unmap(n)
	}
	c.mu.Unlock()
}

// evict removes least-recently-used nodes that no request holds until target pages are
// cleared (hfi1: hfi1_mmu_rb_evict with sdma_rb_evict) and returns the pages cleared. mu held.
func (c *pinCache) evict(target int) int {
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
	return cleared
}

// invalidate removes every node overlapping [addr, addr+size): the memory is going away
// (hfi1: the MMU notifier's hfi1_mmu_rb_invalidate). Nodes in use stay mapped until their
// last request ends. It returns the number of nodes removed.
func (c *pinCache) invalidate(addr uintptr, size int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := 0
	for _, n := range c.nodes {
		// The node's memory: its longest vector (its registrations may reach past key.n, hfi1's
		// rb.len, which a longer vector ending in the node's last page leaves as it was).
		if key := n.key; key.addr < addr+uintptr(size) && addr < key.addr+uintptr(max(key.n, len(n.buf))) {
			c.remove(n)
			c.stats.Invalidations++
			k++
		}
	}
	return k
}

// invalidateAll removes every node (Close) and takes the dead nodes whose registrations
// someone else still uses out of the cache: the caller waits for them with drainStuck, without
// mu, so that Stats and Invalidate do not wait for them too.
func (c *pinCache) invalidateAll() []*pinNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		c.remove(n)
		c.stats.Invalidations++
	}
	stuck := c.stuck
	c.stuck = nil
	c.draining = len(stuck) > 0
	return stuck
}

// mayWait reports whether a Close may wait for a registration that txreqs other than the
// queue's use: one is stuck already, a Close waits for some, a live node holds one, or a dying
// node (a request still holds it) pins pages: its unmap may find its registration in use. Close
// only, behind another Close.
func (c *pinCache) mayWait() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining || len(c.stuck) > 0 {
		return true
	}
	live := 0
	for _, n := range c.nodes {
		if len(n.regs) > 0 {
			return true
		}
		live += n.npages
	}
	return c.pages > live
}

// remove takes n out of the index and the LRU list and unmaps it unless a request holds it.
// mu held.
func (c *pinCache) remove(n *pinNode) {
	delete(c.nodes, n.key.addr)
	c.unlink(n)
	n.dead = true
	if n.refs == 0 {
		c.unmap(n)
	} else {
		c.stats.Deferred++
	}
}

func (c *pinCache) unmap(n *pinNode) {
	c.pages -= n.npages
	if c.deregister(n, canceled) != nil {
		c.stuck = append(c.stuck, n) // another txreq (not ours) still uses the memory
		return
	}
	n.buf = nil
}

// canceled is a done context: the deregistration on a request's end (on the completion pass)
// must not wait. Our requests' uses are gone by then (each txreq is cleaned before its
// completion), so it waits only if someone else's txreqs use the memory.
var canceled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// deregister undoes n's registrations, the last first, waiting for their uses until ctx ends;
// those left on an error stay n's.
func (c *pinCache) deregister(n *pinNode, ctx context.Context) error {
	for k := len(n.regs); k > 0; k-- {
		if err := c.dev.Deregister(ctx, n.regs[k-1]); err != nil {
			return err
		}
		n.regs[k-1] = nil
		n.regs = n.regs[:k-1]
	}
	return nil
}

// drainStuck deregisters stuck, the nodes invalidateAll took whose registrations were still in
// use, waiting until ctx ends; those left then go back to the cache for the next Close. mu not
// held: the nodes are out of the cache, the caller's alone (Close, serialised by closeMu).
func (c *pinCache) drainStuck(ctx context.Context, stuck []*pinNode) error {
	for len(stuck) > 0 {
		n := stuck[len(stuck)-1]
		if err := c.deregister(n, ctx); err != nil {
			c.mu.Lock()
			c.stuck = append(c.stuck, stuck...)
			c.draining = false
			c.mu.Unlock()
			return err
		}
		n.buf = nil
		stuck = stuck[:len(stuck)-1]
	}
	c.mu.Lock()
	c.draining = false
	c.mu.Unlock()
	return nil
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
