package dma

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/internal/cacheline"
	"github.com/gosdma/gosdma/internal/pcpu"
)

// KindRegistered names a registration (Register) in Mapping.Kind.
const KindRegistered Kind = "registered"

// Registrar is implemented by mappers that register memory (ibv_reg_mr; hfi1's user SDMA does
// the same with its cache of pinned pages): the memory is mapped once, for as long as it is
// registered, and a buffer inside it has a bus address by arithmetic, with no map call, no lock
// and no allocation, and nothing to unmap when the device is done with it. Direct, IOMMU and the
// wrappers Counting and FaultInjector implement it.
type Registrar interface {
	// Register maps buf for the device in direction dir until Deregister. buf must not be empty
	// nor overlap memory already registered with this mapper (ErrInvalid). Memory of a Region is
	// pinned until Deregister. On the IOMMU the region's IOVA range is allocated and mapped once
	// (a full space is ErrMapping).
	Register(buf []byte, dir Direction) (*Registration, error)
	// Deregister undoes Register. It first stops new uses (Acquire fails from then on), then waits
	// until every use in flight is released, then unmaps: Translate of the memory faults from
	// then on. If ctx ends first it returns an error matching ctx's and changes nothing (the
	// registration is usable again), unless another Deregister of r is waiting: that one takes
	// over the wait under its own context, and r stays closed to new uses meanwhile.
	//
	// Concurrent Deregisters of one registration: one waits for the uses, the others wait for its
	// outcome. If it deregisters r, each of them returns ErrNotMapped (deregistered already); if
	// it gives up, one of them takes over (the same rules again). A waiting Deregister whose ctx
	// ends first returns an error matching ctx's and leaves the outcome to the others. So exactly
	// one of any number of Deregisters of r returns nil, once no use is in flight.
	//
	// A registration of another mapper, or one deregistered already, is ErrNotMapped; a nil ctx
	// is ErrInvalid (whether or not a use is in flight), and changes nothing.
	Deregister(ctx context.Context, r *Registration) error
	// Registered returns the live registration holding all of buf, or nil (not registered, only
	// partly, or being deregistered). It takes no lock and does not allocate.
	Registered(buf []byte) *Registration
}

// Registration states (Registration.state).
const (
	regLive  uint32 = iota // usable: Acquire succeeds
	regDying               // Deregister is waiting for the uses in flight: Acquire fails
	regDead                // deregistered: unmapped, off the snapshot
)

// regShard is one counter of a Registration's uses in flight, alone on its cache lines (see
// Registration.shards). Acquire adds 1 on the shard of the P it runs on, Release subtracts 1 on
// the shard of the P it runs on, which may be another: a shard's value alone means nothing, only
// the sum over all shards does (inFlight).
type regShard struct {
	// n: added to by Acquire (+1, and -1 when it backs out) and Release (-1): with plain adds by
	// the goroutine pinned to the shard's P (Registration.plain), else with atomic adds; atomic
	// loads by inFlight.
	n atomic.Int64
	_ [cacheline.Pad - 8]byte
}

// newShards returns the use counters of a new registration: one per P (pcpu.Max, rounded up to a
// power of two so that a P index picks its shard with a mask), each on its own cache lines, with
// a leading pad so that the first counter shares no line with the object allocated before it,
// and the spill counter after them (Registration.spill).
func newShards() (shards []regShard, spill *regShard) {
	n := 1
	for n < pcpu.Max() {
		n <<= 1
	}
	all := make([]regShard, n+2)
	return all[1 : n+1 : n+1], &all[n+1]
}

