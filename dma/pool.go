package dma

import (
	"fmt"
	"sync"
)

// Pool hands out fixed-size, aligned blocks of coherent memory, each with its bytes and bus
// address (dma_pool_create, dma_pool_alloc, dma_pool_free, dma_pool_destroy). It carves blocks
// from chunks of AllocCoherent memory of max(PageSize, step) bytes, where step is the block size
// rounded up to the alignment (the distance between blocks); a block never crosses its chunk.
//
// dma_pool_create's boundary argument is not taken: the boundary is always the chunk, the
// kernel's boundary 0. Since a chunk is aligned to the power-of-two number of pages covering it
// (AllocCoherent), a block of at most PageSize bytes never crosses a page and a larger one (one
// per chunk) never crosses a boundary of the power of two covering it. A device that needs a
// smaller boundary (a block that must not cross 1 KiB, say) gets it by an align that the block
// size rounds up to a divisor of the boundary.
// Typical use: pre-built packet headers that callers add with AddDAddr (sdma_txadd_daddr), which
// the library never unmaps.
//
// A Pool is safe for concurrent use; Alloc and Free take the pool's mutex and do not allocate once
// the pool has grown to its working size.
type Pool struct {
	m     Mapper // the mapper that allocates the chunks; immutable
	name  string // for reports; immutable
	size  int    // block size asked for; immutable
	align int    // block alignment; immutable
	step  int    // size rounded up to align: distance between blocks; immutable
	per   int    // blocks per chunk; immutable

	mu        sync.Mutex   // guards every field below
	chunks    []*poolChunk // every chunk allocated (nil once freed after Destroy)
	free      []blockRef   // free blocks, LIFO (the kernel pool's free list)
	inUse     int          // blocks handed out and not yet freed
	destroyed bool         // Destroy was called
}

// poolChunk is one coherent allocation and the state of its blocks.
type poolChunk struct {
	co *Coherent
	// gen[i] counts the Allocs and Frees of block i: odd while it is allocated. The Block an
	// Alloc returns carries the value, so that a Free of a stale copy (its slot freed and handed
	// out again since) is told from the new owner's. 64 bits: a count that wraps (32 bits would
	// after 2^31 reuses of one slot) would take a copy kept that long for the owner's; Block is
	// no larger for it on 64-bit machines. Guarded by Pool.mu.
	gen   []uint64
	inUse int // blocks of this chunk handed out; guarded by Pool.mu
}

type blockRef struct{ chunk, slot int32 }

// Block is one block from a Pool: Bytes (the kernel's vaddr, Pool.size bytes) and Addr (the
// *handle). Bytes is valid until the block is freed. Blocks are values; hand the same value back
// to Free. A copy kept past its Free is stale: Free refuses it, also once an Alloc handed the
// same memory out again (the new owner's Block is another).
type Block struct {
	Bytes []byte
	Addr  Addr

	pool *Pool
	ref  blockRef
	gen  uint64 // the slot's poolChunk.gen when Alloc handed it out (odd)
}

// NewPool creates a pool of size-byte blocks aligned to align (a power of two, 0 means 1; any up
// to 1 GiB, as dma_pool_create takes any: an align beyond a page makes each block its own chunk,
// which AllocCoherent aligns) in both CPU and bus address, allocated through m (dma_pool_create).
// Blocks lie size rounded up to align apart. A block that is its own chunk costs size rounded up
// to align (the kernel's allocation = ALIGN(size, align)): a 64-byte pool aligned to 1 MiB maps
// 1 MiB of coherent memory per block, one aligned to 1 GiB a whole GiB (and the mapper's
// bookkeeping for it), so a large align suits few blocks. name appears in reports. A nil m, or a
// nil pointer of a mapper type, is ErrInvalid, as are a size not in 1..1 GiB and an align that is
// not a power of two or is beyond 1 GiB.
func NewPool(m Mapper, name string, size, align int) (*Pool, error) {
	if align == 0 {
		align = 1
	}
	if isNilMapper(m) || size <= 0 || align < 0 || align&(align-1) != 0 || align > 1<<30 || size > 1<<30 {
		return nil, fmt.Errorf("dma: dma_pool_create(%q, size %d, align %d): %w", name, size, align, ErrInvalid)
	}
	step := (size + align - 1) &^ (align - 1)
	chunk := max(PageSize, step)
	return &Pool{m: m, name: name, size: size, align: align, step: step, per: chunk / step}, nil
}

// chunkSize is the size of each coherent allocation.
func (p *Pool) chunkSize() int { return max(PageSize, p.step) }

