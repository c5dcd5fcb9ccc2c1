package sdma

import (
	"context"
	"fmt"
	"github.com/gosdma/gosdma/internal/vlmap"
	"github.com/gosdma/gosdma/sdma/internal/sm"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/sinklanes"
	"github.com/gosdma/gosdma/ring"
)

// Limits of a Config.
const (
	MaxEngines      = 16      // TXE_NUM_SDMA_ENGINES
	MaxVLs          = 8       // HFI1_MAX_VLS_SUPPORTED (data VLs)
	DefaultDescIntr = 64      // SDMA_DESC_INTR: a count interrupt 64 descriptors after the last interrupt
	defaultEngines  = 1       // gosdma's default; the chip has 16
	waitBatchSize   = 20      // SDMA_WAIT_BATCH_SIZE: waiters woken per completion pass at most
	tailUpdateBatch = 32      // SDMA_TAIL_UPDATE_THRESH + 1: SendList publishes at least this often
	ahgEntryBytes   = 64      // bytes an AHG entry holds (COPY stores at most this much of the header)
	maxPacketBytes  = 1 << 14 // MAX_SDMA_PKT_SIZE rounded up to a dword: the most one packet reads
)

// WaitStrategy is how an engine's hardware-model goroutine waits when the ring is empty.
type WaitStrategy int

const (
	// WaitSpinPark spins briefly, then parks until a producer rings the doorbell (the default).
	WaitSpinPark WaitStrategy = iota
	// WaitBusyPoll never parks: the lowest latency, at the price of a core per engine.
	WaitBusyPoll
	// WaitPark parks as soon as the ring is empty.
	WaitPark
)

// String names the strategy.
func (w WaitStrategy) String() string {
	switch w {
	case WaitSpinPark:
		return "spin-park"
	case WaitBusyPoll:
		return "busy-poll"
	case WaitPark:
		return "park"
	}
	return "WaitStrategy(" + itoa(int(w)) + ")"
}

// CompletionMode is who runs an engine's completion pass (hfi1: sdma_make_progress).
type CompletionMode int

const (
	// CompleteInterrupt: the hardware model runs the pass itself on each interrupt it raises
	// (INT_REQ, DescIntr descriptors after the last interrupt, going idle), as the kernel's interrupt handler does.
	CompleteInterrupt CompletionMode = iota
	// CompletePoll: interrupts are only counted; the caller runs the pass with Engine.Poll.
	CompletePoll
)

// String names the mode.
func (m CompletionMode) String() string {
	switch m {
	case CompleteInterrupt:
		return "interrupt"
	case CompletePoll:
		return "poll"
	}
	return "CompletionMode(" + itoa(int(m)) + ")"
}