// Registration is memory registered with a mapper (see Registrar). Its methods are safe for
// concurrent use.
//
// Uses in flight are counted so that Deregister never unmaps memory a descriptor still points
// at: a user of the registration (package sdma: each txreq that has a descriptor in the memory)
// calls Acquire before handing a bus address to the device and Release once the device is done
// with it (at completion). This is the role of ib_umem's pinned pages and of the page pins
// pin_user_pages takes for hfi1's user SDMA (its pinned-page cache, which frees an entry only
// once its refcount drops): the memory stays mapped while anything may still DMA from it.
//
// # The count: per-P shards, and why a sum of 0 means no use is held
//
// The count is split over one counter per P (shards, indexed by pcpu.Hint), like a kernel
// percpu_ref: a producer's Acquire and the engine goroutine's Release on another core each write
// the line of their own P, so no line bounces between cores per packet. The goroutine may move
// to another P between Hint and the add, so unless the goroutine is pinned to its P (plain
// adds, below) every shard operation is an atomic add (on a line that is nearly always local). A
// use may be acquired on one shard and released on another.
//
// Deregister stores regDying (sequentially consistent, like every sync/atomic operation)
// and then sums the shards with one load each (inFlight); it unmaps only after a sum of 0. A
// sum of 0 is never seen while a use is held:
//
//   - Acquire adds 1 to a shard and then loads state; it keeps the use only if it saw regLive.
//     All these operations are in one total order S. A use that Acquire kept had its load before
//     Deregister's store in S, hence its add too: every load of the sum comes after it in S and
//     sees it. An Acquire whose load comes after the store sees regDying and undoes its add on the
//     same shard; a load of the sum sees that shard with the add or without it, never below the
//     value without it. So from the store on, no new use is kept, and each shard's value at the
//     sum's load is (adds of kept uses on it) - (Releases on it so far) + (at most the pending
//     adds of refused Acquires, >= 0).
//   - Summing, the kept adds give A, the number of uses ever kept, and the Releases seen give at
//     most R, the number of Releases done by the sum's last load (each Release subtracts on one
//     shard, seen there once at most). A Release follows its own Acquire, so R <= A, and the sum
//     is >= A - R, the number of uses held at the last load: a sum of 0 means none was held then,
//     and none can be kept afterwards.
//
// The shards only ever hold small values: a shard's count drifts (uses acquired on one P and
// released on another) by at most one per use, and 2^63 uses do not happen.
//
// # Plain adds: no locked instruction per use (percpu_ref)
//
// On linux/amd64 outside -race and purego, once membarrier(2)'s private expedited command is
// available (plainCounts, probed once), a registration counts with plain instructions (plain is
// true): Acquire and Release pin the goroutine to its P (pcpu.Pin: until Unpin no other goroutine
// runs there) and add to that P's shard with a load, an add and a store (ownAdd64: an ADDQ to
// memory with no LOCK prefix), so each shard has one writer at a time, the goroutine pinned to
// its P, and no add is lost. A P whose index is beyond the shards (GOMAXPROCS was raised after
// Register) adds atomically to spill instead, which no plain add touches. A plain add may wait in
// its core's store buffer while the load of state that follows it is served, so the Dekker pair
// above loses its sequentially consistent half; Deregister restores it with an asymmetric barrier
// (the kernel's percpu_ref and rcu_sync trade the same way): after its store of regDying and before
// its first load of the sum it calls processBarrier, which runs a full memory barrier on every
// thread of the process (a thread not running has passed through the scheduler, a barrier too).
// Take any Acquire, its add W then its load L of state (program order; the compiler keeps the
// atomic load after the store, each being on its memory chain), on a thread T whose barrier B the
// call ran at some point of T's instruction stream:
//
//   - W before B: W is visible to every core once B has run, hence before processBarrier
//     returns, hence to each load of the sum;
//   - B before W: then B is before L too, and the store of regDying, a full barrier completed
//     before processBarrier began, is visible to L: Acquire sees regDying and backs out.
//
// So an Acquire that kept its use had W counted by every sum, as with the atomic adds, and the
// argument above goes through unchanged: the Releases seen are at most those done, a refused
// Acquire's add and back-out are on one shard by one pinned goroutine, and a sum of 0 means no
// use is held. The barrier costs Deregister about 2 µs; Acquire and Release lose a LOCK XADD each.
type Registration struct {
	owner  *core     // the mapper it is registered with; immutable
	buf    []byte    // the registered bytes; keeps Go heap memory alive; immutable
	cpu    uintptr   // address of buf[0]; immutable
	addr   Addr      // bus address of buf[0]; immutable
	dir    Direction // immutable
	region *Region   // the pinned region behind buf, or nil (Go heap memory); immutable
	// shards are the use counters (see above); the slice header is immutable, len a power of two.
	shards []regShard
	// spill is the use counter of Ps beyond the shards when plain (atomic adds only); immutable
	// pointer.
	spill *regShard
	// plain says whether the shards are counted with plain adds by their P's pinned goroutine
	// (see above) rather than atomic adds; set by Register, immutable.
	plain bool

	// state is regLive, regDying or regDead: stored only by the Deregister that drains (dmu's
	// draining: the store of regDying under dmu, then regLive under dmu when it gives up with no
	// Deregister waiting, or regDead when done), loaded by Acquire after its add (the Dekker pair
	// with Deregister's store and inFlight's loads, above), by Registered and Live, and by
	// Deregisters under dmu. It is written once per Deregister, never per packet, and the shards
	// live in their own allocation: per-packet reads of it (Registered) share no line with a
	// written counter.
	state atomic.Uint32

	// dereg coordinates concurrent Deregisters of the registration; no packet touches it.
	dereg deregQueue
}

