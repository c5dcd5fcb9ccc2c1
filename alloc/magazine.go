package alloc

import (
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/pcpu"
	"github.com/gosdma/gosdma/internal/relaxed"
)

// Per-P magazines and the depot: the layer above the shared free stack (stack.go) that keeps a
// goroutine's objects on its P (Bonwick's magazine allocator, "Magazines and Vmem", 2001; the
// kernel's kmem_cache per-CPU array_cache with its shared array, and the IOVA allocator's
// iova_rcache: cpu_rcache{loaded, prev} above a depot).
//
// A magazine is a chain of free cells linked through their own link words (as in stack.go), at
// most magSize long, named by one word:
//
//	bits 63..32  count: the number of cells in the chain (0: no magazine, the word is 0)
//	bits 31..0   index of the chain's first cell
//
// Each cell's link holds, besides linkTouched, the word of the magazine below it: the chain
// without that cell (0 under the last cell), so its bits 31..0 are the next cell's index and
// the count, not a nilIndex, ends the chain. A pop's new word is its first cell's link without
// the flag, and a push's link is the word it pushes on.
//
// Every P has two magazine words, cur and prev (Bonwick's loaded and previous), on a cache line
// of their own. Get pops cur's first cell; when cur is empty it takes prev if prev holds a
// magazine, else a whole magazine from the depot in one CAS. Put pushes on cur; when cur is full
// it moves cur to prev if prev is empty, else first sends prev, full, to the depot in one CAS.
// So a P touches the shared depot at most once per magSize Gets or Puts, and a goroutine that
// puts back what it got (an inline completion) never does: its objects stay on its P.
//
// Who writes a magazine word: the pinned owner, that is the goroutine running on that P between
// pcpu.Pin and pcpu.Unpin (pop, push, the moves between cur, prev and the depot), and drainers
// (drain: any goroutine, pinned or not), which only ever CAS a non-empty word to 0 and so take
// the whole chain at once. Pinning makes the owner the only goroutine that fills a word, so the
// owner's pop needs no version tag: between its load of cur and its CAS, cur can only have been
// emptied by a drainer, and then the CAS fails. A drainer's CAS needs none either: whatever
// chain the word names when its CAS succeeds is the chain it takes (it reads the links only
// after). The owner may store (not CAS) into a word it saw empty: drainers never write an empty
// word.
//
// The depot is a Treiber stack of magazines with a version-tagged head, like the free stack but
// linked through the first cell's batch word (count and next magazine), so a whole magazine
// moves in or out in one CAS and no cell is walked.
//
// Why drain: objects cached on one P must not be lost to a Get on another. A Get that finds its
// P's magazines, the depot, and the free stack's touched cells empty drains every P's magazines
// into the depot before it takes an untouched cell (which would raise the high-water mark),
// grows a Slab, or reports a List empty. Used without concurrency (one goroutine, even one that
// moves between Ps), that keeps every promise exact: a Get fails or grows only when every object
// is in use, and untouched cells are handed out only when no touched cell is free. Under
// concurrent use, objects another goroutine is moving between a P and the depot (a few
// instructions while pinned) are briefly out of a drainer's sight, as an object being put back
// was always out of a Get's sight until its push: see Stats and List.Get.

// magSize is the most cells a magazine holds. Small, so that a List of a few hundred objects
// still serves several Ps (a P caches up to 2*magSize), and large enough that the depot's shared
// head is touched once per 16 objects.
const magSize = 16

// magazines is one P's pair of magazine words (see above). Padded to its own cache line: only
// its P writes it, except for drainers.
type magazines struct {
	// cur is the loaded magazine: popped by Get and pushed by Put of the pinned owner (CAS),
	// filled by the owner from prev or the depot (store, while empty), emptied by drainers (CAS).
	cur atomic.Uint64
	// prev is the previous magazine, full or empty: filled by the owner's Put from a full cur
	// (store, while empty), emptied by the owner (CAS: to cur, or to the depot) and by drainers.
	prev atomic.Uint64
	_    [cacheLine - 16]byte
}

func magWord(n, top uint32) uint64 { return uint64(n)<<32 | uint64(top) }