// Config configures a Device. The zero value is valid: one engine, a 2048-descriptor ring, a
// count interrupt 64 descriptors after the last interrupt, spin-then-park, completion on
// interrupts, the direct mapper, a discarding sink.
type Config struct {
	// Mapper maps memory for the device; nil means dma.NewDirect(). Its unmaps and Translate
	// run in the engines' passes and must not panic: such a panic is not recovered (see
	// dma.Mapper: the program ends, or the engine waits for ever).
	Mapper dma.Mapper
	// Engines is the number of SDMA engines, 1..16; 0 means 1.
	Engines int
	// RingSize is each engine's descriptor ring size (hfi1: sdma_descq_cnt): a power of two in
	// 64..32768; 0 means 2048. Unlike the kernel, which falls back to the default, a bad value
	// is an error.
	RingSize int
	// DescIntr is the count-interrupt interval in descriptors (hfi1: sdma_desct_intr): the
	// count interrupt comes DescIntr descriptors after the engine's last interrupt of any kind
	// (sdma_engine_interrupt reloads the count on each, ProgressSchedule's included), and none
	// comes before the engine's first interrupt (init_sdma_regs writes 0 to the count register).
	// 1..RingSize; 0 means 64.
	DescIntr int
	// Wait is how an idle hardware-model goroutine waits.
	Wait WaitStrategy
	// Completion chooses who runs the completion pass.
	Completion CompletionMode
	// Manual starts no hardware-model goroutine: the caller drives each engine with Process.
	Manual bool
	// Sink receives the packets; nil means a sink owned by the device that drops them. A typed
	// nil (a nil *udpsink.Sink in the interface) is refused, as for Mapper. A Sink with a method
	// Validate() error (sdmatest.FaultSink and FaultBatchSink have one) is validated once, by
	// NewDevice: a non-nil answer refuses the device, as it is if it is a *ConfigError (naming
	// the sink's field), else as a *ConfigError for Sink whose Reason quotes it. A Sink with a
	// method Engines() int says it takes engine numbers 0..Engines()-1 (udpsink.Sink:
	// udpsink.Config.Engines; sdmatest.FaultSink and FaultBatchSink answer the wrapped sink's):
	// NewDevice reads it once and refuses (a *ConfigError for Sink, naming both sizes) a sink
	// that takes fewer than Engines, which would refuse every packet of the engines past it after
	// their sends succeeded, the txreqs completing OK. A negative answer says nothing (a wrapper
	// over a sink without the method gives -1): such a sink, and one without the method, is
	// taken as before.
	Sink Sink
	// NumVLs is the number of virtual lanes mapped to engines, 1..8 and at most Engines; 0 means
	// min(Engines, 8).
	NumVLs int
	// faults is every engine's initial fault plan, for in-package tests (sdmatest.SetFaults is
	// the exported way); the zero value injects nothing. Each engine adds its index to the seed.
	faults faultPlan
	// VLEngines optionally gives the number of engines of each VL (hfi1: sdma_map_init's
	// vl_engines); len(VLEngines) must be NumVLs, each at least 1, the sum at most Engines. nil
	// spreads the engines evenly, extras to the highest VLs, as the kernel does.
	VLEngines []int
	// Name names the device in profiles (the engine goroutines' pprof label "device") and
	// metrics (Device.Vars, sdmaprom); "" names it sdma0, sdma1… in creation order. Names must
	// be unique per Prometheus registry: registering the sdmaprom collector of a second device of
	// the same name fails (NewDevice itself does not check names).
	Name string
}

// device life-cycle states in Device.state. Bit 0 (devAdds) is set in the states that take adds:
// addable tests it, the same one test as its compare with devClosed was, and so refuses the zero
// Device (devZero) with no load more.
const (
	devZero     int32 = 0 // the zero Device, not made by NewDevice: adds refused (ErrInvalid)
	devOpen     int32 = 1
	devClosed   int32 = 2 // Close ran (or is running)
	devDraining int32 = 3 // Shutdown: sends refused, engines finishing what they hold

	devAdds int32 = 1 // the bit set in devOpen and devDraining
)

