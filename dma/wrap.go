package dma

import (
	"fmt"
	"reflect"
	"sync/atomic"
)

// Counting wraps a Mapper and counts each call, the way a driver interposes on
// ib_dma_mapping_ops: every method counts, then calls the wrapped mapper. It is safe for
// concurrent use if the wrapped mapper is. Counters are plain atomics with no ordering role. The
// zero value wraps nothing and is not usable (its calls panic, as a nil receiver's do); call
// NewCounting.
type Counting struct {
	m Mapper // the wrapped mapper; immutable

	// One counter per operation, incremented by that method before it calls m (each is an
	// independent statistic; Counts reads them one at a time, not as a snapshot).
	mapSingle, unmapSingle, mapPage, unmapPage, mapSG, unmapSG  atomic.Uint64
	syncCPU, syncDevice, allocCoherent, freeCoherent, translate atomic.Uint64
	errs                                                        atomic.Uint64 // calls that returned an error
}

// Counts is a reading of a Counting's counters.
type Counts struct {
	// Calls of the Mapper method of each name, failed ones included: MapSingleSole and
	// UnmapSingleSole count as MapSingle and UnmapSingle, and each entry of an UnmapBatch as
	// its kind's Unmap call. Counts reads them one at a time, not as a snapshot.
	MapSingle, UnmapSingle, MapPage, UnmapPage, MapSG, UnmapSG int
	SyncForCPU, SyncForDevice, AllocCoherent, FreeCoherent     int
	Translate                                                  int
	Errors                                                     int // calls of any kind that failed
}

// NewCounting wraps m; a nil m (or a nil pointer of a mapper type) wraps a new Direct (as a nil
// sdma.Config.Mapper is one), where it used to be taken and every call through the wrapper
// panicked on it.
func NewCounting(m Mapper) *Counting { return &Counting{m: orDirect(m)} }

// orDirect is m, or a new Direct if m is nil or a nil pointer in the interface (a typed nil,
// such as a nil *IOMMU, whose every method would panic): the wrappers' constructors.
func orDirect(m Mapper) Mapper {
	if isNilMapper(m) {
		return NewDirect()
	}
	return m
}