// deregQueue lets one Deregister of a registration drain at a time while the others wait for its
// outcome (see Registrar.Deregister): the one that drains is the only writer of
// Registration.state. Written and read by Deregisters only, under mu.
type deregQueue struct {
	mu sync.Mutex
	// draining: a Deregister holds the drain (set when it begins, cleared when it ends).
	draining bool
	// waiters: how many Deregisters wait for the draining one's outcome. The drainer that gives
	// up leaves state regDying for them when there are any (one takes over), else stores regLive.
	waiters int
	// wake is closed when the draining Deregister ends; made by the first waiter (nil while
	// nobody waits, so that a lone Deregister allocates nothing here).
	wake chan struct{}
}

// Bytes returns the registered memory. It is valid while the registration is live (for Go heap
// memory, for as long as it is referenced).
func (r *Registration) Bytes() []byte { return r.buf }

// Addr returns the bus address of the registered memory's first byte.
func (r *Registration) Addr() Addr { return r.addr }

// Dir returns the direction the memory is registered with.
func (r *Registration) Dir() Direction { return r.dir }

// Live reports whether r is registered and not being deregistered (false for a Registration that
// Register did not make, such as the zero one).
func (r *Registration) Live() bool { return r.owner != nil && r.state.Load() == regLive }

// AddrOf returns the bus address of b's first byte if b lies wholly inside the registered memory:
// arithmetic on immutable fields, no lock, no allocation. It answers the same after Deregister
// (and during it), when the address no longer translates (a descriptor carrying it halts the
// engine with a read fault): hold a use (Acquire) across the address's use, or check Live.
func (r *Registration) AddrOf(b []byte) (Addr, bool) {
	p := sliceAddr(b)
	if len(b) == 0 || len(b) > len(r.buf) || p < r.cpu || p-r.cpu > uintptr(len(r.buf)-len(b)) {
		return 0, false
	}
	return r.addr + Addr(p-r.cpu), true
}

// shard returns the use counter of the P the caller runs on now (see Registration).
func (r *Registration) shard() *regShard {
	return &r.shards[uint(pcpu.Hint())&uint(len(r.shards)-1)]
}

// Acquire records one use in flight and reports whether the registration may be used: false
// once Deregister has begun, and then nothing is recorded; false too for a Registration that
// Register did not make (the zero one, which has no counters). The use is counted on the calling
// P's shard (see Registration).
func (r *Registration) Acquire() bool {
	if r.plain {
		id := pcpu.Pin()
		if uint(id) < uint(len(r.shards)) {
			ok := r.acquirePlain(&r.shards[id].n)
			pcpu.Unpin()
			return ok
		}
		pcpu.Unpin()
		return r.acquireAtomic(r.spill)
	}
	if len(r.shards) == 0 { // not made by Register (plain is set only there)
		return false
	}
	return r.acquireAtomic(r.shard())
}

// acquirePlain is Acquire on the pinned P's own shard counter n: a plain add, then the load of
// state (Deregister's processBarrier pairs them, see Registration).
func (r *Registration) acquirePlain(n *atomic.Int64) bool {
	ownAdd64(n, 1)
	if r.state.Load() != regLive { // Deregister has begun: back out on the same shard
		ownAdd64(n, -1)
		return false
	}
	return true
}

