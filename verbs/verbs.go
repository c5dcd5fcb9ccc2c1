package verbs

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/internal/sinklanes"
	"github.com/gosdma/gosdma/internal/vlmap"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
)

// Sentinel errors of package verbs. Errors of the two paths come through as they are (sdma's and
// pio's sentinels).
var (
	// ErrInvalid: a bad configuration or argument; nothing was changed.
	ErrInvalid = errors.New("verbs: invalid argument")
	// ErrAborted: an SDMA packet completed StatusAborted (a halt, Stop or Close flushed it); it
	// may or may not have been sent. Handed to Completion.Done.
	ErrAborted = errors.New("verbs: packet aborted")
	// ErrClosed: the Device is closed (Device.Close); Send refuses every packet with it,
	// whichever path the packet would have taken. It matches sdma.ErrClosed and pio.ErrClosed
	// too (errors.Is), so callers that test for either path's sentinel see it.
	ErrClosed error = closedError{}
)

// errNilContext is the answer of Send and Drain to a nil ctx: ErrInvalid, before anything is
// sent or waited for (as sdma's and pio's). A nil ctx would otherwise panic, and only when the
// call had to wait.
func errNilContext(op string) error {
	return errors.Join(ErrInvalid, errors.New("verbs: "+op+": nil context"))
}

// closedError is ErrClosed: one value that also matches both paths' closed sentinels.
type closedError struct{}

func (closedError) Error() string { return "verbs: device closed" }

// Is reports whether target is one of the paths' closed sentinels (errors.Is).
func (closedError) Is(target error) bool { return target == sdma.ErrClosed || target == pio.ErrClosed }

// Path is the way a packet went.
type Path uint8

const (
	PathPIO  Path = 1 // the CPU copied it into a PIO send context (hfi1_verbs_send_pio)
	PathSDMA Path = 2 // an SDMA engine gathered it (hfi1_verbs_send_dma)
)

// String names the path ("pio", "sdma").
func (p Path) String() string {
	switch p {
	case PathPIO:
		return "pio"
	case PathSDMA:
		return "sdma"
	}
	return "Path(" + strconv.Itoa(int(p)) + ")"
}

// Config configures a Device.
type Config struct {
	// SDMA is the SDMA device (required), made by sdma.NewDevice (a zero sdma.Device is
	// refused). The Device sends through it but does not own it: close it after the Device.
	SDMA *sdma.Device
	// PIOThreshold is the largest packet, in bytes, that goes by PIO (piothreshold): 0 means
	// pio.DefaultThreshold (256); at most pio.ThresholdCeiling (4096), the largest PIO packet the
	// kernel sizes send contexts for. DisablePIO sends everything by SDMA (piothreshold=0).
	PIOThreshold int
	DisablePIO   bool
	// Contexts is the number of kernel PIO send contexts, 1..160; 0 means 1. As pio_map_init
	// does, each of the SDMA device's VLs gets its own share of them (Contexts / NumVLs, the
	// extras from the last VL down), and a flow's selector picks one of its VL's
	// (pio_select_send_context_vl). A VL left with none (fewer contexts than VLs), and a vl at or
	// past sdma.MaxVLs (num_vls), use context 0 (the kernel's vld[0].sc); a vl from the mapped
	// ones up to sdma.MaxVLs takes the contexts of the mapped VL vl & mask repeats.
	Contexts int
	// Credits is each context's size in blocks; 0 means the kernel's 3-deep size for the
	// threshold, 3 × (min(threshold, 4096) + 128) / 64. Unless DisablePIO, it must hold a packet
	// of PIOThreshold bytes and its 8-byte PBC (ErrInvalid otherwise).
	Credits int
	// ManualPIO runs the PIO chips without goroutines: the caller calls Process (a blocking
	// send drives them itself). Set it when the SDMA device is Manual too: Drain then drives the
	// flow's engine (Process, Poll) from its first wait, not only after 200 µs.
	ManualPIO bool
	// PIOFaults is every context's initial fault plan.
	PIOFaults pio.FaultPlan
}