// Device is the hfi1_devdata of gosdma: it owns the DMA mapper, the shared zeroed pad buffer and
// the engines. It is safe for concurrent use. Make one with NewDevice: the zero Device has no
// engines and no mapper (NumEngines 0, Engine nil); a TxReq's adds refuse it (ErrInvalid, as a
// nil device), its other methods may panic, as a nil receiver's do, and packages built on a
// Device (usdma, verbs) refuse it.
type Device struct {
	// The per-packet group, in the Device's first cache line: the fields that every add
	// (addable, lookupRegs, addKV), every packet of the hardware model (hints) and every unmap at
	// completion (sole) read. All are read-only after NewDevice except state, which changes only
	// at Shutdown and Close, so the line is shared by every core without transfers. The Device
	// is padded to 256 bytes (devicePad), a size class whose objects start on a line, so the
	// group is one line, not the two or three it spanned at the old offsets: the 16 KiB payload
	// row's copy fills L1 with its source and destination, and each line more that a packet
	// touches evicts payload lines (TestDeviceHotLine).

	regs dma.Registrar // mapper as a dma.Registrar, or nil; set by NewDevice, read-only after (register.go)
	// registry is the mapper's dma.Registry (Direct, IOMMU), or nil: an add skips regs' lookup
	// when it says nothing is registered (lookupRegs). Set by NewDevice, read-only after.
	registry *dma.Registry
	// sole is the mapper as a dma.SoleMapper, or nil: an add maps with its MapSingleSoleHint and
	// the slot's last handle. A mapper whose hint method may not be its own (dma.HintIsOwn: a type
	// embedding *dma.Direct inherits Direct's, which would skip an overridden MapSingleSole) is
	// behind hintless. Set by NewDevice, read-only after.
	sole dma.SoleMapper
	// hints is the mapper as a dma.SoleTranslator (Direct, IOMMU), else its Translate behind a
	// plainTranslator (the wrappers, whose Translate sees every access): the hardware model's
	// translations pass the txreq's handles (hw_hint.go). A type that embeds *dma.Direct or
	// *dma.IOMMU and overrides Translate is a SoleTranslator too: its TranslateSole (the
	// embedded one's) answers without the override, as its embedded unmaps do. Set by NewDevice,
	// read-only after.
	hints dma.SoleTranslator
	// state is devOpen/devDraining/devClosed (devZero in the zero Device). Written by NewDevice
	// (devOpen, before the Device is shared), Shutdown and Close (CAS); read by them and by every
	// add (addable: bit devAdds).
	state atomic.Int32

	mapper  dma.Mapper    // set by NewDevice, read-only after
	pad     *dma.Coherent // 4 zeroed bytes that pad descriptors point at (dd->sdma_pad_phys)
	engines []*Engine     // set by NewDevice, read-only after (dd->per_sdma)
	vlMap   vlMap         // set by NewDevice, read-only after (dd->sdma_map)
	sink    Sink          // set by NewDevice, read-only after
	name    string        // set by NewDevice, read-only after (Config.Name)

	// unmapErrs counts unmaps that failed on a path that promised to undo a mapping (a txreq's
	// clean, a refused add). Atomic add by whoever cleans; read by UnmapErrors.
	unmapErrs atomic.Uint64

	// closeMu runs Close's body one at a time; closed says it ran to its end (once it has, Close
	// only returns closeErr), which a callback's runtime.Goexit in its clean keeps from
	// happening, so that the next Close does the rest (goexit.go). closed and closeErr are
	// guarded by closeMu.
	closeMu  sync.Mutex
	closed   bool
	closeErr error

	// dlidSel is DLIDSelector's table (hfi1: dlid_to_selector's function-static mapping and
	// next), made by its first use; see dlidTable.
	dlidSel atomic.Pointer[dlidTable]

	_ [devicePad]byte // to 256 bytes on 64-bit targets (see the per-packet group)
}

// devicePad pads a Device to 256 bytes on 64-bit targets, a size class whose objects start on a
// cache line (TestDeviceHotLine checks both).
const devicePad = 24