// acquireAtomic is Acquire with an atomic add on s.
func (r *Registration) acquireAtomic(s *regShard) bool {
	s.n.Add(1)                     // seq-cst: ordered before the load of state (Dekker with Deregister)
	if r.state.Load() != regLive { // Deregister has begun: back out on the same shard
		s.n.Add(-1)
		return false
	}
	return true
}

// Release ends a use recorded by Acquire. It counts on the calling P's shard, which may differ
// from the Acquire's. Call it exactly once per Acquire that returned true, and never otherwise:
// the uses are a sum over the shards with no owner per use, so an unpaired Release is not
// detected; it cancels another holder's use, and Deregister may then unmap memory that holder is
// still using.
func (r *Registration) Release() {
	if r.plain {
		id := pcpu.Pin()
		if uint(id) < uint(len(r.shards)) {
			ownAdd64(&r.shards[id].n, -1)
			pcpu.Unpin()
			return
		}
		pcpu.Unpin()
		r.spill.n.Add(-1)
		return
	}
	if len(r.shards) == 0 { // not made by Register: no use to end (Acquire refused them all)
		return
	}
	r.shard().n.Add(-1)
}

// inFlight sums the shards and the spill counter, one load each: 0 means no use is held once
// Acquire fails (see Registration for why); a positive sum may include refused Acquires about to
// back out.
func (r *Registration) inFlight() int64 {
	n := r.spill.n.Load()
	for i := range r.shards {
		n += r.shards[i].n.Load()
	}
	return n
}

// regSet is an immutable snapshot of a mapper's registrations, sorted two ways. Writers (Register,
// Deregister) build a new one under core.regMu and store it; readers load it with no lock.
type regSet struct {
	byBus regIndex // sorted by addr
	byCPU regIndex // sorted by cpu
	// one is the only registration when there is exactly one (the common case: a sender's
	// buffer pool), else nil: busFind, hitOne and Registry.Find test its range with no search.
	one *Registration
}

// hitOne is a device access's translation when s holds one registration (the common case: a
// sender's buffer pool) and it holds all of [addr, addr+size) and allows access (lookupReg's
// success, for Translate's fast paths): the registration and addr's offset in it, else nil (then
// lookupReg and the table answer, and name the fault). size > 0 and a valid access are the
// caller's checks. It inlines.
func (s *regSet) hitOne(addr Addr, size int, access Direction) (*Registration, int) {
	r := s.one
	if r == nil {
		return nil, 0
	}
	off := uint64(addr - r.addr)
	if off >= uint64(len(r.buf)) || uint64(size) > uint64(len(r.buf))-off || r.dir != Bidirectional && r.dir != access {
		return nil, 0
	}
	return r, int(off)
}

// busFind returns the registration whose bus range holds a, or nil.
func (s *regSet) busFind(a uint64) *Registration {
	if r := s.one; r != nil {
		if a-uint64(r.addr) < uint64(len(r.buf)) {
			return r
		}
		return nil
	}
	return s.byBus.find(a)
}

// regIndex is the registrations sorted by one key (bus or CPU address of the first byte), with the
// keys in a slice of their own: the binary search reads one array of words, with no call and no
// load through a Registration until it has found the candidate (a Translate of every descriptor
// asks it first).
type regIndex struct {
	regs   []*Registration // sorted by start
	starts []uint64        // starts[i] is regs[i]'s key
}

// newRegIndex sorts a copy of l by key.
func newRegIndex(l []*Registration, key func(*Registration) uint64) regIndex {
	regs := append([]*Registration(nil), l...)
	sort.Slice(regs, func(i, j int) bool { return key(regs[i]) < key(regs[j]) })
	starts := make([]uint64, len(regs))
	for i, r := range regs {
		starts[i] = key(r)
	}
	return regIndex{regs: regs, starts: starts}
}