// Device is a send device with both of hfi1's transmit paths: it owns kernel PIO send contexts
// whose sink is the SDMA device's sink, and chooses per packet (hfi1_verbs_send). It is safe for
// concurrent use.
//
// The sink sees each PIO context as an engine of its own, past the SDMA engines: context i's
// packets come to Deliver as engine SDMA.NumEngines()+i, from that context's chip (its goroutine,
// or a caller driving it), so that each engine number has one caller, as a sink with per-engine
// state expects (an sdma.BatchSink holds an engine's queued packets between its Queue and Flush,
// and refuses a Deliver on that engine meanwhile). Build such a sink for NumEngines()+Contexts
// engines: a udpsink.Sink with Config.Engines = NumEngines()+Contexts, say. A sink that says how
// many engines it takes (an Engines() int method, as udpsink.Sink has and the sdmatest fault
// wrappers pass on; sdma.NewDevice refuses one with fewer than NumEngines) and takes fewer is
// refused by New (ErrInvalid), unless DisablePIO: it would refuse the PIO packets after their
// Send returned nil.
//
// Make one with New. The zero Device has no contexts and no SDMA device: NewFlow panics on it,
// saying so (a programmer error: NewFlow returns no error), and its other methods answer as such
// a device's (NumContexts 0, Context and SDMA nil, Process 0, Close nil).
type Device struct {
	sdma      *sdma.Device
	pio       []*pio.SendContext // read-only after New
	pioMap    pioVLMap           // read-only after New (dd->pio_map)
	threshold int                // 0 when PIO is disabled
	manual    bool               // ManualPIO: waits drive the chips and engines instead of blocking
	pool      sync.Pool          // *sdmaPacket
	closed    atomic.Bool        // set once by Close; read by Send before it takes a path
}

// New creates the PIO contexts and the Device. Bad configuration is an error matching ErrInvalid
// (or pio's), a sink with too few engines for the contexts among it (see Device).
func New(cfg Config) (*Device, error) {
	if cfg.SDMA == nil {
		return nil, errors.Join(ErrInvalid, errors.New("verbs: Config.SDMA is nil"))
	}
	if cfg.SDMA.NumEngines() == 0 { // no engines to select: NewFlow would index an empty map
		return nil, errors.Join(ErrInvalid, errors.New("verbs: Config.SDMA is the zero sdma.Device, not made by sdma.NewDevice"))
	}
	thr := cfg.PIOThreshold
	if thr == 0 {
		thr = pio.DefaultThreshold
	}
	if thr < 0 || thr > pio.ThresholdCeiling {
		return nil, errors.Join(ErrInvalid, errors.New("verbs: PIOThreshold "+strconv.Itoa(thr)+" outside 0.."+strconv.Itoa(pio.ThresholdCeiling)))
	}
	n := cfg.Contexts
	if n == 0 {
		n = 1
	}
	if n < 1 || n > 160 {
		return nil, errors.Join(ErrInvalid, errors.New("verbs: Contexts "+strconv.Itoa(n)+" outside 1..160"))
	}
	credits := cfg.Credits
	if credits == 0 {
		credits = 3 * (min(thr, pio.ThresholdCeiling) + 128) / pio.BlockSize
	}
	if need := ((thr+3)&^3 + 8 + pio.BlockSize - 1) / pio.BlockSize; !cfg.DisablePIO && credits > 0 && credits < need {
		// Send routes every packet up to the threshold to PIO: each must fit a context (PBC
		// included), or the ones past the context fail where SDMA would carry them.
		return nil, errors.Join(ErrInvalid, errors.New("verbs: Credits "+strconv.Itoa(credits)+" blocks hold no packet of PIOThreshold "+strconv.Itoa(thr)+" bytes (PBC included, "+strconv.Itoa(need)+" blocks)"))
	}
	lanes, err := checkSinkLanes(cfg.SDMA, n, cfg.DisablePIO)
	if err != nil {
		return nil, err
	}
	d := &Device{sdma: cfg.SDMA, threshold: thr, manual: cfg.ManualPIO}
	if cfg.DisablePIO {
		d.threshold = 0
	}
	d.pool.New = func() any { return &sdmaPacket{dev: d} }
	sink := &pioSink{sink: cfg.SDMA.Sink(), base: cfg.SDMA.NumEngines(), lanes: lanes}
	for i := range n {
		sc, err := pio.New(pio.Config{Type: pio.Kernel, Credits: credits, Index: i, Sink: sink, Manual: cfg.ManualPIO, Faults: cfg.PIOFaults})
		if err != nil {
			d.Close()
			return nil, err
		}
		d.pio = append(d.pio, sc)
	}
	d.pioMap = buildPIOMap(n, cfg.SDMA.NumVLs())
	return d, nil
}