// magPop returns the magazine word below the first cell c of a magazine: c's link without its
// flags. The link is stable while c is in the caller's magazine; if a drainer took the magazine
// meanwhile, the caller's CAS from the magazine's word fails whatever was read.
func magPop[T any](c *cell[T]) uint64 {
	return c.link.Load() &^ linkTouched
}

// magPush returns the magazine word w with cell i pushed on it (w has fewer than magSize cells).
func magPush(w uint64, i uint32) uint64 {
	return (w>>32+1)<<32 | uint64(i)
}

// newMagazines returns the per-P magazines for pcpu.Max() Ps, or nil under the purego tag (every
// Get and Put then takes the free stack).
func newMagazines() []magazines {
	if !pcpu.Enabled {
		return nil
	}
	// One more in front, unused: the first P's words share no line with the allocation before.
	return make([]magazines, pcpu.Max()+1)[1:]
}

// popCur is Get's common case, getLocal's first step written out for its callers to inline
// (Slab.Get and List.Get, pinned to m's P): it pops m.cur's first cell if there is one and it
// lies in the newest region. It returns nil otherwise, or if a drainer emptied cur meanwhile;
// the caller then takes get.
func (s *stack[T]) popCur(m *magazines) *cell[T] {
	w := m.cur.Load()
	t := s.tab.Load()
	k := uint32(w) - t.lastFirst
	if w == 0 || uint(k) >= uint(t.lastRun.n) {
		return nil
	}
	c := cellAt[T](t.lastRun.base, k, s.lay.stride)
	if !m.cur.CompareAndSwap(w, magPop(c)) {
		return nil
	}
	relaxed.StoreRelease64(&c.link, linkInUse|linkTouched) // see getLocal
	return c
}

// get takes a free cell: from the calling P's magazines, the depot, or the free stack if its top
// was handed out before (touched). It returns nil if none of those has one (the caller then
// drains, in getSlow). placed reports that it put free cells into a per-P magazine or the depot
// on the way: a List then looks for waiters (see List.Get).
func (s *stack[T]) get() (c *cell[T], placed bool) {
	id := pcpu.Pin()
	c, placed = s.getOn(id)
	pcpu.Unpin()
	return c, placed
}

// getOn is get for the P id, to which the caller is pinned. An id out of range (-1 under the
// purego tag, or a P added since the allocator was made) takes the shared path: the depot and
// the free stack. (Tests call it unpinned, on one goroutine, to play several Ps.)
func (s *stack[T]) getOn(id int) (c *cell[T], placed bool) {
	if uint(id) < uint(len(s.mags)) {
		c, placed = s.getLocal(&s.mags[id])
	} else {
		c, placed = s.popMagazine()
	}
	if c == nil {
		c = s.pop(true)
	}
	return c, placed
}

// getSlow is Get's last look before it grows or fails: it drains every P's magazines into the
// depot and takes a cell from there, or else any free cell of the free stack, touched or not.
// Under concurrent use it tries again, a bounded number of times, while the depot changed under
// it (another goroutine moving a magazine). It never blocks: drains and pops are lock-free.
func (s *stack[T]) getSlow() (*cell[T], bool) {
	id := pcpu.Pin()
	c, placed := s.getSlowOn(id)
	pcpu.Unpin()
	return c, placed
}

// getSlowOn is getSlow for the P id, as getOn is get's.
func (s *stack[T]) getSlowOn(id int) (*cell[T], bool) {
	placed := false
	for try := 0; ; try++ {
		d := s.depot.Load()
		placed = s.drain() || placed
		c, p := s.getOn(id)
		placed = placed || p
		if c == nil {
			c = s.pop(false)
		}
		if c != nil || try == 3 || s.depot.Load() == d {
			return c, placed
		}
	}
}

// putOn pushes the free cell c (index i; its link already says free) for the P id, to which the
// caller is pinned: on its magazines, or on the free stack if id is out of range.
func (s *stack[T]) putOn(id int, c *cell[T], i uint32) {
	if uint(id) < uint(len(s.mags)) {
		s.putLocal(&s.mags[id], c, i)
	} else {
		s.push(c, i)
	}
}