// find returns the registration whose range holds x, or nil.
func (ix *regIndex) find(x uint64) *Registration {
	st := ix.starts
	lo, hi := 0, len(st)
	for lo < hi { // first registration whose start is above x
		m := int(uint(lo+hi) >> 1)
		if st[m] > x {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == 0 {
		return nil
	}
	r := ix.regs[lo-1]
	if x-st[lo-1] < uint64(len(r.buf)) {
		return r
	}
	return nil
}

func busKey(r *Registration) uint64 { return uint64(r.addr) }
func cpuKey(r *Registration) uint64 { return uint64(r.cpu) }

// regs is the registration part of core.
type regs struct {
	// set: store-release of a new snapshot by writers (under core.regMu); load-acquire by
	// readers. The first word of the mapper's head line (see table).
	set atomic.Pointer[regSet]
}

// lookupReg answers a device access or a sync from the registrations: the bytes if one
// registration holds the whole range with a fitting direction (exact: as table.lookup), else the
// reason ("" with nil bytes: no registration holds addr). No lock, no allocation.
func (rg *regs) lookupReg(addr Addr, size int, access Direction, exact bool) ([]byte, FaultReason) {
	s := rg.set.Load()
	if s == nil {
		return nil, ""
	}
	r := s.busFind(uint64(addr))
	if r == nil {
		return nil, ""
	}
	off := int(addr - r.addr)
	switch {
	case size <= 0 || addr+Addr(size) < addr:
		return nil, ReasonBadLength
	case size > len(r.buf)-off:
		return nil, ReasonPartlyMapped
	case exact && r.dir != Bidirectional && r.dir != access || !exact && !r.dir.Allows(access):
		return nil, ReasonDirection
	}
	return r.buf[off : off+size : off+size], ""
}

// Registered returns the live registration holding all of buf, or nil (see Registrar).
func (rg *regs) Registered(buf []byte) *Registration {
	r, _ := rg.Registry().Find(buf)
	if r == nil || r.state.Load() != regLive {
		return nil
	}
	return r
}

// Registry is a mapper's registered memory as seen by a caller that adds buffers often (sdma's
// adds): Any tells, with one load and no interface call, whether anything may be registered, so
// that the lookup (Registrar.Registered) can be skipped when nothing is. Direct and IOMMU give
// theirs (Registry); the wrappers (Counting, FaultInjector) give none: look up through them.
type Registry regs

// Registry returns the mapper's Registry, which lives as long as the mapper.
func (rg *regs) Registry() *Registry { return (*Registry)(rg) }

// Any reports whether memory may be registered with the mapper: false means that nothing was
// ever registered, and Registered returns nil for every buffer (the snapshot it loads is the one
// Any loads). Inlines: one load.
func (r *Registry) Any() bool { return r.set.Load() != nil }

// Find returns the registration holding all of buf and buf's bus address, or nil: Registered's
// lookup for a caller that Acquires what it finds (package sdma's adds), without Registered's
// interface call and without its check that the registration is live, which Acquire makes
// anyway (it fails once Deregister has begun). No lock, no allocation; it inlines, and with one
// registration it makes no call.
func (r *Registry) Find(buf []byte) (*Registration, Addr) {
	s := r.set.Load()
	if s == nil {
		return nil, 0
	}
	x := s.one
	if x == nil {
		return s.findSearch(buf)
	}
	off := sliceAddr(buf) - x.cpu
	// len(buf) in [1, len(x.buf)-off], with off < len(x.buf): one unsigned comparison each.
	if off >= uintptr(len(x.buf)) || uint(len(buf))-1 >= uint(len(x.buf))-uint(off) {
		return nil, 0
	}
	return x, x.addr + Addr(off)
}

// findSearch is Find with several registrations: a binary search.
func (s *regSet) findSearch(buf []byte) (*Registration, Addr) {
	x := s.byCPU.find(uint64(sliceAddr(buf)))
	if x == nil {
		return nil, 0
	}
	addr, ok := x.AddrOf(buf)
	if !ok {
		return nil, 0
	}
	return x, addr
}

// publish stores a snapshot of l (sorted anew both ways). regMu held.
func (rg *regs) publish(l []*Registration) {
	s := &regSet{byBus: newRegIndex(l, busKey), byCPU: newRegIndex(l, cpuKey)}
	if len(l) == 1 {
		s.one = l[0]
	}
	rg.set.Store(s)
}

// current returns the snapshot's registrations (nil if none). regMu held.
func (rg *regs) current() []*Registration {
	if s := rg.set.Load(); s != nil {
		return s.byCPU.regs
	}
	return nil
}

// Register maps buf once for the device (see Registrar).
func (c *core) Register(buf []byte, dir Direction) (*Registration, error) {
	if len(buf) == 0 || !dir.Valid() {
		return nil, fmt.Errorf("dma: register %d bytes %v: %w", len(buf), dir, ErrInvalid)
	}
	region, err := pinBuf(buf)
	if err != nil {
		return nil, err
	}
	r := &Registration{owner: c, buf: buf[:len(buf):len(buf)], cpu: sliceAddr(buf), dir: dir, region: region, plain: plainCounts()}
	r.shards, r.spill = newShards()
	c.regMu.Lock()
	defer c.regMu.Unlock()
	cur := c.current()
	for _, x := range cur {
		if r.cpu < x.cpu+uintptr(len(x.buf)) && x.cpu < r.cpu+uintptr(len(r.buf)) {
			if region != nil {
				region.unpin()
			}
			return nil, fmt.Errorf("dma: register [%#x,+%d): overlaps a registration: %w", r.cpu, len(buf), ErrInvalid)
		}
	}
	if c.iommu != nil {
		// The IOVA range is allocated and mapped once, as a record of the page table (so that
		// the allocator skips it and Live reports it); translations find it in the snapshot.
		v := record{buf: r.buf, dir: dir, kind: KindRegistered}
		if err := c.iommu.assign(&v); err != nil {
			if region != nil {
				region.unpin()
			}
			return nil, fmt.Errorf("dma: register %d bytes: %w", len(buf), err)
		}
		r.addr = v.addr
	} else {
		r.addr = Addr(r.cpu)
	}
	c.publish(append(append(make([]*Registration, 0, len(cur)+1), cur...), r))
	return r, nil
}

// Deregister undoes Register once no use is in flight (see Registrar).
func (c *core) Deregister(ctx context.Context, r *Registration) error {
	if ctx == nil {
		return fmt.Errorf("dma: deregister: nil context: %w", ErrInvalid)
	}
	if r == nil || r.owner != c {
		return fmt.Errorf("dma: deregister of a registration of another mapper: %w", ErrNotMapped)
	}
	takeover, err := r.beginDrain(ctx)
	if err != nil {
		return err
	}
	if r.plain && !takeover {
		// Every plain add before it is counted; every Acquire after it sees regDying. A takeover
		// needs none: state has been regDying since the barrier of the Deregister that gave up.
		processBarrier()
	}
	if err := r.drain(ctx); err != nil {
		n := r.inFlight()
		r.endDrain(false)
		return fmt.Errorf("dma: deregister [%#x,+%d): %d uses in flight: %w", uint64(r.addr), len(r.buf), n, err)
	}
	c.regMu.Lock()
	cur := c.current()
	l := make([]*Registration, 0, len(cur))
	for _, x := range cur {
		if x != r {
			l = append(l, x)
		}
	}
	c.publish(l)
	if c.iommu != nil {
		c.tab.remove(r.addr, len(r.buf), r.dir, KindRegistered)
	}
	r.state.Store(regDead)
	c.regMu.Unlock()
	if r.region != nil {
		r.region.unpin()
	}
	r.endDrain(true)
	return nil
}

// beginDrain makes the calling Deregister the one that drains r, after waiting for the outcome
// of another that drains already (see Registrar.Deregister): it stores regDying, or finds it
// left by a Deregister that gave up while this one waited (takeover: no barrier needed). It fails
// with ErrNotMapped once r is deregistered, and with ctx's error if ctx ends while it waits.
func (r *Registration) beginDrain(ctx context.Context) (takeover bool, err error) {
	q := &r.dereg
	q.mu.Lock()
	for q.draining {
		if q.wake == nil {
			q.wake = make(chan struct{})
		}
		wake := q.wake
		q.waiters++
		q.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		}
		q.mu.Lock()
		q.waiters--
		if err != nil {
			if !q.draining && q.waiters == 0 && r.state.Load() == regDying {
				r.state.Store(regLive) // left to the waiters by a Deregister that gave up: none is left
			}
			q.mu.Unlock()
			return false, fmt.Errorf("dma: deregister [%#x,+%d): while another deregistered it: %w", uint64(r.addr), len(r.buf), err)
		}
	}
	switch r.state.Load() {
	case regDead:
		q.mu.Unlock()
		return false, fmt.Errorf("dma: deregister [%#x,+%d): deregistered already: %w", uint64(r.addr), len(r.buf), ErrNotMapped)
	case regDying:
		takeover = true
	default:
		r.state.Store(regDying) // seq-cst: the Dekker pair with Acquire (see Registration)
	}
	q.draining = true
	q.mu.Unlock()
	return takeover, nil
}

// endDrain ends the calling Deregister's drain and wakes the Deregisters waiting for its outcome:
// done (r is regDead), or given up: then r stays regDying if one waits (it takes over), else it
// is live again.
func (r *Registration) endDrain(done bool) {
	q := &r.dereg
	q.mu.Lock()
	if !done && q.waiters == 0 {
		r.state.Store(regLive)
	}
	q.draining = false
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
	q.mu.Unlock()
}

// drain waits until no use of r is in flight, polling with a backoff from 1µs to 1ms, or until
// ctx ends. r is regDying.
func (r *Registration) drain(ctx context.Context) error {
	wait := time.Microsecond
	for r.inFlight() != 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, time.Millisecond)
	}
	return nil
}