// Alloc returns a free block (dma_pool_alloc). Its bytes are not zeroed on reuse (like the
// kernel without __GFP_ZERO). It fails with ErrClosed after Destroy and with the mapper's error
// (ErrMapping) if a new chunk cannot be allocated; Alloc from a Pool that NewPool did not make
// (the zero one) is ErrInvalid.
func (p *Pool) Alloc() (Block, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.destroyed {
		return Block{}, fmt.Errorf("dma: dma_pool_alloc(%q): %w", p.name, ErrClosed)
	}
	if p.m == nil { // the zero Pool: no mapper to allocate chunks from
		return Block{}, fmt.Errorf("dma: dma_pool_alloc of a Pool that NewPool did not make: %w", ErrInvalid)
	}
	if len(p.free) == 0 {
		if err := p.grow(); err != nil {
			return Block{}, err
		}
	}
	ref := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	c := p.chunks[ref.chunk]
	c.gen[ref.slot]++ // odd: allocated
	c.inUse++
	p.inUse++
	return p.block(ref), nil
}

func (p *Pool) block(ref blockRef) Block {
	c := p.chunks[ref.chunk]
	off := int(ref.slot) * p.step
	return Block{
		Bytes: c.co.buf[off : off+p.size : off+p.size],
		Addr:  c.co.addr + Addr(off),
		pool:  p,
		ref:   ref,
		gen:   c.gen[ref.slot],
	}
}

func (p *Pool) grow() error {
	co, err := p.m.AllocCoherent(p.chunkSize())
	if err != nil {
		return fmt.Errorf("dma: dma_pool_alloc(%q): %w", p.name, err)
	}
	ci := int32(len(p.chunks))
	p.chunks = append(p.chunks, &poolChunk{co: co, gen: make([]uint64, p.per)})
	for s := p.per - 1; s >= 0; s-- {
		p.free = append(p.free, blockRef{ci, int32(s)})
	}
	return nil
}

// Free returns b to the pool (dma_pool_free). A block from another pool, a forged block or one
// already free is ErrNotOwned and changes nothing; so is a stale copy of a freed Block whose memory
// an Alloc handed out again since (the kernel cannot tell that one from the new owner's). Blocks may be freed after Destroy; the last
// free of a chunk then releases it.
func (p *Pool) Free(b Block) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.pool != p || b.ref.chunk < 0 || int(b.ref.chunk) >= len(p.chunks) || b.ref.slot < 0 || int(b.ref.slot) >= p.per {
		return fmt.Errorf("dma: dma_pool_free(%q) of a foreign block at %#x: %w", p.name, uint64(b.Addr), ErrNotOwned)
	}
	c := p.chunks[b.ref.chunk]
	if c == nil || c.gen[b.ref.slot]&1 == 0 || c.gen[b.ref.slot] != b.gen || b.Addr != c.co.addr+Addr(int(b.ref.slot)*p.step) {
		return fmt.Errorf("dma: dma_pool_free(%q) of a block that is not allocated at %#x: %w", p.name, uint64(b.Addr), ErrNotOwned)
	}
	c.gen[b.ref.slot]++ // even: free
	c.inUse--
	p.inUse--
	if p.destroyed {
		if c.inUse == 0 {
			p.chunks[b.ref.chunk] = nil
			return p.m.FreeCoherent(c.co)
		}
		return nil
	}
	p.free = append(p.free, b.ref)
	return nil
}

// InUse returns the number of blocks allocated and not freed.
func (p *Pool) InUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inUse
}

// Destroy releases the pool (dma_pool_destroy). Chunks with no blocks out are freed at once. If
// blocks are still out, Destroy says so with an error matching ErrBusy and keeps their chunks
// mapped (a device may still be reading them) until each is freed; the kernel logs "busy" and
// leaks them. After Destroy, Alloc fails; a second Destroy is ErrClosed.
func (p *Pool) Destroy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.destroyed {
		return fmt.Errorf("dma: dma_pool_destroy(%q): %w", p.name, ErrClosed)
	}
	p.destroyed = true
	p.free = nil
	var firstErr error
	for i, c := range p.chunks {
		if c != nil && c.inUse == 0 {
			p.chunks[i] = nil
			if err := p.m.FreeCoherent(c.co); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	if p.inUse > 0 {
		return fmt.Errorf("dma: dma_pool_destroy(%q): %d blocks still allocated: %w", p.name, p.inUse, ErrBusy)
	}
	return firstErr
}
