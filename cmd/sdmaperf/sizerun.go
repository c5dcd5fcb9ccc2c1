package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
	"github.com/gosdma/gosdma/sdma/udpsink"
)

// sizeRun is one packet size's run on a fresh device, in steps that runSize strings together:
// newSizeRun (setup: device, fault injectors, producers and their payload memory), warmup, arm
// (the faults that count from the measured run, the counters' baselines), measure and collect.
type sizeRun struct {
	cfg   Config
	size  int
	frags []int // a packet's fragment lengths
	dev   *sdma.Device

	fsink *sdmatest.FaultSink // the sink's fault injector, nil without sinkfail or sinkstall
	udp   *udpsink.Sink       // the UDP sink, nil without -sink udp: its syscall count
	ps    []*producer
	close []func() error // run in reverse by done
	base  time.Time      // the run's clock: durations since base
	start counters       // the counters when the measured run began (arm)

	measuring atomic.Bool // false during warm-up: completions are not recorded
	stop      atomic.Bool // set when the duration is over
	// answered: the warm-up's deliveries went out and none was refused, so a refusal in the
	// measured run is a receiver that went away, not one that was never there. Written by arm,
	// read by noReceiver (also on the sampler's goroutine, which starts after arm).
	answered bool
}

// counters are the cumulative counts a result reports as differences over the measured run.
type counters struct {
	eng                    engTotals
	sinkFailed, sinkStalls uint64
	udp                    udpsink.Stats
}

// measurement is what measure saw besides the producers' counters.
type measurement struct {
	elapsed time.Duration
	peak    float64 // MiB/s of the best sampling interval
	stdev   float64 // MiB/s: the standard deviation of the intervals' bandwidths
}