// registrations lists the live registrations as mappings (for Live), and their number.
func (rg *regs) registrations() []Mapping {
	s := rg.set.Load()
	if s == nil {
		return nil
	}
	out := make([]Mapping, 0, len(s.byBus.regs))
	for _, r := range s.byBus.regs {
		out = append(out, Mapping{Addr: r.addr, Size: len(r.buf), Dir: r.dir, Kind: KindRegistered})
	}
	return out
}

// Register forwards to the wrapped mapper's Register (ErrInvalid if it has none).
func (c *Counting) Register(buf []byte, dir Direction) (*Registration, error) {
	return registerVia(c.m, buf, dir)
}

// Deregister forwards to the wrapped mapper's Deregister.
func (c *Counting) Deregister(ctx context.Context, r *Registration) error {
	return deregisterVia(c.m, ctx, r)
}

// Registered forwards to the wrapped mapper's Registered.
func (c *Counting) Registered(buf []byte) *Registration { return registeredVia(c.m, buf) }

// Register forwards to the wrapped mapper's Register (registration is not subject to injection).
func (f *FaultInjector) Register(buf []byte, dir Direction) (*Registration, error) {
	return registerVia(f.m, buf, dir)
}

// Deregister forwards to the wrapped mapper's Deregister.
func (f *FaultInjector) Deregister(ctx context.Context, r *Registration) error {
	return deregisterVia(f.m, ctx, r)
}

