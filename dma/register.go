package dma

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/cpu"
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
	// registration is usable again). A registration of another mapper, or one deregistered
	// already, is ErrNotMapped.
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

// regShards is the number of in-flight use counters of a Registration: uses by different
// goroutines (different keys) mostly land on different cache lines.
const regShards = 8

// regShard is one use counter on its own cache line.
type regShard struct {
	n atomic.Int64 // uses in flight under keys of this shard: Acquire adds, Release subtracts
	_ cpu.CacheLinePad
}

// Registration is memory registered with a mapper (see Registrar). Its methods are safe for
// concurrent use.
//
// Uses in flight are counted so that Deregister never unmaps memory a descriptor still points
// at: a user of the registration (package sdma: each txreq that has a descriptor in the memory)
// calls Acquire before handing a bus address to the device and Release once the device is done
// with it (at completion). The count is split over regShards counters picked by a key, so that
// senders on different cores do not share one counter's cache line.
type Registration struct {
	owner  *core     // the mapper it is registered with; immutable
	buf    []byte    // the registered bytes; keeps Go heap memory alive; immutable
	cpu    uintptr   // address of buf[0]; immutable
	addr   Addr      // bus address of buf[0]; immutable
	dir    Direction // immutable
	region *Region   // the pinned region behind buf, or nil (Go heap memory); immutable

	// state is regLive, regDying or regDead. Deregister stores regDying (then back to regLive on
	// cancellation, or regDead when done); Acquire loads it after its increment, Deregister
	// loads the shards after its store: with sequentially consistent atomics either the
	// Acquire sees regDying and backs out, or Deregister sees the Acquire's count and waits.
	state atomic.Uint32
	uses  [regShards]regShard
}

// Bytes returns the registered memory. It is valid while the registration is live (for Go heap
// memory, for as long as it is referenced).
func (r *Registration) Bytes() []byte { return r.buf }

// Addr returns the bus address of the registered memory's first byte.
func (r *Registration) Addr() Addr { return r.addr }

// Dir returns the direction the memory is registered with.
func (r *Registration) Dir() Direction { return r.dir }

// Live reports whether r is registered and not being deregistered.
func (r *Registration) Live() bool { return r.state.Load() == regLive }

// AddrOf returns the bus address of b's first byte if b lies wholly inside the registered memory:
// arithmetic on immutable fields, no lock, no allocation.
func (r *Registration) AddrOf(b []byte) (Addr, bool) {
	p := sliceAddr(b)
	if len(b) == 0 || len(b) > len(r.buf) || p < r.cpu || p-r.cpu > uintptr(len(r.buf)-len(b)) {
		return 0, false
	}
	return r.addr + Addr(p-r.cpu), true
}

// Acquire records one use in flight under key (any number; Release must pass the same one) and
// reports whether the registration may be used: false once Deregister has begun, and then
// nothing is recorded.
func (r *Registration) Acquire(key uintptr) bool {
	s := &r.uses[key%regShards]
	s.n.Add(1)
	if r.state.Load() != regLive {
		s.n.Add(-1)
		return false
	}
	return true
}

// Release ends a use recorded by Acquire with the same key.
func (r *Registration) Release(key uintptr) { r.uses[key%regShards].n.Add(-1) }

// inFlight sums the shards, one at a time (exact once Acquire fails: counts only go down then,
// apart from an Acquire's brief increment before it backs out).
func (r *Registration) inFlight() int64 {
	var n int64
	for i := range r.uses {
		n += r.uses[i].n.Load()
	}
	return n
}

// regSet is an immutable snapshot of a mapper's registrations, sorted two ways. Writers (Register,
// Deregister) build a new one under core.regMu and store it; readers load it with no lock.
type regSet struct {
	byBus []*Registration // sorted by addr
	byCPU []*Registration // sorted by cpu
}

// find returns the registration of l (sorted by key) whose range holds x, or nil.
func find(l []*Registration, x uint64, key func(*Registration) uint64) *Registration {
	lo, hi := 0, len(l)
	for lo < hi { // first registration whose start is above x
		m := int(uint(lo+hi) >> 1)
		if key(l[m]) > x {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == 0 {
		return nil
	}
	r := l[lo-1]
	if x-key(r) < uint64(len(r.buf)) {
		return r
	}
	return nil
}

func busKey(r *Registration) uint64 { return uint64(r.addr) }
func cpuKey(r *Registration) uint64 { return uint64(r.cpu) }

// regs is the registration part of core.
type regs struct {
	regMu sync.Mutex             // serialises writers of set
	set   atomic.Pointer[regSet] // store-release of a new snapshot by writers; load-acquire by readers
}

// lookupReg answers a device access or a sync from the registrations: the bytes if one
// registration holds the whole range with a fitting direction (exact: as table.lookup), else the
// reason ("" with nil bytes: no registration holds addr). No lock, no allocation.
func (rg *regs) lookupReg(addr Addr, size int, access Direction, exact bool) ([]byte, FaultReason) {
	s := rg.set.Load()
	if s == nil {
		return nil, ""
	}
	r := find(s.byBus, uint64(addr), busKey)
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
	s := rg.set.Load()
	if s == nil || len(buf) == 0 {
		return nil
	}
	r := find(s.byCPU, uint64(sliceAddr(buf)), cpuKey)
	if r == nil || r.state.Load() != regLive {
		return nil
	}
	if _, ok := r.AddrOf(buf); !ok {
		return nil
	}
	return r
}

// publish stores a snapshot of l (sorted anew both ways). regMu held.
func (rg *regs) publish(l []*Registration) {
	bus := append([]*Registration(nil), l...)
	sort.Slice(bus, func(i, j int) bool { return bus[i].addr < bus[j].addr })
	cpus := append([]*Registration(nil), l...)
	sort.Slice(cpus, func(i, j int) bool { return cpus[i].cpu < cpus[j].cpu })
	rg.set.Store(&regSet{byBus: bus, byCPU: cpus})
}

// current returns the snapshot's registrations (nil if none). regMu held.
func (rg *regs) current() []*Registration {
	if s := rg.set.Load(); s != nil {
		return s.byCPU
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
	r := &Registration{owner: c, buf: buf[:len(buf):len(buf)], cpu: sliceAddr(buf), dir: dir, region: region}
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
	if r == nil || r.owner != c {
		return fmt.Errorf("dma: deregister of a registration of another mapper: %w", ErrNotMapped)
	}
	if !r.state.CompareAndSwap(regLive, regDying) {
		return fmt.Errorf("dma: deregister [%#x,+%d): not registered: %w", uint64(r.addr), len(r.buf), ErrNotMapped)
	}
	if err := r.drain(ctx); err != nil {
		r.state.Store(regLive)
		return fmt.Errorf("dma: deregister [%#x,+%d): %d uses in flight: %w", uint64(r.addr), len(r.buf), r.inFlight(), err)
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
	return nil
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
	out := make([]Mapping, 0, len(s.byBus))
	for _, r := range s.byBus {
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