// runSize runs one packet size on a fresh device and emits its result; with --run_infinitely
// it emits one per -D interval until ctx is done. A run cut short by ctx emits what it
// measured, marked Interrupted, and returns ctx's error.
func runSize(ctx context.Context, cfg Config, size int, sink sdma.Sink, stderr io.Writer, emit func(Result)) error {
	r, err := newSizeRun(cfg, size, sink)
	if err != nil {
		return err
	}
	defer r.done()
	if err := r.warmup(ctx); err != nil || ctx.Err() != nil {
		return cmp.Or(err, ctx.Err()) // nothing measured yet: no row
	}
	for {
		if err := r.arm(); err != nil {
			return err
		}
		m, err := r.measure(ctx, stderr)
		if err != nil && ctx.Err() == nil {
			return err
		}
		res := r.collect(m)
		res.Interrupted = ctx.Err() != nil
		emit(res)
		if !cfg.RunInfinitely || ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// now returns the time since the run's base on the monotonic clock.
func (r *sizeRun) now() time.Duration { return time.Since(r.base) }

// newSizeRun sets up a run: the device with the -faults injectors and the producers.
func newSizeRun(cfg Config, size int, sink sdma.Sink) (*sizeRun, error) {
	r := &sizeRun{cfg: cfg, size: size, frags: split(size, cfg.Frags), base: time.Now()}
	if err := r.newDevice(sink); err != nil {
		return nil, err
	}
	r.ps = make([]*producer, cfg.Producers)
	for i := range r.ps {
		p, err := newProducer(r, i)
		if err != nil {
			r.done()
			return nil, err
		}
		r.ps[i] = p
	}
	return r, nil
}

// done releases what the run holds: the producers' memory, then the device.
func (r *sizeRun) done() {
	for i := len(r.close) - 1; i >= 0; i-- {
		_ = r.close[i]()
	}
	r.close = nil
}

// newDevice builds the device: the -mapper mapper and the -sink sink, each wrapped in its fault
// injector when -faults asks, and the halt plan.
func (r *sizeRun) newDevice(sink sdma.Sink) error {
	cfg := r.cfg
	r.udp, _ = sink.(*udpsink.Sink)
	mapper, inj, err := newMapper(cfg)
	if err != nil {
		return err
	}
	if f := cfg.Faults; f.SinkFail > 0 || f.SinkStall > 0 {
		fb := &sdmatest.FaultBatchSink{FaultSink: sdmatest.FaultSink{Sink: sink, FailRate: f.SinkFail,
			StallRate: f.SinkStall, Stall: f.Stall, Seed: uint64(f.Seed)}}
		r.fsink, sink = &fb.FaultSink, &fb.FaultSink
		if bs, ok := fb.Sink.(sdma.BatchSink); ok { // keep -sink udp's batching
			fb.Batch, sink = bs, fb
		}
	}
	if r.dev, err = newSDMADevice(cfg, mapper, sink); err != nil {
		return err
	}
	r.close = append(r.close, r.dev.Close)
	currentDev.Store(r.dev) // for -http's /debug/vars
	r.close = append(r.close, func() error { currentDev.CompareAndSwap(r.dev, nil); return nil })
	if inj != nil { // armed after NewDevice, so the pad's allocation is not a victim

		if cfg.Faults.MapFraction > 0 {
			if err := inj.FailFraction(cfg.Faults.MapFraction, cfg.Faults.Seed); err != nil {
				return err
			}
		}
		if cfg.Faults.MapNth > 0 {
			inj.FailNth(cfg.Faults.MapNth)
		}
	}
	return nil
}

// warmup has every producer send cfg.Warmup packets, unmeasured, and wait for them; then it
// clears the producers' error counts.
func (r *sizeRun) warmup(ctx context.Context) error {
	if r.cfg.Warmup > 0 {
		if err := together(r.ps, func(p *producer) {
			for range r.cfg.Warmup {
				if !p.send(ctx, r.frags) {
					break
				}
			}
			p.drain()
		}); err != nil {
			return err
		}
	}
	return nil
}

// arm sets the faults that count from the measured run (haltat), zeroes the producers' counts
// and takes the counters' baselines.
func (r *sizeRun) arm() error {
	f := r.cfg.Faults
	if f.HaltAt > 0 {
		// Armed now, so that haltat counts the descriptors of the measured run, not the
		// warm-up's. The plan replaces the one NewDevice set: it keeps HaltRate. With
		// --run_infinitely each interval re-arms it: each row has its halt per engine, as
		// -faults' help says, so that rows compare and checkHalts holds for each.
		if err := setSDMAFaults(r.dev, f.armedPlan()); err != nil {
			return err
		}
	}
	for _, p := range r.ps { // every packet of the warm-up or the last interval completed
		p.mapErrors = 0
		p.msgMapErrors.Store(0)
		p.aborted.Store(0)
		p.okPackets.Store(0)
		p.hist.Reset()
	}
	r.stop.Store(false)
	r.start = r.counters()
	err := r.noReceiver() // the warm-up's deliveries were refused
	r.answered = r.answered || (err == nil && r.cfg.Warmup > 0)
	return err
}

// counters reads the cumulative counters.
func (r *sizeRun) counters() counters {
	var c counters
	c.eng = engineTotals(r.dev)
	if r.fsink != nil {
		c.sinkFailed, c.sinkStalls = r.fsink.Failed(), r.fsink.Stalled()
	}
	if r.udp != nil {
		c.udp = r.udp.Stats()
	}
	return c
}

// accepted counts the measured packets the sink accepted, and their bytes: the packets that
// completed OK less the deliveries the sink failed since arm (a failed delivery still completes
// its txreq OK, as a packet lost on the wire).
func (r *sizeRun) accepted() (packets, bytes uint64) {
	for _, p := range r.ps {
		packets += p.okPackets.Load()
	}
	failed := r.failed()
	if failed > packets { // a failure counted before its packet's completion
		failed = packets
	}
	packets -= failed
	return packets, packets * uint64(r.size)
}

// failed counts the deliveries the sink failed since arm.
func (r *sizeRun) failed() uint64 {
	var n uint64
	for i := range r.dev.NumEngines() {
		n += r.dev.Engine(i).Stats().SinkErrors
	}
	return n - r.start.eng.sinkErrors
}

// errNoReceiver is the UDP sink's deliveries refused: nobody listens at the address.
var errNoReceiver = errors.New("connection refused")

// noReceiver reports a UDP client's missing receiver: deliveries refused (ECONNREFUSED).
func (r *sizeRun) noReceiver() error {
	if r.cfg.Sink != "udp" {
		return nil
	}
	for i := range r.dev.NumEngines() {
		if err := r.dev.Engine(i).SinkError(); errors.Is(err, syscall.ECONNREFUSED) {
			if r.answered {
				return fmt.Errorf("the receiver at %s stopped answering during the run: %w", r.cfg.UDPAddr, errNoReceiver)
			}
			return fmt.Errorf("no receiver at %s: %w", r.cfg.UDPAddr, errNoReceiver)
		}
	}
	return nil
}

// expectedLength guesses how long a measured run takes, so that only long ones get a progress
// line (newProgress): -D, or a microsecond a packet of -n, saturated: an -n past 2^63/1000
// overflowed to a negative length, and the longest runs got no progress line.
func expectedLength(cfg Config) time.Duration {
	if cfg.Iterations == 0 {
		return cfg.Duration
	}
	if int64(cfg.Iterations) > int64(math.MaxInt64/time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(cfg.Iterations) * time.Microsecond
}

// measure runs the measured part: every producer sends its quota (-n) or until the duration
// is over (-D), then waits for its packets, while a sampler tracks the peak bandwidth and stops
// the run early when the receiver is missing. An interrupted run (ctx done) returns what it
// measured so far and ctx's error.
func (r *sizeRun) measure(ctx context.Context, stderr io.Writer) (measurement, error) {
	cfg := r.cfg
	var quota []int
	expected := expectedLength(cfg)
	if cfg.Iterations > 0 {
		quota = split(cfg.Iterations, len(r.ps))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	r.measuring.Store(true)
	s := startSampler(r, start, newProgress(cfg, r.size, stderr, expected), cancel)
	if cfg.Iterations == 0 {
		note := newDrainNote(r, stderr)
		t := time.AfterFunc(cfg.Duration, func() { r.stop.Store(true); note.start() })
		defer func() { note.finish(!t.Stop()) }()
	}
	more := func(p *producer, sent int) bool { // whether p sends another packet
		if quota != nil {
			return sent < quota[p.id]
		}
		return !r.stop.Load()
	}
	err := together(r.ps, func(p *producer) {
		for n := 0; more(p, n) && p.send(ctx, r.frags); n++ {
		}
		p.drain()
	})
	m := measurement{elapsed: time.Since(start)}
	r.measuring.Store(false)
	m.peak, m.stdev = s.finish()
	if err == nil {
		err = r.noReceiver()
	}
	if err == nil {
		err = context.Cause(ctx)
	}
	return m, err
}

// sampler samples the accepted bytes every interval for the peak bandwidth and the progress
// line.
type sampler struct {
	stop  chan struct{}
	done  chan struct{}
	peak  float64   // MiB/s of the best interval: written by the sampler, read after done
	rates []float64 // MiB/s of every interval: likewise
}

const sampleInterval = 50 * time.Millisecond

func startSampler(r *sizeRun, start time.Time, bar *progress, cancel context.CancelCauseFunc) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer bar.finish()
		t := time.NewTicker(sampleInterval)
		defer t.Stop()
		lastT, lastB := start, uint64(0)
		for {
			select {
			case <-s.stop:
				return
			case now := <-t.C:
				if err := r.noReceiver(); err != nil {
					cancel(err)
				}
				pk, b := r.accepted()
				if dt := now.Sub(lastT).Seconds(); dt > 0 && b >= lastB {
					rate := float64(b-lastB) / mib / dt
					s.peak = max(s.peak, rate)
					s.rates = append(s.rates, rate)
					bar.update(pk, now.Sub(start), rate)
				}
				lastT, lastB = now, b
			}
		}
	}()
	return s
}

// finish stops the sampler and returns the peak and the standard deviation of the intervals.
func (s *sampler) finish() (peak, stdev float64) {
	close(s.stop)
	<-s.done
	return s.peak, stdevOf(s.rates)
}

// stdevOf is the population standard deviation of xs (0 for fewer than two).
func stdevOf(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	var sum, sq float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	for _, x := range xs {
		sq += (x - mean) * (x - mean)
	}
	return math.Sqrt(sq / float64(len(xs)))
}

// collect turns the producers' and engines' counters into the size's result.
func (r *sizeRun) collect(m measurement) Result {
	res := Result{Bytes: r.size, Elapsed: m.elapsed, BWPeak: m.peak, BWStdev: m.stdev}
	pk, b := r.accepted()
	res.Iterations = pk
	res.rates(b)
	hist := newHistogram()
	for _, p := range r.ps {
		hist.Merge(p.hist)
		res.MapErrors += p.mapErrors + p.msgMapErrors.Load()
		res.Aborted += p.aborted.Load()
	}
	res.Latency = latencyOf(hist)
	res.hist = hist
	for i := range r.dev.NumEngines() {
		if err := r.dev.Engine(i).HaltCause(); err != nil {
			res.HaltCauses = append(res.HaltCauses, err.Error())
		}
		if err := r.dev.Engine(i).SinkError(); err != nil && res.SinkError == "" {
			res.SinkError = err.Error()
		}
	}
	now := r.counters()
	d := now.eng.sub(r.start.eng)
	res.RingFull = d.ringFull // every Send that found no room, SendWait's and spinning retries alike
	res.Sleeps, res.Wakeups = d.sleeps, d.wakeups
	res.Halts = d.halts
	res.HaltsBy = d.haltsByCause()
	res.HaltsInjected = r.cfg.Faults.InjectsHalts()
	res.Recoveries = d.recoveries
	res.SinkErrors = d.sinkErrors
	res.SinkFailed = now.sinkFailed - r.start.sinkFailed
	res.SinkStalls = now.sinkStalls - r.start.sinkStalls
	res.Faults = res.MapErrors + res.Halts + res.SinkErrors + res.SinkStalls
	if pk := (now.udp.Packets + now.udp.Errors) - (r.start.udp.Packets + r.start.udp.Errors); pk > 0 {
		res.Syscalls = float64(now.udp.Syscalls-r.start.udp.Syscalls) / float64(pk)
	}
	return res
}

// together runs f on every producer in its own goroutine and waits; it returns the first
// producer error.
func together(ps []*producer, f func(*producer)) error {
	atOnce(len(ps), func(i int) { f(ps[i]) })
	for _, p := range ps {
		if p.err != nil {
			return p.err
		}
	}
	return nil
}

// fill writes a recognisable pattern: producer id and offset.
func fill(b []byte, id int) {
	for i := range b {
		b[i] = byte(i) ^ byte(id*37)
	}
}

// drainGrace is how long the drain after -D may take before sdmaperf says what it waits for.
const drainGrace = 500 * time.Millisecond

// drainNote tells stderr, when the drain after -D takes longer than drainGrace, how many
// packets are still in flight and how long they will take at the delivery rate of the grace
// period: -D bounds the sending, not the completion of what was sent (a stalling sink
// completes one packet per stall).
type drainNote struct {
	r      *sizeRun
	w      io.Writer
	done   chan struct{} // closed by finish: the drain ended
	exited chan struct{} // closed when the note's goroutine returned
}

func newDrainNote(r *sizeRun, w io.Writer) *drainNote {
	return &drainNote{r: r, w: w, done: make(chan struct{}), exited: make(chan struct{})}
}

// start runs when -D is over (the stop timer's goroutine).
func (n *drainNote) start() {
	go func() {
		defer close(n.exited)
		c0 := n.r.delivered()
		select {
		case <-n.done:
			return
		case <-time.After(drainGrace):
		}
		inflight, c1 := n.r.inFlight(), n.r.delivered()
		eta := "for an unknown time (nothing delivered in the last " + drainGrace.String() + ")"
		if c1 > c0 {
			eta = "~" + (time.Duration(inflight) * drainGrace / time.Duration(c1-c0)).Round(time.Millisecond).String()
		}
		fmt.Fprintf(n.w, "sdmaperf: -D %v is over; draining %d packets still in flight: %s at the current rate\n",
			n.r.cfg.Duration, inflight, eta)
	}()
}

// finish ends the note and, if the stop timer fired (and so start runs or ran), waits for the
// note's goroutine, which may write to stderr.
func (n *drainNote) finish(fired bool) {
	close(n.done)
	if fired {
		<-n.exited
	}
}

// delivered counts the packets the engines delivered so far: the drain's progress (their
// completions follow in batches, at the engines' interrupts).
func (r *sizeRun) delivered() uint64 {
	var c uint64
	for i := range r.dev.NumEngines() {
		c += r.dev.Engine(i).Stats().Packets
	}
	return c
}

// inFlight counts the packets sent and not yet completed (payload slots taken).
func (r *sizeRun) inFlight() int {
	n := 0
	for _, p := range r.ps {
		n += cap(p.slots) - len(p.slots)
	}
	return n
}