// NewDevice builds a device from cfg, validating every field (a bad value is a *ConfigError
// naming it; a Sink that says it takes fewer engine numbers than Engines is one, see
// Config.Sink), and starts one hardware-model goroutine per engine unless cfg.Manual. The shared pad
// that pad descriptors point at is allocated from the mapper (AllocCoherent); a mapper that puts
// it beyond the descriptor's 48-bit bus address gets a *TxError matching ErrMapping, the pad freed.
// (hfi1: sdma_init, sdma_map_init)
func NewDevice(cfg Config) (*Device, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	m := cfg.Mapper
	if m == nil {
		m = dma.NewDirect()
	} else if typedNil(m) {
		return nil, configErr("Mapper", m, "a nil pointer in a non-nil interface (use a nil Mapper for the direct mapper)")
	}
	if cfg.Sink != nil && typedNil(cfg.Sink) {
		// Every delivery would panic (recovered), and packets would complete OK having gone nowhere.
		return nil, configErr("Sink", cfg.Sink, "a nil pointer in a non-nil interface (use a nil Sink to drop the packets)")
	}
	if v, ok := cfg.Sink.(sinkValidator); ok {
		if err := validateSink(v); err != nil {
			return nil, err
		}
	}
	if err := checkSinkEngines(cfg.Sink, cfg.Engines); err != nil {
		return nil, err
	}
	var lim [2]int
	if bs, ok := cfg.Sink.(BatchSink); ok {
		var err error
		if lim, err = batchLimit(bs); err != nil {
			return nil, err
		}
	}
	pad, err := m.AllocCoherent(4)
	if err != nil {
		return nil, err
	}
	if a := uint64(pad.Addr()); a > desc.MaxAddr-3 {
		// Every pad descriptor points here: masked to 48 bits (as make_tx_sdma_desc would), it
		// would read another address. Refused like an add's mapping beyond 48 bits.
		_ = m.FreeCoherent(pad)
		return nil, &TxError{Op: "NewDevice", Reason: "the mapper put the pad at bus address 0x" +
			strconv.FormatUint(a, 16) + ", beyond 48 bits", Err: ErrMapping}
	}
	dev := &Device{mapper: m, pad: pad, sink: cfg.Sink, name: deviceName(cfg.Name)}
	dev.state.Store(devOpen) // before any goroutine: the zero Device is devZero
	dev.regs, _ = m.(dma.Registrar)
	if r, ok := m.(interface{ Registry() *dma.Registry }); ok {
		dev.registry = r.Registry()
	}
	if s, ok := m.(dma.SoleMapper); ok && !dma.HintIsOwn(m) {
		dev.sole = hintless{s} // a user's type: its own MapSingleSole, not a promoted hint method
	} else {
		dev.sole = s
	}
	if ht, ok := m.(dma.SoleTranslator); ok {
		dev.hints = ht
	} else {
		dev.hints = plainTranslator{m}
	}
	if dev.sink == nil {
		dev.sink = discardSink{}
	}
	dev.engines = make([]*Engine, cfg.Engines)
	for i := range dev.engines {
		e, err := newEngine(dev, i, &cfg, lim)
		if err != nil {
			_ = m.FreeCoherent(pad)
			return nil, err
		}
		dev.engines[i] = e
	}
	dev.vlMap = buildVLMap(dev.engines, cfg.NumVLs, cfg.VLEngines)
	for _, e := range dev.engines {
		e.setFaultsLocked(cfg.faults) // no goroutine yet: nothing else holds hwMu
		e.hwMu.Lock()
		e.raise(sm.E30GoRunning, "NewDevice", nil) // sdma_start: s00 → s10 → s15 → s99
		e.hwMu.Unlock()
	}
	if !cfg.Manual {
		for _, e := range dev.engines {
			go e.runLabelled()
		}
	}
	return dev, nil
}

// checkSinkEngines refuses a sink that says how many engine numbers it takes (an Engines method,
// internal/sinklanes: udpsink.Sink, and the sdmatest wrappers over it) and takes fewer than the
// device's engines: it would refuse every packet of the engines past it, after their send
// returned nil and their txreqs completed OK, a loss told only by the engines' SinkErrors. A
// sink without the method (or whose Engines is negative: it does not say) is taken; a panic in
// Engines refuses, as one in Validate or BatchLimit.
func checkSinkEngines(s Sink, engines int) error {
	have, ok, err := sinklanes.Of(s)
	switch {
	case err != nil:
		return configErr("Sink", fmt.Sprintf("%T", s), err.Error())
	case ok && have < engines:
		lost := "engines " + itoa(have) + ".." + itoa(engines-1)
		if have == engines-1 {
			lost = "engine " + itoa(have)
		}
		return configErr("Sink", fmt.Sprintf("%T", s), "takes "+sinklanes.EngineCount(have)+" (its Engines method), and Config.Engines is "+
			itoa(engines)+": engine i delivers as engine number i, and the sink would refuse every packet of "+lost+
			" after its send succeeded (build the sink for "+sinklanes.EngineCount(engines)+": udpsink.Config.Engines)")
	}
	return nil
}

