package alloc

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/gosdma/gosdma/internal/membarrier"
	"github.com/gosdma/gosdma/internal/pcpu"
	"github.com/gosdma/gosdma/internal/prefetch"
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
//	bit  62      magPlain: in a P's cur only, the P's plain mode (see below)
//	bits 61..32  count: the number of cells in the chain (0: no magazine, the word is 0, or
//	             magPlain alone)
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
// (drain: any goroutine, not pinned), which only ever CAS a non-empty word to 0 and so take the
// whole chain at once. Pinning makes the owner the only goroutine that fills a word, so the
// owner's pop needs no version tag: between its load of cur and its CAS, cur can only have been
// emptied by a drainer, and then the CAS fails. A drainer's CAS needs none either: whatever
// chain the word names when its CAS succeeds is the chain it takes (it reads the links only
// after). The owner may store (not CAS) into a word it saw empty: drainers never write an empty
// word (count 0, in either mode).
//
// # Plain mode: the owner's pop and push with no locked instruction
//
// The CAS on cur is the price of drainers, which are rare on most Ps: the owner is otherwise the
// word's only writer. Where a process-wide barrier exists (plainCapable: linux/amd64 outside
// -race and purego, and membarrier.Available), a P's cur may be in plain mode, marked by magPlain
// in the word itself, and the owner then pops and pushes with a plain load and a plain store,
// inside a section that the drainers wait for: an asymmetric Dekker pair (internal/membarrier;
// sdma's descAvail and announceSleeper use the same), biased towards the owner as biased locking
// is (Kawachiya, Koseki, Onodera, "Lock reservation", OOPSLA 2002; Dice, Moir, Scherer,
// "Quickly reacquirable locks", 2003), the revocation being the barrier.
//
//   - The owner's section (popCur, put): store busy = 1 (plain); load stop; load cur; if cur has
//     magPlain and stop is 0, compute and store cur's new word (plain, keeping magPlain); store
//     busy = 0 (plain). Otherwise store busy = 0 and CAS cur as without plain mode (the new word
//     keeps the old one's magPlain).
//   - A drainer that finds magPlain in a non-empty cur revokes: stop++ (a locked add), a
//     membarrier.Barrier, then it waits until busy is 0, and only then CASes cur (to 0, which also
//     ends plain mode) and takes the chain; then stop--. A drainer that finds cur without magPlain
//     CASes it as always, with no barrier: its CAS compares the whole word, so it fails if the
//     owner set magPlain since its load.
//   - The owner sets magPlain again (with a CAS, outside a section) only after s.plainAfter CAS
//     pops and pushes since it last tried: a P whose magazines are drained often (a List run empty
//     on purpose, BenchmarkPacketPath hw=goroutine) stays on the CAS path and pays one barrier per
//     plainAfter of its operations at most, not one per drain.
//
// Why no chain is taken twice or lost: a plain section stores into cur a word computed from its
// own load of cur, so it must be the only writer of cur between the two. Other writers are the
// owner itself (its sections and CASes follow one another on the P), drainers without magPlain
// in their load (their CAS expects a word without magPlain, and cur holds magPlain for the whole
// section, having it at the section's load: the first other write would have to be one of
// these, which fails, or a revoking drainer's, below) and revoking drainers, whose CAS follows
// their Barrier and their load of busy = 0. Take a section S, which loaded stop = 0, and a
// revoking drainer D. The barrier runs a full fence on S's core at some point of S's program:
//   - If S's load of stop came after that fence, it sees D's stop++ (globally visible before
//     Barrier began) unless D's stop-- too; S then takes the CAS path; or, having seen stop = 0
//     after D's stop--, it loads cur later still (x86-TSO keeps two loads in order) and so sees
//     D's CAS (before D's stop--, both locked): cur no longer holds the chain D took, nor
//     magPlain. (This is why stop is loaded before cur: the other order lets S pop from a chain
//     D took after S's load of cur.)
//   - If S's load of stop came before the fence, so did its store busy = 1 (earlier in its
//     program), which the fence made visible before Barrier returned; D's later load of busy
//     sees it or a later store, and D waits until it sees busy = 0, stored after S's store to
//     cur, which x86-TSO makes visible first: D's CAS compares against S's result.
// The owner's writes outside sections are CASes, or stores into an empty cur, which no drainer
// writes; the owner's own CAS setting magPlain is a CAS too. So cur's every transition is
// either atomic against all other writers or made while no other writer can act, and a chain is
// in exactly one place at every moment, as without plain mode. stop counts revoking drainers, so
// several may revoke at once; each waits for busy itself.
//
// magPlain is linkTouched, so that a plain pop's new word is the popped cell's link as it is
// (every cell in a magazine was handed out, so its link is linkTouched and the word below), and
// a push's link is the word it pushes on, in either mode (linkTouched|w). Words in prev and the
// depot, and links, never hold magPlain as a mode: only cur does.
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