// isNilMapper reports whether m is nil or a nil pointer in the interface (a typed nil, such as
// a nil *IOMMU, whose every method would panic).
func isNilMapper(m Mapper) bool {
	if m == nil {
		return true
	}
	v := reflect.ValueOf(m)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Unwrap returns the wrapped mapper.
func (c *Counting) Unwrap() Mapper { return c.m }

// Counts returns the counters.
func (c *Counting) Counts() Counts {
	return Counts{
		MapSingle: int(c.mapSingle.Load()), UnmapSingle: int(c.unmapSingle.Load()),
		MapPage: int(c.mapPage.Load()), UnmapPage: int(c.unmapPage.Load()),
		MapSG: int(c.mapSG.Load()), UnmapSG: int(c.unmapSG.Load()),
		SyncForCPU: int(c.syncCPU.Load()), SyncForDevice: int(c.syncDevice.Load()),
		AllocCoherent: int(c.allocCoherent.Load()), FreeCoherent: int(c.freeCoherent.Load()),
		Translate: int(c.translate.Load()), Errors: int(c.errs.Load()),
	}
}

// Faults returns the wrapped mapper's fault count.
func (c *Counting) Faults() uint64 { return faultsOf(c.m) }

func (c *Counting) count(err error) error {
	if err != nil {
		c.errs.Add(1)
	}
	return err
}

// MapSingle counts and calls the wrapped ib_dma_map_single.
func (c *Counting) MapSingle(buf []byte, dir Direction) (Addr, error) {
	c.mapSingle.Add(1)
	a, err := c.m.MapSingle(buf, dir)
	return a, c.count(err)
}

// UnmapSingle counts and calls the wrapped ib_dma_unmap_single.
func (c *Counting) UnmapSingle(addr Addr, size int, dir Direction) error {
	c.unmapSingle.Add(1)
	return c.count(c.m.UnmapSingle(addr, size, dir))
}

// MapPage counts and calls the wrapped ib_dma_map_page.
func (c *Counting) MapPage(p Page, offset, size int, dir Direction) (Addr, error) {
	c.mapPage.Add(1)
	a, err := c.m.MapPage(p, offset, size, dir)
	return a, c.count(err)
}

// UnmapPage counts and calls the wrapped ib_dma_unmap_page.
func (c *Counting) UnmapPage(addr Addr, size int, dir Direction) error {
	c.unmapPage.Add(1)
	return c.count(c.m.UnmapPage(addr, size, dir))
}

// MapSG counts and calls the wrapped ib_dma_map_sg.
func (c *Counting) MapSG(sg []SG, dir Direction) (int, error) {
	c.mapSG.Add(1)
	n, err := c.m.MapSG(sg, dir)
	return n, c.count(err)
}

// UnmapSG counts and calls the wrapped ib_dma_unmap_sg.
func (c *Counting) UnmapSG(sg []SG, dir Direction) error {
	c.unmapSG.Add(1)
	return c.count(c.m.UnmapSG(sg, dir))
}

// SyncForCPU counts and calls the wrapped ib_dma_sync_single_for_cpu.
func (c *Counting) SyncForCPU(addr Addr, size int, dir Direction) error {
	c.syncCPU.Add(1)
	return c.count(c.m.SyncForCPU(addr, size, dir))
}

// SyncForDevice counts and calls the wrapped ib_dma_sync_single_for_device.
func (c *Counting) SyncForDevice(addr Addr, size int, dir Direction) error {
	c.syncDevice.Add(1)
	return c.count(c.m.SyncForDevice(addr, size, dir))
}

// AllocCoherent counts and calls the wrapped ib_dma_alloc_coherent.
func (c *Counting) AllocCoherent(size int) (*Coherent, error) {
	c.allocCoherent.Add(1)
	co, err := c.m.AllocCoherent(size)
	return co, c.count(err)
}

// FreeCoherent counts and calls the wrapped ib_dma_free_coherent.
func (c *Counting) FreeCoherent(co *Coherent) error {
	c.freeCoherent.Add(1)
	return c.count(c.m.FreeCoherent(co))
}

// Translate counts and calls the wrapped device-side translation.
func (c *Counting) Translate(addr Addr, size int, access Direction) ([]byte, error) {
	c.translate.Add(1)
	b, err := c.m.Translate(addr, size, access)
	return b, c.count(err)
}

// FaultInjector wraps a Mapper and makes chosen map calls fail with ErrMapping (and, if asked,
// every Translate fault), to drive the failure paths of txadd and of the hardware model. Unmaps,
// syncs and FreeCoherent always pass through, and so does a map call the wrapped mapper refuses
// for its arguments (ErrInvalid: an empty buffer, a bad direction or page range, no SG entries,
// a size that is not positive) or for a closed Region's memory (ErrClosed): it is not one that
// FailNth, FailFraction and FailAll count or fail, as with the IOMMU's own injection. It is safe for concurrent use if the wrapped mapper
// is; its settings may be changed while it is in use. The zero value wraps nothing and is not
// usable (its calls panic, as a nil receiver's do); call NewFaultInjector.
type FaultInjector struct {
	m   Mapper   // the wrapped mapper; immutable
	inj injector // map-call failures
	// failTranslate makes Translate fault; set by FailTranslate, read by Translate.
	failTranslate atomic.Bool
	// faults counts the Translate faults injected here (the wrapped mapper counts its own).
	faults atomic.Uint64
}

// NewFaultInjector wraps m, initially injecting nothing; a nil m wraps a new Direct (see
// NewCounting).
func NewFaultInjector(m Mapper) *FaultInjector { return &FaultInjector{m: orDirect(m)} }

// Unwrap returns the wrapped mapper.
func (f *FaultInjector) Unwrap() Mapper { return f.m }

// FailNth makes the n-th map call from now (counting from 1) fail, once. n <= 0 disarms it.
func (f *FaultInjector) FailNth(n int) { f.inj.setNth(n) }

// FailFraction makes a fraction frac (0..1) of map calls fail, chosen by a generator seeded with
// seed: the same seed and the same sequence of calls fail the same calls. frac 0 disarms it. A
// frac outside 0..1 (or NaN) is ErrInvalid and changes nothing.
func (f *FaultInjector) FailFraction(frac float64, seed int64) error {
	if !(frac >= 0 && frac <= 1) {
		return fmt.Errorf("dma: FailFraction %v: want a fraction, 0..1: %w", frac, ErrInvalid)
	}
	f.inj.setFraction(frac, seed)
	return nil
}

// FailAll makes every map call fail while on is true.
func (f *FaultInjector) FailAll(on bool) { f.inj.all.Store(on) }

// FailTranslate makes every Translate fault (Reason ReasonInjected) while on is true.
func (f *FaultInjector) FailTranslate(on bool) { f.failTranslate.Store(on) }

// Injected returns the number of map calls failed so far.
func (f *FaultInjector) Injected() uint64 { return f.inj.injected.Load() }

// Faults returns the Translate faults injected here plus those of the wrapped mapper.
func (f *FaultInjector) Faults() uint64 { return f.faults.Load() + faultsOf(f.m) }

func injected(op string) error { return fmt.Errorf("dma: %s (injected): %w", op, ErrMapping) }

// MapSingle is the wrapped ib_dma_map_single, unless this call is chosen to fail.
func (f *FaultInjector) MapSingle(buf []byte, dir Direction) (Addr, error) {
	if !refusedBuf(buf, dir) && f.inj.fail() {
		return 0, injected("map_single")
	}
	return f.m.MapSingle(buf, dir)
}

// UnmapSingle passes through.
func (f *FaultInjector) UnmapSingle(addr Addr, size int, dir Direction) error {
	return f.m.UnmapSingle(addr, size, dir)
}

// MapPage is the wrapped ib_dma_map_page, unless this call is chosen to fail.
func (f *FaultInjector) MapPage(p Page, offset, size int, dir Direction) (Addr, error) {
	if !refusedPage(p, offset, size, dir) && f.inj.fail() {
		return 0, injected("map_page")
	}
	return f.m.MapPage(p, offset, size, dir)
}

// UnmapPage passes through.
func (f *FaultInjector) UnmapPage(addr Addr, size int, dir Direction) error {
	return f.m.UnmapPage(addr, size, dir)
}

// MapSG is the wrapped ib_dma_map_sg, unless this call is chosen to fail.
func (f *FaultInjector) MapSG(sg []SG, dir Direction) (int, error) {
	if !refusedSG(sg, dir) && f.inj.fail() {
		clearSG(sg) // as a failed MapSG of the mapper does
		return 0, injected("map_sg")
	}
	return f.m.MapSG(sg, dir)
}

// UnmapSG passes through.
func (f *FaultInjector) UnmapSG(sg []SG, dir Direction) error { return f.m.UnmapSG(sg, dir) }

// SyncForCPU passes through.
func (f *FaultInjector) SyncForCPU(addr Addr, size int, dir Direction) error {
	return f.m.SyncForCPU(addr, size, dir)
}

// SyncForDevice passes through.
func (f *FaultInjector) SyncForDevice(addr Addr, size int, dir Direction) error {
	return f.m.SyncForDevice(addr, size, dir)
}

// AllocCoherent is the wrapped ib_dma_alloc_coherent, unless this call is chosen to fail.
func (f *FaultInjector) AllocCoherent(size int) (*Coherent, error) {
	if coherentSizeOK(size) && f.inj.fail() {
		return nil, injected("alloc_coherent")
	}
	return f.m.AllocCoherent(size)
}

// FreeCoherent passes through.
func (f *FaultInjector) FreeCoherent(c *Coherent) error { return f.m.FreeCoherent(c) }

// Translate faults if FailTranslate is on, else passes through.
func (f *FaultInjector) Translate(addr Addr, size int, access Direction) ([]byte, error) {
	if f.failTranslate.Load() {
		f.faults.Add(1)
		return nil, &Fault{Addr: addr, Size: size, Access: access, Reason: ReasonInjected}
	}
	return f.m.Translate(addr, size, access)
}

var (
	_ Mapper = (*Counting)(nil)
	_ Mapper = (*FaultInjector)(nil)
)