// checkSinkLanes refuses an SDMA device whose sink says it takes fewer engine numbers than the
// engines and the contexts PIO context i delivers as (engine NumEngines()+i): a sink sized for
// the SDMA engines alone would refuse every PIO packet after its Send returned nil and its
// Completion was told nil, a loss counted only in the context's SinkErrors. Without PIO no
// context delivers. The sink says how many it takes with an Engines method (internal/sinklanes;
// sdma.NewDevice read it already: a panic in it, or fewer than NumEngines, never gets here).
// It returns the contexts' sink's Engines (pioSink.lanes): the sink's numbers past the engines',
// or sinklanes.Unsized if it does not say or under DisablePIO.
func checkSinkLanes(sd *sdma.Device, contexts int, disablePIO bool) (int, error) {
	have, ok, _ := sinklanes.Of(sd.Sink())
	if !ok || disablePIO {
		return sinklanes.Unsized, nil
	}
	if want := sd.NumEngines() + contexts; have < want {
		return 0, errors.Join(ErrInvalid, errors.New("verbs: the SDMA device's sink takes "+sinklanes.EngineCount(have)+"; it needs "+
			strconv.Itoa(want)+", one for each SDMA engine ("+strconv.Itoa(sd.NumEngines())+") and PIO context ("+strconv.Itoa(contexts)+
			"; context i delivers as engine NumEngines()+i): build it for "+strconv.Itoa(want)+" (udpsink.Config.Engines)"))
	}
	return have - sd.NumEngines(), nil
}

// pioSink is the PIO contexts' sink: the SDMA device's, each context on a lane of its own past
// the engines' (context i delivers as engine base+i, base the device's NumEngines). Read-only
// after New.
type pioSink struct {
	sink sdma.Sink
	base int
	// lanes is the context numbers the sink takes (Engines, which pio.New reads): the SDMA
	// device's sink's engine numbers past base, or sinklanes.Unsized when it does not say, or
	// under DisablePIO, where no context delivers (New took the sink without a lane for them).
	lanes int
}

// Engines is the number of context numbers the SDMA device's sink takes past the engines' (or -1:
// it does not say); pio.New refuses a context it has no lane for.
func (s *pioSink) Engines() int { return s.lanes }

// Deliver hands the packet of context ctxt to the SDMA device's sink as engine base+ctxt.
func (s *pioSink) Deliver(ctxt int, segs [][]byte) error { return s.sink.Deliver(s.base+ctxt, segs) }

// PIOThreshold returns the threshold in bytes (0: PIO disabled).
func (d *Device) PIOThreshold() int { return d.threshold }

// SDMA returns the SDMA device.
func (d *Device) SDMA() *sdma.Device { return d.sdma }

// Context returns PIO send context i, or nil if i is out of range (as sdma.Device.Engine).
func (d *Device) Context(i int) *pio.SendContext {
	if i < 0 || i >= len(d.pio) {
		return nil
	}
	return d.pio[i]
}

// NumContexts returns the number of PIO send contexts.
func (d *Device) NumContexts() int { return len(d.pio) }

// Process drives every PIO context's chip once (for ManualPIO) and returns the packets sent.
func (d *Device) Process() int {
	n := 0
	for _, sc := range d.pio {
		n += sc.Process()
	}
	return n
}