// magPlain in a P's cur marks plain mode (see above). It is linkTouched on purpose.
const magPlain = linkTouched

// plainAfter is how many CAS pops and pushes a P's owner makes (while its cur is not in plain
// mode) before it sets plain mode again: a revocation costs one barrier (membarrier(2), about 2
// µs on the project's machine, more with busy cores) per plainAfter operations of a P at most,
// a small fraction of a nanosecond each.
const plainAfter = 1 << 14

// magazines is one P's pair of magazine words (see above), and its plain-mode words. Padded to
// its own cache line: only its P writes it, except for drainers.
type magazines struct {
	// cur is the loaded magazine, with magPlain in plain mode: popped by Get and pushed by Put of
	// the pinned owner (in plain mode a plain store inside a section, else a CAS), filled by the
	// owner from prev or the depot (store, while empty), set to plain mode by the owner (CAS),
	// emptied by drainers (CAS, after a revocation in plain mode).
	cur atomic.Uint64
	// prev is the previous magazine, full or empty: filled by the owner's Put from a full cur
	// (store, while empty), emptied by the owner (CAS: to cur, or to the depot) and by drainers.
	prev atomic.Uint64
	// busy is 1 while the owner is inside a section (see above): written only by the pinned owner
	// (plain stores, relaxed.StoreRelease32), loaded by revoking drainers after their Barrier.
	busy atomic.Uint32
	// stop counts the drainers revoking plain mode: atomic adds by drainers (the locked store of
	// their side of the pair), loaded by the owner in every section.
	stop atomic.Uint32
	// calm counts the owner's CAS pops and pushes since it last tried to set plain mode: read and
	// written only by the pinned owner (a plain field).
	calm uint32
	_    [cacheLine - 28]byte
}

func magWord(n, top uint32) uint64 { return uint64(n)<<32 | uint64(top) }

// magCount returns the number of cells in the magazine word w (cur's magPlain aside).
func magCount(w uint64) uint32 { return uint32((w &^ magPlain) >> 32) }

// magBelow returns the word that a pop leaves in cur, w before the pop, from the link l of the
// popped cell: the magazine below it (l without its flags), in w's mode. The link is stable
// while the cell is in the caller's magazine; if a drainer took the magazine meanwhile, the
// caller's CAS from w fails whatever was read.
func magBelow(l, w uint64) uint64 {
	return l&^linkTouched | w&magPlain
}

// magPush returns the magazine word w with cell i pushed on it (w has fewer than magSize cells),
// in w's mode.
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

// calmed counts a CAS pop or push of the owner that left w in cur, not in plain mode, and sets
// plain mode every plainAfter of them (s.plainAfter: only where s.biased). A failed CAS (a
// drainer took cur meanwhile) leaves cur as it is, to try again after plainAfter more.
func (s *stack[T]) calmed(m *magazines, w uint64) {
	if !plainCapable || !s.biased {
		return
	}
	if m.calm++; m.calm >= s.plainAfter {
		m.calm = 0
		if m.stop.Load() == 0 {
			m.cur.CompareAndSwap(w, w|magPlain)
		}
	}
}