// Registered forwards to the wrapped mapper's Registered.
func (f *FaultInjector) Registered(buf []byte) *Registration { return registeredVia(f.m, buf) }

func registerVia(m Mapper, buf []byte, dir Direction) (*Registration, error) {
	if rg, ok := m.(Registrar); ok {
		return rg.Register(buf, dir)
	}
	return nil, fmt.Errorf("dma: register: the mapper does not register memory: %w", ErrInvalid)
}

func deregisterVia(m Mapper, ctx context.Context, r *Registration) error {
	if ctx == nil { // as core's Deregister, whatever m is (Registrar: a nil ctx is ErrInvalid)
		return fmt.Errorf("dma: deregister: nil context: %w", ErrInvalid)
	}
	if rg, ok := m.(Registrar); ok {
		return rg.Deregister(ctx, r)
	}
	return fmt.Errorf("dma: deregister: the mapper does not register memory: %w", ErrNotMapped)
}

func registeredVia(m Mapper, buf []byte) *Registration {
	if rg, ok := m.(Registrar); ok {
		return rg.Registered(buf)
	}
	return nil
}

var (
	_ Registrar = (*Direct)(nil)
	_ Registrar = (*IOMMU)(nil)
	_ Registrar = (*Counting)(nil)
	_ Registrar = (*FaultInjector)(nil)
)