// typedNil reports whether v, a non-nil interface value, holds a nil pointer, map, func, slice,
// chan or interface: an implementation that panics on every call.
func typedNil(v any) bool {
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// normalize fills defaults and validates cfg.
func (cfg *Config) normalize() error {
	if cfg.Engines == 0 {
		cfg.Engines = defaultEngines
	}
	if cfg.Engines < 1 || cfg.Engines > MaxEngines {
		return configErr("Engines", cfg.Engines, "want 1.."+itoa(MaxEngines))
	}
	if cfg.RingSize == 0 {
		cfg.RingSize = ring.DefaultSize
	}
	if n := cfg.RingSize; n < ring.MinSize || n > ring.MaxSize || n&(n-1) != 0 {
		return configErr("RingSize", cfg.RingSize, "want a power of two in "+itoa(ring.MinSize)+".."+itoa(ring.MaxSize))
	}
	if cfg.DescIntr == 0 {
		cfg.DescIntr = DefaultDescIntr
	}
	if cfg.DescIntr < 1 || cfg.DescIntr > cfg.RingSize {
		return configErr("DescIntr", cfg.DescIntr, "want 1..RingSize ("+itoa(cfg.RingSize)+")")
	}
	switch cfg.Wait {
	case WaitSpinPark, WaitBusyPoll, WaitPark:
	default:
		return configErr("Wait", cfg.Wait, "want WaitSpinPark, WaitBusyPoll or WaitPark")
	}
	switch cfg.Completion {
	case CompleteInterrupt, CompletePoll:
	default:
		return configErr("Completion", cfg.Completion, "want CompleteInterrupt or CompletePoll")
	}
	if err := cfg.faults.validate(); err != nil {
		return err
	}
	if cfg.NumVLs == 0 {
		cfg.NumVLs = min(cfg.Engines, MaxVLs)
	}
	if cfg.NumVLs < 1 || cfg.NumVLs > MaxVLs || cfg.NumVLs > cfg.Engines {
		return configErr("NumVLs", cfg.NumVLs, "want 1.."+itoa(min(cfg.Engines, MaxVLs))+" (at most Engines)")
	}
	if cfg.VLEngines != nil {
		if len(cfg.VLEngines) != cfg.NumVLs {
			return configErr("VLEngines", cfg.VLEngines, "want one count per VL ("+itoa(cfg.NumVLs)+")")
		}
		sum := 0
		for _, n := range cfg.VLEngines {
			if n < 1 {
				return configErr("VLEngines", cfg.VLEngines, "each VL needs at least one engine")
			}
			sum += n
		}
		if sum > cfg.Engines {
			return configErr("VLEngines", cfg.VLEngines, "more engines than Engines ("+itoa(cfg.Engines)+")")
		}
	}
	return nil
}

// Mapper returns the device's DMA mapper.
func (dev *Device) Mapper() dma.Mapper { return dev.mapper }

// UnmapErrors returns how many unmaps failed on a path that promised to undo a mapping: a txreq's
// completion or Clean, an add refused after its mapping was made. Each would mean a mapping this
// package lost track of (a bug here or in the mapper, or an unmap behind the txreq's back); the
// count stays 0 in a correct program. A completion pass's batch of unmaps (several txreqs' mappings
// in one dma.UnmapAll) that fails counts once, however many of its entries failed.
func (dev *Device) UnmapErrors() uint64 { return dev.unmapErrs.Load() }

// unmap undoes one mapping a txreq made, by its descriptor type (hfi1: sdma_unmap_desc), and
// counts a failure.
func (dev *Device) unmap(mapType desc.MapType, addr dma.Addr, n int, h dma.Sole) error {
	var err error
	switch mapType {
	case desc.MapSingle:
		if h != 0 {
			err = dev.sole.UnmapSingleSole(addr, n, dma.ToDevice, h)
			break
		}
		err = dev.mapper.UnmapSingle(addr, n, dma.ToDevice)
	case desc.MapPage:
		err = dev.mapper.UnmapPage(addr, n, dma.ToDevice)
	}
	if err != nil {
		dev.unmapErrs.Add(1)
	}
	return err
}

// padAddr is the bus address of the shared zeroed pad (sdma_pad_phys).
func (dev *Device) padAddr() dma.Addr { return dev.pad.Addr() }

// NumEngines returns the number of engines (dd->num_sdma).
func (dev *Device) NumEngines() int { return len(dev.engines) }

// Engine returns engine i, or nil if i is out of range (&dd->per_sdma[i]).
func (dev *Device) Engine(i int) *Engine {
	if i < 0 || i >= len(dev.engines) {
		return nil
	}
	return dev.engines[i]
}

// DLIDSelector returns the engine selector of a destination LID for user SDMA (hfi1:
// dlid_to_selector): the first time the device sees the LID's hash ((dlid>>8 ^ dlid) & 0xff) it
// gives it the next number of 0..127 (after 127, 0 again), and the hash keeps that number. So the
// destinations spread over the engines in the order they first appear, whatever their LIDs. The
// kernel's table is one for the whole driver; here each Device has its own, so that one device's
// traffic does not move another's. Safe for concurrent use.
func (dev *Device) DLIDSelector(dlid uint16) uint8 {
	h := uint8(dlid>>8 ^ dlid)
	t := dev.dlidSel.Load()
	if t == nil {
		dev.dlidSel.CompareAndSwap(nil, new(dlidTable))
		t = dev.dlidSel.Load()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.mapping[h]; m != 0 {
		return m - 1
	}
	sel := t.next
	t.mapping[h] = sel + 1
	t.next = (sel + 1) & 0x7f
	return sel
}

// NumVLs returns the number of virtual lanes the device maps to engines (Config.NumVLs, or its
// default).
func (dev *Device) NumVLs() int { return dev.vlMap.actualVLs }

// dlidTable is DLIDSelector's table: mapping[hash] is the hash's selector + 1, 0 while the hash
// is unseen; next is the selector the next unseen hash gets. Written and read under mu, by
// DLIDSelector only. Out of the Device (behind a pointer): the Device's hot fields keep their
// size class and lines.
type dlidTable struct {
	mu      sync.Mutex
	mapping [256]uint8
	next    uint8
}

// SelectEngine picks the engine for a selector (a QP number, a hash, a CPU) on virtual lane vl
// (hfi1: sdma_select_engine_vl): map[vl & mask].sde[selector & mask]. A vl at or past MaxVLs
// (the kernel's module parameter num_vls, at its default) gets engine 0, as in the kernel; a vl
// from NumVLs (the operational VLs the map is built for) up to MaxVLs takes the map's slot
// vl & mask, which repeats a lane's engines (sdma_map_init's map[i % num_vls]), as the kernel's
// does.
func (dev *Device) SelectEngine(selector uint32, vl uint8) *Engine {
	if vl >= MaxVLs {
		return dev.engines[0]
	}
	el := dev.vlMap.elems[uint32(vl)&dev.vlMap.mask]
	return el.sde[selector&el.mask]
}

// vlMap is struct sdma_vl_map: a power-of-two table of VLs, each a power-of-two table of engines.
type vlMap struct {
	actualVLs int
	mask      uint32
	elems     []*mapElem
}

// mapElem is struct sdma_map_elem: the engines of one VL, repeated to a power of two.
type mapElem struct {
	mask uint32
	sde  []*Engine
}

// buildVLMap lays out the VL map as sdma_map_init does (hfi1: sdma_map_init): vlEngines engines
// a VL, or without them len(engines) / numVLs each with the extras from the last VL down; the
// layout itself is internal/vlmap's, shared with verbs' pio_map_init.
func buildVLMap(engines []*Engine, numVLs int, vlEngines []int) vlMap {
	if vlEngines == nil {
		vlEngines = vlmap.Split(len(engines), numVLs)
	}
	tables := vlmap.Layout(vlEngines, func(i int) *Engine { return engines[i] })
	m := vlMap{actualVLs: numVLs, mask: uint32(len(tables) - 1), elems: make([]*mapElem, len(tables))}
	for i, sde := range tables {
		if i >= numVLs {
			m.elems[i] = m.elems[i%numVLs] // re-use without allocating
			continue
		}
		m.elems[i] = &mapElem{mask: uint32(len(sde) - 1), sde: sde}
	}
	return m
}

// freezeNotify tells every engine that the chip is freezing (hfi1: sdma_freeze_notify), freeze
// completes the freeze (sdma_freeze) and unfreeze restarts the engines (sdma_unfreeze):
// sdmatest.FreezeNotify, Freeze and Unfreeze document them for their callers.
func (dev *Device) freezeNotify(linkDown bool) error {
	ev, cause := sm.E80HwFreeze, "FreezeNotify"
	if linkDown {
		ev, cause = sm.E85LinkDown, "FreezeNotify(link down)"
	}
	return dev.eventAll(ev, cause)
}

func (dev *Device) freeze() error { return dev.eventAll(sm.E81HwFrozen, "Freeze") }

func (dev *Device) unfreeze() error { return dev.eventAll(sm.E82HwUnfreeze, "Unfreeze") }

// eventAll raises ev on every engine in order and returns the first error. Called on an
// engine's own goroutine, or under a call hosted for one (a Sink, a callback), it is refused with
// ErrInvalid before any engine gets the event: refused at that engine only, the others would
// have moved.
func (dev *Device) eventAll(ev sm.Event, cause string) error {
	if err := dev.ownPass("Event"); err != nil {
		return err
	}
	var first error
	for _, e := range dev.engines {
		if err := e.event(ev, cause); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Sink returns the sink the engines deliver to: the configured one, or the device's own, which
// drops every packet.
func (dev *Device) Sink() Sink { return dev.sink }

// Close shuts the device down at once: it stops every engine (new sends get ErrClosed), stops
// every goroutine the device started, completes every txreq still in flight, unmapping what they
// mapped, wakes every parked waiter, and frees the pad. It returns when all of that is done.
//
// "Completes as aborted" is kernel-faithful, as the sw clean does it (sdma_make_progress, then
// sdma_flush): a txreq whose packet the hardware model already delivered to the Sink (its
// descriptors are behind the hardware head) completes StatusOK — it did go out — and every other
// one, in the ring or on the flush list, completes StatusAborted. Either way each completes
// exactly once before Close returns. A Sink blocked in Deliver delays it. Close is idempotent; it
// returns the same error each time (from freeing the pad). (hfi1: sdma_exit, with the sw clean's
// sdma_flush)
//
// Close waits for every engine's goroutine and takes every engine's locks, so it cannot run where
// one of those is waiting for it: called from a Sink, a completion callback, a drained callback or
// a wakeup that an engine's goroutine runs, or that a call runs on its own goroutine with an
// engine's locks held (Stop, Start and the other events, InjectHalt, ProgressSchedule, SendWait,
// Shutdown, Close itself: their sw clean, flush or pass; Process and Poll), it returns ErrInvalid
// and changes nothing (close from another goroutine). Where the build has no getg (purego, or
// neither amd64 nor arm64), a Close from a Sink or callback that a Manual engine's Process or
// Poll runs is also refused while another goroutine holds the lock of any Manual engine of the
// device (host.go: manualPass; that build cannot tell which engine's pass the caller runs).
//
// Close sees only package sdma's own waits. An engine's goroutine that waits, in a Sink or
// callback, for something of another layer that waits for this Close is not seen: two callbacks
// of two layers that each close the other's layer at once wait for each other for ever — the
// device's Sink run by a PIO context's chip goroutine (package pio, under a verbs.Device) calling
// Close while the same Sink, or a completion callback, run by an engine's goroutine closes the
// verbs Device, whose Close waits for that chip goroutine. A callback that closes a layer should
// hand the Close to a goroutine of its own (go dev.Close()).
func (dev *Device) Close() error {
	if err := dev.ownPass("Close"); err != nil {
		return err
	}
	dev.closeMu.Lock()
	defer dev.closeMu.Unlock()
	if dev.closed {
		return dev.closeErr
	}
	// Every step may run again (a Goexit in a callback of an earlier Close's clean ended it):
	// the state, the gates and the goroutines' stop are idempotent, and a clean of a clean
	// engine cleans nothing.
	dev.state.Store(devClosed)
	for _, e := range dev.engines {
		e.stopAccepting(gateDown)
	}
	for _, e := range dev.engines {
		e.stopGoroutine()
	}
	for _, e := range dev.engines {
		e.closeEngine()
	}
	dev.closeErr = dev.mapper.FreeCoherent(dev.pad)
	dev.closed = true
	return dev.closeErr
}

// closeEngine is Close's clean of e, with the caller registered as e's host (host.go) while its
// callbacks run. hwMu's unlock is deferred, as an event's (hostEvent: see callerExited).
func (e *Engine) closeEngine() {
	defer e.hosts.remove(e.hosts.add(hostEvent))
	e.hwMu.Lock()
	defer e.hwMu.Unlock()
	e.raise(sm.E00GoHwDown, "Close", nil)
	e.swCleanLocked() // s00 from a resting state cleans nothing: the flush list
}

// Shutdown is the graceful Close: new sends get ErrClosed at once, the engines go on sending and
// completing what they already hold until their rings are empty or ctx is done, and then Close
// runs (aborting whatever is left). A frozen engine (FreezeNotify, a link down) sends nothing
// until it is unfrozen: Shutdown does not wait for its ring. It returns only after Close finished: nil, ctx's error if the
// deadline cut the drain short, or Close's error. Manual and polled engines are driven by
// Shutdown itself while it waits. Shutdowns that run at once all drain, each bounded by its own
// ctx (the first to give up runs Close for all). Like Close, it is refused (ErrInvalid, nothing
// changed) on an engine's own goroutine and from a callback that a call runs on its own goroutine
// (see Close), and so is a nil ctx.
func (dev *Device) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("Shutdown") // refused at once: nothing drained, nothing closed
	}
	if err := dev.ownPass("Shutdown"); err != nil {
		return err
	}
	var drainErr error
	// A Shutdown that finds another one draining drains too (until the rings are empty or its
	// own ctx is done), rather than cutting the other's drain short with Close.
	if dev.state.CompareAndSwap(devOpen, devDraining) || dev.state.Load() == devDraining {
		for _, e := range dev.engines {
			e.stopAccepting(gateDraining)
		}
		for wait := time.Microsecond; ; {
			busy := false
			for _, e := range dev.engines {
				if e.selfDriven() {
					e.driveHosted()
				}
				if !e.idleForShutdown() {
					busy = true
				}
			}
			if !busy {
				break
			}
			if drainErr = ctx.Err(); drainErr != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Millisecond)
		}
	}
	if err := dev.Close(); err != nil {
		return err
	}
	return drainErr
}

// hintless is a SoleMapper whose MapSingleSoleHint is its MapSingleSole: NewDevice puts a user's
// SoleMapper behind it (dma.HintIsOwn), so that a type that embeds *dma.Direct and overrides
// MapSingleSole (a quota, a fault plan) is mapped through its override, not through the
// embedded Direct's promoted MapSingleSoleHint.
type hintless struct{ dma.SoleMapper }

// MapSingleSoleHint is MapSingleSole: the hint is dropped.
func (h hintless) MapSingleSoleHint(buf []byte, dir dma.Direction, _ dma.Sole) (dma.Addr, dma.Sole, error) {
	return h.MapSingleSole(buf, dir)
}