// popCur is Get's common case, getLocal's first step written out for its callers to inline
// (Slab.Get and List.Get, pinned to m's P): it pops m.cur's first cell if there is one and it
// lies in the newest region, in plain mode with a plain store, else with a CAS. It returns nil
// otherwise, or if a drainer emptied cur meanwhile; the caller then takes get. A pop touches the
// next cell (see below).
func (s *stack[T]) popCur(m *magazines) *cell[T] {
	stop := m.enter()
	w := m.cur.Load()
	t := s.tab.Load()
	k := uint32(w) - t.lastFirst
	var c *cell[T]
	var nw uint64 // cur's new word
	if w > magPlain && stop == 0 && uint(k) < uint(t.lastRun.n) {
		// Plain mode (not empty), no revocation under way: cur is ours (see above). The link is
		// linkTouched and the word below: the word below in plain mode.
		c = cellAt[T](t.lastRun.base, k, s.lay.stride)
		nw = c.link.Load()
		m.storeCur(nw)
		m.leave()
	} else {
		m.leave()
		if w&^magPlain == 0 || uint(k) >= uint(t.lastRun.n) {
			return nil
		}
		c = cellAt[T](t.lastRun.base, k, s.lay.stride)
		nw = magBelow(c.link.Load(), w)
		if !m.cur.CompareAndSwap(w, nw) {
			return nil
		}
		if w < magPlain {
			s.calmed(m, nw)
		}
	}
	relaxed.StoreRelease64(&c.link, linkInUse|linkTouched) // see getLocal
	// The touch: the cell that nw names first, the one the P's next Get hands out, if it is in
	// t's newest region. Its lines, which hold the link and the object's first bytes, are then
	// on their way while the caller uses the object just handed out, instead of stalling the
	// next Get and the caller's first writes. It matters where objects come back through another
	// P: a completion on an engine's goroutine puts what a producer gets, so every reuse moves
	// the object's lines from the other core.
	//
	// A padded cell's first lines (layout.warm) are prefetched for writing (internal/prefetch:
	// PREFETCHW on amd64), so that they come exclusive: a load would leave them shared, and the
	// pop's store to the link and the caller's stores would each wait for a second transfer
	// (the locked instructions that follow them, a mapping's CAS, a ring reservation's, drain
	// the store buffer). No cell shares a line with a padded cell, so the prefetch takes no line
	// from another cell's user. Measured on BenchmarkPacketPath list+direct hw=goroutine (2
	// vCPUs, interleaved, medians of 5, with sdma's touchTx prefetching its txreqs for writing
	// too): 4.70x inline -> 2.63x (both), 3.39x (this one alone), where a cross-core transfer
	// took ~300 ns one way; 155 -> 130 ns/pkt where it took ~80 ns.
	//
	// A packed cell's link is loaded instead (its line may hold a cell in use on another core),
	// as it is where prefetch has no instruction (other architectures, purego). The prefetch and
	// the load are of a free cell's link (the owner and drainers write it, atomically); nothing
	// is read into the program.
	if k := uint32(nw) - t.lastFirst; nw&^magPlain != 0 && uint(k) < uint(t.lastRun.n) {
		next := cellAt[T](t.lastRun.base, k, s.lay.stride)
		if n := s.lay.warm; prefetch.Enabled && n > 0 {
			prefetch.WriteLines(unsafe.Pointer(next), n)
		} else {
			_ = next.link.Load()
		}
	}
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

// pinEach, as getSlowOn's id, makes it pin for each look (get) instead of playing one P.
const pinEach = -2

// getSlow is Get's last look before it grows or fails: it drains every P's magazines into the
// depot and takes a cell from there, or else any free cell of the free stack, touched or not.
// Under concurrent use it tries again, a bounded number of times, while the depot changed under
// it (another goroutine moving a magazine). It never blocks: drains and pops are lock-free, but
// for a revocation of a P's plain mode, which waits for that P's pinned owner to end a section
// of a few instructions (the drain runs unpinned, so that it may yield while it waits).
func (s *stack[T]) getSlow() (*cell[T], bool) {
	return s.getSlowOn(pinEach)
}

// getSlowOn is getSlow for the P id, as getOn is get's (or pinning for each look, with pinEach).
func (s *stack[T]) getSlowOn(id int) (*cell[T], bool) {
	placed := false
	for try := 0; ; try++ {
		d := s.depot.Load()
		placed = s.drain() || placed
		var c *cell[T]
		var p bool
		if id == pinEach {
			c, p = s.get()
		} else {
			c, p = s.getOn(id)
		}
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
// to m's P. It CASes cur in either mode (outside a section: a CAS needs none).
func (s *stack[T]) getLocal(m *magazines) (*cell[T], bool) {
	placed := false
	for {
		w := m.cur.Load()
		if w&^magPlain != 0 {
			c := s.tab.Load().cell(uint32(w), s.per)
			if m.cur.CompareAndSwap(w, magBelow(c.link.Load(), w)) {
				// The cell is ours; its next reader is the Put that gives it back (see pop).
				relaxed.StoreRelease64(&c.link, linkInUse|linkTouched)
				return c, placed
			}
			continue // a drainer emptied cur
		}
		// cur is empty (w is 0, or magPlain): no drainer writes it, and only we fill it, so the
		// stores below keep its mode.
		if p := m.prev.Load(); p != 0 {
			if m.prev.CompareAndSwap(p, 0) {
				m.cur.Store(p | w)
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
			m.cur.Store(magBelow(c.link.Load(), w))
			placed = true
		}
		relaxed.StoreRelease64(&c.link, linkInUse|linkTouched)
		return c, placed
	}
}

// putLocal pushes the free cell c (index i; its link already says free) on m.cur, first moving a
// full cur to prev, and a full prev to the depot. The caller is pinned to m's P. It CASes cur in
// either mode, as getLocal.
func (s *stack[T]) putLocal(m *magazines, c *cell[T], i uint32) {
	for {
		w := m.cur.Load()
		if magCount(w) < magSize {
			// c is ours until the CAS publishes it (and the link with it).
			relaxed.StoreRelease64(&c.link, linkTouched|w)
			if m.cur.CompareAndSwap(w, magPush(w, i)) {
				return
			}
			continue // a drainer emptied cur
		}
		if p := m.prev.Load(); p == 0 {
			if m.cur.CompareAndSwap(w, w&magPlain) { // empty, in its mode
				m.prev.Store(w &^ magPlain) // prev is empty: no drainer writes it
			}
		} else if m.prev.CompareAndSwap(p, 0) {
			s.pushChain(uint32(p), magCount(p))
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
// It reports whether it moved any. The caller is not pinned: a revocation of plain mode waits
// for the owner's section (see above).
func (s *stack[T]) drain() bool {
	moved := false
	for k := range s.mags {
		m := &s.mags[k]
		moved = s.drainWord(m, &m.cur) || moved
		moved = s.drainWord(m, &m.prev) || moved
	}
	return moved
}

// drainWord empties one magazine word of m into the depot. A cur in plain mode is revoked first
// (see above): stop++, a process-wide barrier, a wait for the owner's section to end; then the
// CAS as in the other mode, and stop-- at the end.
func (s *stack[T]) drainWord(m *magazines, w *atomic.Uint64) bool {
	revoked, took := false, false
	for {
		v := w.Load()
		if v&^magPlain == 0 {
			break
		}
		if v&magPlain != 0 && !revoked {
			s.revoke(m)
			revoked = true
			continue
		}
		if w.CompareAndSwap(v, 0) {
			s.pushChain(uint32(v), magCount(v))
			took = true
			break
		}
	}
	if revoked {
		m.stop.Add(^uint32(0)) // stop--, after the CAS: see the proof above
	}
	return took
}

// revoke is a drainer's side of the Dekker pair on m (see plain mode above): once it returns,
// the owner's sections take the CAS path until the caller's stop--. It waits for a section
// under way: the owner is pinned, a few instructions from its end, so the wait is short unless
// the system descheduled the owner's thread inside it (the drainer then yields meanwhile).
func (s *stack[T]) revoke(m *magazines) {
	m.stop.Add(1)
	membarrier.Barrier()
	s.revokes.Add(1)
	for spin := 0; m.busy.Load() != 0; spin++ {
		if spin >= revokeSpins {
			runtime.Gosched()
		}
	}
}

// revokeSpins is how many times revoke loads busy before it yields between loads: a section
// lasts a few tens of instructions.
const revokeSpins = 100