// getLocal pops a cell from m, refilling m.cur from m.prev or the depot. The caller is pinned
// to m's P.
func (s *stack[T]) getLocal(m *magazines) (*cell[T], bool) {
	placed := false
	for {
		if w := m.cur.Load(); w != 0 {
			c := s.tab.Load().cell(uint32(w), s.per)
			if m.cur.CompareAndSwap(w, magPop(c)) {
				// The cell is ours; its next reader is the Put that gives it back (see pop).
				relaxed.StoreRelease64(&c.link, linkInUse|linkTouched)
				return c, placed
			}
			continue // a drainer emptied cur
		}
		if p := m.prev.Load(); p != 0 {
			if m.prev.CompareAndSwap(p, 0) {
				m.cur.Store(p) // cur is empty: no drainer writes it
				placed = true
			}
			continue
		}
		top, n := s.popChain()
		if n == 0 {
			return nil, placed
		}
		// Hand out the first cell, load the rest.
		c := s.tab.Load().cell(top, s.per)
		if n > 1 {
			m.cur.Store(magPop(c))
			placed = true
		}
		relaxed.StoreRelease64(&c.link, linkInUse|linkTouched)
		return c, placed
	}
}

// putLocal pushes the free cell c (index i; its link already says free) on m.cur, first moving a
// full cur to prev, and a full prev to the depot. The caller is pinned to m's P.
func (s *stack[T]) putLocal(m *magazines, c *cell[T], i uint32) {
	for {
		w := m.cur.Load()
		if n := uint32(w >> 32); n < magSize {
			// c is ours until the CAS publishes it (and the link with it).
			relaxed.StoreRelease64(&c.link, linkTouched|w)
			if m.cur.CompareAndSwap(w, magPush(w, i)) {
				return
			}
			continue // a drainer emptied cur
		}
		if p := m.prev.Load(); p == 0 {
			if m.cur.CompareAndSwap(w, 0) {
				m.prev.Store(w) // prev is empty: no drainer writes it
			}
		} else if m.prev.CompareAndSwap(p, 0) {
			s.pushChain(uint32(p), uint32(p>>32))
		}
	}
}

// popMagazine takes a magazine from the depot, hands out its first cell and puts the rest back
// (the path of a goroutine with no magazines of its own: not pinned to a P that has them). It
// reports whether it put cells back.
func (s *stack[T]) popMagazine() (*cell[T], bool) {
	top, n := s.popChain()
	if n == 0 {
		return nil, false
	}
	c := s.tab.Load().cell(top, s.per)
	if n > 1 {
		s.pushChain(uint32(c.link.Load()), n-1)
	}
	relaxed.StoreRelease64(&c.link, linkInUse|linkTouched)
	return c, n > 1
}

// pushChain puts the magazine of n cells starting at top, which the caller owns, on the depot.
func (s *stack[T]) pushChain(top, n uint32) {
	c := s.tab.Load().cell(top, s.per)
	for {
		d := s.depot.Load()
		// The CAS below publishes the batch word (and the chain's links, written before).
		relaxed.StoreRelease64(&c.batch, magWord(n, uint32(d)))
		if s.depot.CompareAndSwap(d, pack(uint32(d>>32)+1, top)) {
			return
		}
	}
}

// popChain takes the depot's top magazine: its first cell and count, or n == 0 if the depot is
// empty. The version in the depot's head makes a stale batch read harmless, as in pop.
func (s *stack[T]) popChain() (top, n uint32) {
	for {
		d := s.depot.Load()
		top = uint32(d)
		if top == nilIndex {
			return 0, 0
		}
		b := s.tab.Load().cell(top, s.per).batch.Load()
		if s.depot.CompareAndSwap(d, pack(uint32(d>>32)+1, uint32(b))) {
			return top, uint32(b >> 32)
		}
	}
}

// drain moves every P's magazines to the depot, so that a Get on any P can have their cells.
// It reports whether it moved any.
func (s *stack[T]) drain() bool {
	moved := false
	for k := range s.mags {
		m := &s.mags[k]
		moved = s.drainWord(&m.cur) || moved
		moved = s.drainWord(&m.prev) || moved
	}
	return moved
}

// drainWord empties one magazine word into the depot.
func (s *stack[T]) drainWord(w *atomic.Uint64) bool {
	for {
		v := w.Load()
		if v == 0 {
			return false
		}
		if w.CompareAndSwap(v, 0) {
			s.pushChain(uint32(v), uint32(v>>32))
			return true
		}
	}
}