// Close closes the Device: from the moment Close begins, a Send that starts is refused with
// ErrClosed, by PIO and by SDMA alike (a Send already past its check when Close begins either
// completes as usual or, if its PIO context closed under it, is refused with ErrClosed too).
// Close closes the PIO contexts (every PIO packet still held is released, exactly once). It does
// not close the SDMA device: SDMA packets already accepted complete as the engine runs (Drain
// waits for them). Close is idempotent and safe to call concurrently: every Close returns only
// once every context is closed, also one that finds another Close at work (pio's Close waits for
// it). A context that refuses its Close (pio.SendContext.Close: from a Sink, Releaser or wake-up
// on that context's chip goroutine, say) is left open, the others closed, and Close returns the
// refusals (matching pio.ErrInvalid); Sends are refused all the same, and a later Close from
// another goroutine closes what was left.
//
// Close waits for the contexts' chip goroutines to end, and so for a Sink they run. Each layer
// refuses only the waits it can see: neither this Close nor the SDMA device's sees a wait in the
// other package. Two callbacks of two layers that each close the other's layer at once wait for
// each other for ever: the Sink run by an SDMA engine's goroutine (or an SDMA packet's Completion
// it runs) calling Close while the Sink run by a PIO context's chip goroutine calls the SDMA
// device's Close or Shutdown, which waits for that engine's goroutine; so does Close from such a
// callback while a chip's Sink waits, with no deadline, for a usdma queue's Close, whose requests
// complete on that engine. A callback that closes a layer should hand the Close to a goroutine
// of its own (go d.Close()).
func (d *Device) Close() error {
	d.closed.Store(true)
	var errs []error
	for _, sc := range d.pio {
		if err := sc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Completion is told once when a packet's memory is the caller's again: for PIO right after the
// copy, before Send returns (as hfi1 completes a PIO work request after pio_copy); for SDMA when
// the engine completes the txreq (err is nil, or ErrAborted). Done runs on the completion pass
// for SDMA and must not block. Implement it on a pointer type to send without allocating.
type Completion interface {
	Done(path Path, err error)
}

// Flow is one sender's ordered stream of packets, the QP of hfi1_verbs_send: it counts its
// packets in flight on each path (the iowait's pio_busy and sdma_busy), which is what keeps the
// flow in order across the two paths. A Flow is used by one goroutine at a time. Make flows with
// Device.NewFlow: Send refuses the zero Flow with ErrInvalid.
type Flow struct {
	dev      *Device
	sc       *pio.SendContext // pio_select_send_context_vl(selector)
	engine   *sdma.Engine     // sdma_select_engine_vl(selector, vl)
	vl       uint8
	pioBusy  atomic.Int32     // PIO packets copied whose credits have not come back (iowait_pio_inc/dec)
	sdmaBusy atomic.Int32     // SDMA txreqs sent and not completed (iowait_sdma_inc/dec)
	drained  chan struct{}    // a token when a busy count reaches zero (iowait_drain_wakeup)
	stats    [3]atomic.Uint64 // packets sent, by Path (index 0 unused)
}

// NewFlow returns a flow whose packets go to the PIO context and SDMA engine the selector and VL
// pick. The PIO context is pio_select_send_context_vl's pick: the VL's table, then
// ksc[selector & mask] in it (see Config.Contexts).
func (d *Device) NewFlow(selector uint32, vl uint8) *Flow {
	if d.sdma == nil {
		panic("verbs: NewFlow of the zero Device, not made by New: it has no contexts")
	}
	return &Flow{
		dev:     d,
		sc:      d.pio[d.pioMap.index(selector, vl)],
		engine:  d.sdma.SelectEngine(selector, vl),
		vl:      vl,
		drained: make(chan struct{}, 1),
	}
}

// Sent returns the packets the flow sent by path p (PathPIO or PathSDMA); 0 for any other value.
func (f *Flow) Sent(p Path) uint64 {
	if p != PathPIO && p != PathSDMA {
		return 0
	}
	return f.stats[p].Load()
}

// Busy returns the flow's packets in flight on each path.
func (f *Flow) Busy() (pio, sdma int) { return int(f.pioBusy.Load()), int(f.sdmaBusy.Load()) }

// Context returns the PIO send context the flow's PIO packets go to.
func (f *Flow) Context() *pio.SendContext { return f.sc }

// Engine returns the SDMA engine the flow's SDMA packets go to.
func (f *Flow) Engine() *sdma.Engine { return f.engine }

// pioRelease is the flow's PIO release callback (verbs_pio_complete), the pio.Releaser that only
// the flow's own PIO sends hand to their context: a type of its own, not a method of Flow, so that
// no caller can release a PIO packet the flow never sent (the count of PIO packets in flight would
// go negative, and Drain, and every later Send that goes by SDMA, would wait for it for ever).
type pioRelease Flow

// Released is verbs_pio_complete: one fewer PIO packet in flight.
func (r *pioRelease) Released(pio.ReleaseCode) { (*Flow)(r).pioDone() }

// pioDone counts one PIO packet of the flow out of flight, and wakes a drain at zero
// (iowait_pio_dec, iowait_drain_wakeup).
func (f *Flow) pioDone() {
	if f.pioBusy.Add(-1) == 0 {
		f.signal()
	}
}

func (f *Flow) signal() {
	select {
	case f.drained <- struct{}{}:
	default:
	}
}

// pioVLMap is struct pio_vl_map: a power-of-two table of VLs (the ones past the actual VLs
// repeat them), each a power-of-two table of context indices filled round robin over the VL's
// own contexts (struct pio_map_elem's ksc); a VL with no context has an empty table.
type pioVLMap struct {
	actualVLs int
	mask      uint32
	elems     [][]int
}

// buildPIOMap lays out n contexts over numVLs VLs as pio_map_init does with no vl_scontexts
// (hfi1: pio_map_init): n / numVLs each, the extras from the last VL down, each VL's run after the
// previous one's; the layout itself is internal/vlmap's, shared with sdma's sdma_map_init.
func buildPIOMap(n, numVLs int) pioVLMap {
	numVLs = max(numVLs, 1)
	elems := vlmap.Layout(vlmap.Split(n, numVLs), func(i int) int { return i })
	return pioVLMap{actualVLs: numVLs, mask: uint32(len(elems) - 1), elems: elems}
}

// index is pio_select_send_context_vl: the VL's table, then ksc[selector & mask]. A vl at or past
// sdma.MaxVLs (the kernel's module parameter num_vls, at its default) gets context 0 (the
// kernel's vld[0].sc); a vl from the actual VLs up to it takes the table of slot vl & mask, which
// repeats a lane's (pio_map_init's map[i % num_vls]), as in the kernel. A VL without contexts gets
// context 0 too (the kernel's NULL ksc entry falls back to vld[0].sc).
func (m *pioVLMap) index(selector uint32, vl uint8) int {
	if vl >= sdma.MaxVLs {
		return 0
	}
	ksc := m.elems[uint32(vl)&m.mask]
	if len(ksc) == 0 {
		return 0
	}
	return ksc[selector&uint32(len(ksc)-1)]
}

// choose is get_send_routine: PIO for a packet up to the threshold, unless the flow still has
// SDMA packets in flight (they would be overtaken); SDMA otherwise.
func (f *Flow) choose(n int) Path {
	if n <= f.dev.threshold && f.sdmaBusy.Load() == 0 {
		return PathPIO
	}
	return PathSDMA
}

// Send sends one packet made of segs, concatenated, on the flow (hfi1: hfi1_verbs_send). A packet
// of at most PIOThreshold bytes goes by PIO unless the flow has SDMA packets in flight; any other
// goes by SDMA, after the flow's PIO packets have drained (pio_wait with HFI1_S_WAIT_PIO_DRAIN),
// so the sink sees each flow's packets in order whichever way they went. Both paths deliver the
// same bytes, padded to whole dwords. It waits on ctx for room (credits, ring slots) and for the
// drain; c, if not nil, is told when the memory of segs is the caller's again. It returns the
// path taken, or an error with nothing sent: ErrClosed once the Device is closed (checked
// first, so that every packet is refused, whatever its size), ctx's, ErrInvalid (an empty
// packet, a nil ctx, the zero Flow: nothing sent, nothing waited for), or the path's own
// (pio.ErrNotRunning, sdma.ErrClosed, ...); c is not told of a refused packet. An SDMA packet refused with
// sdma.ErrNotRunning was accepted to the flush list: c is told ErrAborted later.
func (f *Flow) Send(ctx context.Context, segs [][]byte, c Completion) (Path, error) {
	if f.dev == nil {
		return 0, errors.Join(ErrInvalid, errors.New("verbs: Send: the zero Flow, not made by Device.NewFlow"))
	}
	if f.dev.closed.Load() {
		return 0, ErrClosed
	}
	if ctx == nil {
		return 0, errNilContext("Send")
	}
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	if n == 0 {
		return 0, errors.Join(ErrInvalid, errors.New("verbs: empty packet"))
	}
	if f.choose(n) == PathPIO {
		if err := f.sendPIO(ctx, segs, c); err != nil {
			return PathPIO, f.dev.closedErr(err)
		}
		return PathPIO, nil
	}
	if err := f.drainPIO(ctx); err != nil {
		return 0, err
	}
	return PathSDMA, f.sendSDMA(ctx, segs, n, c)
}

// closedErr is err, or ErrClosed if err is a PIO context's close because the Device closed
// during the send: a refusal says so the same way whichever moment Close came.
func (d *Device) closedErr(err error) error {
	if errors.Is(err, pio.ErrClosed) && d.closed.Load() {
		return ErrClosed
	}
	return err
}

// sendPIO is hfi1_verbs_send_pio: PBC, copy, done.
func (f *Flow) sendPIO(ctx context.Context, segs [][]byte, c Completion) error {
	f.pioBusy.Add(1) // iowait_pio_inc before sc_buffer_alloc
	if err := f.sc.SendWait(ctx, 0, f.vl, segs, (*pioRelease)(f)); err != nil {
		f.pioDone() // verbs_pio_complete(qp, 0): not queued
		return err
	}
	f.stats[PathPIO].Add(1)
	if c != nil {
		c.Done(PathPIO, nil)
	}
	return nil
}

// drainPIO waits until the flow has no PIO packet in flight, forcing credit returns (the drain
// wait's want-PIO-buffer interrupt). The common case, no PIO packet of the flow in flight, is the
// check drainPIOWait's loop starts with, made here where it inlines: a Send by SDMA and a Drain
// then pay neither the call nor the deferred timer stop (about 47 instructions each,
// BenchmarkVerbsSend). The count only falls behind the flow's back (releases), never rises: a
// zero seen here stays zero until the flow's own next PIO send.
func (f *Flow) drainPIO(ctx context.Context) error {
	if f.pioBusy.Load() == 0 {
		return nil
	}
	return f.drainPIOWait(ctx)
}

// drainPIOWait is drainPIO's wait, once a PIO packet of the flow was seen in flight.
func (f *Flow) drainPIOWait(ctx context.Context) error {
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for f.pioBusy.Load() != 0 {
		f.sc.ReturnCredits()
		f.sc.Process() // harmless beside the chip goroutine; the only driver of a manual chip
		if f.pioBusy.Load() == 0 {
			break
		}
		if f.dev.manual {
			if err := f.wait(ctx); err != nil {
				return err
			}
			continue
		}
		// The chip goroutine may consume the flow's last packets after the forced return above
		// and, below its credit-return threshold, write nothing back: no release would come to
		// wake this wait. Force the return again after a short wait instead of waiting for it.
		if err := f.waitRetry(ctx, &retry); err != nil {
			return err
		}
	}
	return nil
}

// pioDrainRetry is how long drainPIO waits for a release before it forces a credit return
// again, and Drain for a completion before it polls the engine again.
const pioDrainRetry = 200 * time.Microsecond

// waitRetry waits for the drained token, at most pioDrainRetry (the caller then drives again),
// or until ctx ends. *retry is the caller's timer, made on first use; the caller stops it.
func (f *Flow) waitRetry(ctx context.Context, retry **time.Timer) error {
	if *retry == nil {
		*retry = time.NewTimer(pioDrainRetry)
	} else {
		(*retry).Reset(pioDrainRetry)
	}
	select {
	case <-f.drained:
	case <-(*retry).C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// wait waits for a busy count to reach zero: on the drained token, or, with manual chips, by
// yielding (another goroutine's unfinished copy may hold the chip back; the caller drives).
func (f *Flow) wait(ctx context.Context) error {
	if f.dev.manual {
		if err := ctx.Err(); err != nil {
			return err
		}
		runtime.Gosched()
		return nil
	}
	select {
	case <-f.drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Drain waits until every packet of the flow has completed on both paths, its Completion told
// (iowait_drain). It drives the flow's engine itself while it waits (Process and Poll: at once
// with ManualPIO, otherwise every 200 µs once it has waited that long), so that it also returns
// on a Manual engine and on one in sdma.CompletePoll mode, whose txreqs complete only when
// someone runs the hardware pass or polls, whether or not ManualPIO is set; on other engines the
// passes are harmless. Completions may then run on the caller's goroutine. A
// nil ctx is ErrInvalid, whether or not packets are in flight.
func (f *Flow) Drain(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("Drain")
	}
	if err := f.drainPIO(ctx); err != nil {
		return err
	}
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for f.sdmaBusy.Load() != 0 {
		if f.dev.manual {
			f.engine.Process()
			f.engine.Poll()
		} else if retry != nil {
			// Waited once already: the engine may be one nobody else drives, a Manual one (its
			// hardware pass) or a CompletePoll one (its completion pass). Both are safe beside
			// the engine's own goroutine.
			f.engine.Process()
			f.engine.Poll()
		}
		if f.sdmaBusy.Load() == 0 {
			break
		}
		var err error
		if f.dev.manual {
			err = f.wait(ctx)
		} else {
			err = f.waitRetry(ctx, &retry) // a polled engine completes nothing unless polled again
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sdmaPacket is one SDMA packet of a flow: the txreq and who to tell.
type sdmaPacket struct {
	tx   sdma.TxReq
	dev  *Device
	flow *Flow
	c    Completion
}

// Complete is the SDMA completion (verbs_sdma_complete). The flow's busy count drops after Done
// was told, as complete_tx calls the callback before iowait_sdma_dec and the drain wakeup: a
// Drain that returns has every Done behind it. Deferred, so that a Done that panics (the engine
// recovers it) still leaves the count right.
func (p *sdmaPacket) Complete(_ *sdma.TxReq, st sdma.Status) {
	f, c := p.flow, p.c
	p.flow, p.c = nil, nil
	p.dev.pool.Put(p)
	defer f.sdmaDone()
	if c != nil {
		var err error
		if st != sdma.StatusOK {
			err = ErrAborted
		}
		c.Done(PathSDMA, err)
	}
}

// addSegs adds segs, two or more, to p's txreq, each mapped through the device's mapper
// (AddKVAddr). On an add's error (the add cleaned the txreq) p goes back to the pool and the
// error is returned. A panic inside an add (of the device's Mapper, say) goes on to Send's caller
// once the txreq is cleaned: the pieces mapped before it are unmapped, p is dropped, and no
// Completion is told. A packet of one segment does not come here: sendSDMA adds it with no
// deferred cleanup (about 50 instructions per packet, BenchmarkVerbsSend), which a panic in the
// first add of a txreq does not need: that add maps or acquires nothing before the last code of
// the caller's it runs (the Mapper's map, or the lookup of a registration), so a panic there
// leaves the txreq holding nothing.
func (f *Flow) addSegs(p *sdmaPacket, segs [][]byte) error {
	built := false
	defer func() {
		if !built {
			p.tx.Clean() // a panic: the adds before it mapped their pieces
			p.flow, p.c = nil, nil
		}
	}()
	for _, s := range segs {
		if len(s) == 0 {
			continue
		}
		if err := p.tx.AddKVAddr(f.dev.sdma, s); err != nil { // the add cleaned tx
			built = true
			p.flow, p.c = nil, nil
			f.dev.pool.Put(p)
			return err
		}
	}
	built = true
	return nil
}

// sdmaDone is iowait_sdma_dec with its drain wakeup: one fewer SDMA packet in flight.
func (f *Flow) sdmaDone() {
	if f.sdmaBusy.Add(-1) == 0 {
		f.signal()
	}
}

// sendSDMA is hfi1_verbs_send_dma: a txreq over the caller's memory, mapped through the device's
// mapper, sent with the blocking send.
func (f *Flow) sendSDMA(ctx context.Context, segs [][]byte, n int, c Completion) error {
	p := f.dev.pool.Get().(*sdmaPacket)
	p.flow, p.c = f, c
	if err := p.tx.Init(0, n, p); err != nil {
		f.dev.pool.Put(p)
		return err
	}
	if len(segs) == 1 { // not empty (Send refused it): a panic in this add leaves nothing (addSegs)
		if err := p.tx.AddKVAddr(f.dev.sdma, segs[0]); err != nil { // the add cleaned tx
			p.flow, p.c = nil, nil
			f.dev.pool.Put(p)
			return err
		}
	} else if err := f.addSegs(p, segs); err != nil {
		return err
	}
	f.sdmaBusy.Add(1)
	err := f.engine.SendWait(ctx, &p.tx)
	if err == nil || errors.Is(err, sdma.ErrNotRunning) { // accepted: Complete runs
		if err == nil {
			f.stats[PathSDMA].Add(1)
		}
		return err
	}
	p.tx.Clean()
	p.flow, p.c = nil, nil
	f.dev.pool.Put(p)
	f.sdmaDone()
	return err
}
