package main

// -path: which of hfi1's transmit paths sdmaperf measures. "sdma" (the default) is everything
// else in this command. "pio" and "auto" run here: each producer is a verbs.Flow on a
// verbs.Device, whose packets go by PIO (the CPU copies them into a send context, package pio)
// or, with auto, by hfi1_verbs_send's choice (PIO up to the kernel's piothreshold of 256 bytes,
// SDMA above). With -sweep every size also runs by the other path, in the same process, and the
// table ends with where the crossover lies on this machine.

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/verbs"
)

// The -path values.
const (
	pathSDMA = "sdma"
	pathPIO  = "pio"
	pathAuto = "auto"
)

// pathFlag registers -path (newFlagSet calls it).
func pathFlag(fs *flag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.Path, "path", "", fmt.Sprintf("transmit path: sdma (send DMA, the default), pio (programmed I/O: the CPU copies each packet into a PIO send context; sizes up to %d) or auto (hfi1_verbs_send's choice: PIO up to %d bytes, SDMA above); with pio or auto, -sweep also runs each size by SDMA and shows the crossover", pio.ThresholdCeiling, pio.DefaultThreshold))
}

// checkPath validates -path and what it can be combined with (a clientChecks step).
func checkPath(cfg *Config, raw rawFlags, set flagSet) error {
	switch cfg.Path {
	case "", pathSDMA:
		return nil
	case pathPIO, pathAuto:
	default:
		return usagef("-path %q: want sdma, pio or auto", cfg.Path)
	}
	if cfg.Mode == ModeMsg {
		return usagef("%[1]s msg applies to %[2]s sdma only (its messages go through a usdma packet queue); %[2]s %[3]s measures packets", raw.typed("mode"), raw.typed("path"), cfg.Path)
	}
	for _, name := range []string{"sink", "mem", "send", "alloc", "ring", "depth", "shared", "completion"} {
		if set[name] {
			return usagef("%[1]s applies to %[2]s sdma only (%[2]s %[3]s sends through verbs.Flow.Send)", raw.typed(name), raw.typed("path"), cfg.Path)
		}
	}
	if err := checkPIOOnly(cfg, raw, set); err != nil {
		return err
	}
	if cfg.Path == pathPIO {
		var keep []int
		for _, s := range cfg.Sizes {
			if s <= pio.ThresholdCeiling {
				keep = append(keep, s)
			}
		}
		if len(keep) == 0 || (!raw.sweep && len(keep) != len(cfg.Sizes)) {
			return usagef("-path pio: a PIO packet is at most %d bytes (PIO_THRESHOLD_CEILING); lower -size", pio.ThresholdCeiling)
		}
		cfg.Sizes = keep
	}
	if cfg.Mode == ModeLat && cfg.Producers > 255 {
		return usagef("-path %s -mode lat: at most 255 producers (each packet carries its producer in its first byte)", cfg.Path)
	}
	if f := cfg.Faults; f.MapFraction > 0 || f.MapNth > 0 || f.SinkFail > 0 || f.SinkStall > 0 {
		return usagef("-path %s: -faults takes halt=RATE, haltat=N and seed=N here (PIO send context and SDMA engine halts)", cfg.Path)
	}
	if c, ok := faultGiven(raw.faults, "cause"); ok {
		return usagef("-faults cause=%s is not supported with -path pio|auto (a PIO send context's injected halt has no cause to choose)", c)
	}
	return nil
}

// checkPIOOnly refuses -engines, -mapper and -wait where every packet goes by PIO: -path pio, and
// -path auto with a -size up to the PIO threshold (pio.DefaultThreshold: newPathDevice leaves
// the verbs default). Such a packet takes SDMA only behind an SDMA packet of its flow still in
// flight (hfi1: get_send_routine, verbs.Flow.choose), and no packet of the run goes by SDMA, so
// auto never falls back. The CPU copies each packet into a send context, with no SDMA engine and
// no DMA mapping; the device's engines sit idle (a -wait busy-poll one still burns its core), so
// these were taken and changed nothing measured. A -sweep also runs each size by SDMA, which
// takes them.
func checkPIOOnly(cfg *Config, raw rawFlags, set flagSet) error {
	if raw.sweep {
		return nil
	}
	why := raw.typed("path") + " pio: every packet goes by PIO"
	switch {
	case cfg.Path == pathAuto && cfg.Sizes[0] <= pio.DefaultThreshold:
		why = fmt.Sprintf("%s auto %s %d: every packet goes by PIO (hfi1_verbs_send's choice up to %d bytes; with no SDMA packet in flight it never falls back to SDMA)",
			raw.typed("path"), spell(raw, set, "size"), cfg.Sizes[0], pio.DefaultThreshold)
	case cfg.Path != pathPIO:
		return nil
	}
	for _, name := range []string{"engines", "mapper", "wait"} {
		if set[name] {
			return usagef("%s with %s, which uses no SDMA engine and maps nothing; %[1]s applies to SDMA (-path sdma, -path auto with -size above %[3]d, or a -sweep of -path pio or auto, whose sizes also run by SDMA)", raw.typed(name), why, pio.DefaultThreshold)
		}
	}
	return nil
}

// faultGiven returns the value of key in the -faults string s (parsed already, so well formed),
// and whether it was given: parseFaults fills some keys' defaults (cause with haltat).
func faultGiven(s, key string) (string, bool) {
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// pathOutputs are the output flags of a packet run (runClient) that -path pio and auto, which
// print their own table or -json, do not implement.
var pathOutputs = []string{"output", "csv", "report_gbits", "H", "hist", "plot", "run_infinitely", "http"}

// checkPathOutputs refuses the output flags -path pio and auto would ignore (a clientChecks step).
func checkPathOutputs(cfg *Config, raw rawFlags, set flagSet) error {
	if cfg.Path != pathPIO && cfg.Path != pathAuto {
		return nil
	}
	for _, name := range pathOutputs {
		if set[name] {
			return usagef("%[1]s applies to %[2]s sdma only (%[2]s %[3]s prints its path table, or -json)", raw.typed(name), raw.typed("path"), cfg.Path)
		}
	}
	return nil
}

// sweepRounds is how many times a -sweep runs each path at each size, interleaved; the table
// keeps the best round of each (as bench/compare.sh does).
const sweepRounds = 3

// pathResult is one path at one size.
type pathResult struct {
	Path     string  `json:"path"` // pio | sdma | auto
	Bytes    int     `json:"bytes"`
	Packets  uint64  `json:"packets"`
	Seconds  float64 `json:"seconds"`
	Mpps     float64 `json:"mpps"`
	MiBps    float64 `json:"mib_per_s"` // perftest's MB/sec: 2^20 bytes, as every bandwidth of the tool
	NsPerPkt float64 `json:"ns_per_pkt"`
	P50      float64 `json:"p50_ns,omitempty"`
	P99      float64 `json:"p99_ns,omitempty"`
	ByPIO    uint64  `json:"by_pio"`
	BySDMA   uint64  `json:"by_sdma"`
	Refused  uint64  `json:"refused,omitempty"` // sends refused while a halted PIO context or SDMA engine recovered
	Flushed  uint64  `json:"flushed,omitempty"` // sent but flushed by a halt before delivery (released by a PIO context, aborted by an SDMA engine)
	Halts    uint64  `json:"pio_halts,omitempty"`
	// SDMAHalts: halts of the SDMA engines (-faults halt and haltat reach them as in the SDMA
	// run: the packets above the PIO threshold with -path auto, the sdma rows of a sweep).
	SDMAHalts uint64 `json:"sdma_halts,omitempty"`
	// Interrupted: Ctrl-C cut the run short; the figures are of the part that ran.
	Interrupted bool `json:"interrupted,omitempty"`
}

// pathReport is the -json output of a -path pio|auto run.
type pathReport struct {
	Tool      string       `json:"tool"`
	Host      *Host        `json:"host,omitempty"`
	Config    Config       `json:"config"`
	Results   []pathResult `json:"results"`
	Crossover int          `json:"crossover_bytes,omitempty"` // the largest size PIO beat SDMA at (with -sweep)
	// Compared: some size has both a PIO and an SDMA row (with -sweep), so that Crossover 0 says
	// SDMA was faster from the smallest size; a Ctrl-C before the first size's SDMA run leaves
	// none. Not in -json, whose crossover_bytes is absent in both cases, as before.
	Compared bool `json:"-"`
	// Interrupted: Ctrl-C ended the run; Results are what ran, the last one partial.
	Interrupted bool `json:"interrupted,omitempty"`
}

// runPaths is the client for -path pio|auto.
func runPaths(ctx context.Context, cfg Config, stdout io.Writer) error {
	rep := pathReport{Tool: "sdmaperf", Config: cfg, Host: hostInfo(cfg)}
	paths := []string{cfg.Path}
	if len(cfg.Sizes) > 1 { // -sweep: the same sizes by the other path(s), same process
		paths = []string{pathPIO, pathSDMA}
		if cfg.Path == pathAuto {
			paths = append(paths, pathAuto)
		}
	}
	rounds := 1
	if len(paths) > 1 {
		rounds = sweepRounds
	}
sizes:
	for _, size := range cfg.Sizes {
		best := map[string]pathResult{}
		for range rounds { // the paths interleaved, best of the rounds: a shared machine's noise
			for _, p := range paths {
				if p == pathPIO && size > pio.ThresholdCeiling {
					continue
				}
				r, err := runPath(ctx, cfg, p, size)
				if errors.Is(err, errStalled) { // a hang, whether or not the context ended since
					return fmt.Errorf("-path %s, %d bytes: %w", p, size, err)
				}
				if ctx.Err() != nil { // Ctrl-C: the results so far, this one partial if its measured run began (runPath)
					rep.Interrupted = true
					if err == nil {
						r.Interrupted = true
						rep.Results = append(rep.Results, r)
					}
					break sizes
				}
				if err != nil {
					return fmt.Errorf("-path %s, %d bytes: %w", p, size, err)
				}
				if b, ok := best[p]; !ok || cost(cfg.Mode, r) < cost(cfg.Mode, b) {
					best[p] = r
				}
			}
		}
		for _, p := range paths {
			if r, ok := best[p]; ok {
				rep.Results = append(rep.Results, r)
			}
		}
	}
	rep.Crossover, rep.Compared = crossover(cfg.Mode, rep.Results)
	if cfg.JSON {
		if err := writeJSONValue(stdout, rep); err != nil {
			return err
		}
	} else {
		writePathTable(stdout, cfg, rep)
	}
	if rep.Interrupted {
		return errInterrupted
	}
	return nil
}

// cost is a result's time per packet for the mode: the p50 latency, or the time per packet at
// full rate.
func cost(mode Mode, r pathResult) float64 {
	if mode == ModeLat {
		return r.P50
	}
	return r.NsPerPkt
}

// crossover returns the largest size at which PIO cost less than SDMA, if every smaller size
// did too (0 when SDMA cost less at the smallest), and whether any size was compared. The
// comparison stops at the first PIO size without an SDMA row: a sweep cut by Ctrl-C ends with
// the row it cut short, one path's (runPaths), and measured nothing by the other path there or
// after. Without any pair (a Ctrl-C before the first size's SDMA run) nothing was compared.
func crossover(mode Mode, rs []pathResult) (int, bool) {
	by := map[string]map[int]pathResult{}
	for _, r := range rs {
		if by[r.Path] == nil {
			by[r.Path] = map[int]pathResult{}
		}
		by[r.Path][r.Bytes] = r
	}
	best, compared := 0, false
	for _, r := range rs {
		if r.Path != pathPIO {
			continue
		}
		s, ok := by[pathSDMA][r.Bytes]
		if !ok {
			break
		}
		compared = true
		if cost(mode, r) >= cost(mode, s) {
			break
		}
		best = r.Bytes
	}
	return best, compared
}

// pioFaster lists the sizes at which PIO cost less than SDMA.
func pioFaster(mode Mode, rs []pathResult) []int {
	sd := map[int]pathResult{}
	for _, r := range rs {
		if r.Path == pathSDMA {
			sd[r.Bytes] = r
		}
	}
	var out []int
	for _, r := range rs {
		if s, ok := sd[r.Bytes]; ok && r.Path == pathPIO && cost(mode, r) < cost(mode, s) {
			out = append(out, r.Bytes)
		}
	}
	return out
}

func writePathTable(w io.Writer, cfg Config, rep pathReport) {
	fmt.Fprintln(w, rule)
	fmt.Fprintf(w, " sdmaperf -path %s   mode %s   producers %d   engines %d   mapper %s   PIO threshold %d (auto)\n",
		cfg.Path, cfg.Mode, cfg.Producers, cfg.Engines, cfg.Mapper, pio.DefaultThreshold)
	fmt.Fprintln(w, rule)
	if cfg.Mode == ModeLat {
		fmt.Fprintf(w, " %-5s %8s %12s %10s %10s %10s %8s %8s %9s %10s %8s\n", "path", "bytes", "packets", "Mpps", "p50 ns", "p99 ns", "by pio", "by sdma", "pio halts", "sdma halts", "flushed")
	} else {
		fmt.Fprintf(w, " %-5s %8s %12s %10s %10s %10s %8s %8s %9s %10s %8s\n", "path", "bytes", "packets", "Mpps", "MiB/s", "ns/pkt", "by pio", "by sdma", "pio halts", "sdma halts", "flushed")
	}
	for _, r := range rep.Results {
		a, b := r.MiBps, r.NsPerPkt
		if cfg.Mode == ModeLat {
			a, b = r.P50, r.P99
		}
		mark := ""
		if r.Interrupted {
			mark = " (interrupted)"
		}
		fmt.Fprintf(w, " %-5s %8d %12d %10.3f %10.1f %10.1f %8d %8d %9d %10d %8d%s\n", r.Path, r.Bytes, r.Packets, r.Mpps, a, b, r.ByPIO, r.BySDMA, r.Halts, r.SDMAHalts, r.Flushed, mark)
	}
	fmt.Fprintln(w, rule)
	if rep.Interrupted {
		fmt.Fprintln(w, " interrupted: the results so far")
	}
	if len(cfg.Sizes) > 1 {
		what := "ns/pkt"
		if cfg.Mode == ModeLat {
			what = "p50"
		}
		switch {
		case !rep.Compared:
			fmt.Fprintln(w, " crossover: not measured (no size has both a PIO and an SDMA row)")
		case rep.Crossover > 0:
			fmt.Fprintf(w, " crossover: PIO's %s (best of %d rounds) is below SDMA's at every size up to %d bytes on this machine (the kernel's default threshold is %d)\n", what, sweepRounds, rep.Crossover, pio.DefaultThreshold)
		default:
			fmt.Fprintf(w, " crossover: SDMA's %s (best of %d rounds) is below PIO's from the smallest size on this machine\n", what, sweepRounds)
		}
		fmt.Fprintf(w, " PIO faster at: %v bytes\n", pioFaster(cfg.Mode, rep.Results))
		fmt.Fprintln(w, rule)
	}
}

// flowSink counts the packets each producer's flow delivered (by the producer index in the first
// byte), for the latency mode's wait and the totals.
type flowSink struct {
	n     [256]atomic.Uint64
	total atomic.Uint64
}

func (s *flowSink) Deliver(_ int, segs [][]byte) error {
	for _, g := range segs {
		if len(g) > 0 {
			s.n[g[0]].Add(1)
			break
		}
	}
	s.total.Add(1)
	return nil
}

// runPath measures one path at one size: set up, warm up, measure, collect.
func runPath(ctx context.Context, cfg Config, path string, size int) (_ pathResult, err error) {
	sink := &flowSink{}
	dev, closeDev, err := newPathDevice(cfg, path, sink)
	if err != nil {
		return pathResult{Path: path, Bytes: size}, err
	}
	defer func() {
		if cerr := closeBounded(ctx, closeDev); cerr != nil && !errors.Is(err, errStalled) {
			err = cerr
		}
	}()
	ps := make([]*pathProducer, cfg.Producers)
	for i := range ps {
		ps[i] = newPathProducer(dev, sink, i, size, cfg.Frags, cfg.Mode == ModeLat)
	}
	if err := warmPaths(ctx, cfg, ps); err != nil || ctx.Err() != nil {
		// Nothing measured yet: no row (runPaths), as a packet run's Ctrl-C in its warm-up
		// (runSize). The warm-up returns nil at a Ctrl-C, once its packets drained.
		return pathResult{Path: path, Bytes: size}, cmp.Or(err, ctx.Err())
	}
	if err := armPaths(cfg, dev); err != nil {
		return pathResult{Path: path, Bytes: size}, err
	}
	before, halts, eng := sink.total.Load(), pioHalts(dev), engineTotals(dev.SDMA())
	el, err := measurePaths(ctx, cfg, ps)
	if err != nil {
		return pathResult{Path: path, Bytes: size}, err
	}
	r := collectPath(cfg, path, size, sink.total.Load()-before, el, ps)
	r.Halts = pioHalts(dev) - halts
	r.SDMAHalts = engineTotals(dev.SDMA()).sub(eng).halts
	return r, nil
}

// armPaths sets the faults that count from the measured run (-faults haltat=N), as the SDMA
// run's sizeRun.arm does: each SDMA engine halts at the Nth descriptor it reads after the
// warm-up (with the default cause), and each PIO context at the Nth packet it takes up. The PIO
// plan's HaltAt counts over the context's life, so it is set now, past the packets taken up so
// far: the ones sent and the ones the plan halted at (each halt numbers a packet it did not
// send; the warm-up has drained, the chip is idle).
func armPaths(cfg Config, dev *verbs.Device) error {
	n := cfg.Faults.HaltAt
	if n <= 0 {
		return nil
	}
	if err := setSDMAFaults(dev.SDMA(), cfg.Faults.armedPlan()); err != nil {
		return err
	}
	for i := range dev.NumContexts() {
		sc := dev.Context(i)
		s := sc.Stats()
		p := cfg.Faults.pioPlan()
		p.HaltAt = s.Packets + s.Halts + uint64(n)
		if err := sc.SetFaults(p); err != nil {
			return err
		}
	}
	return nil
}

// pioHalts is the halts of every PIO context of dev so far.
func pioHalts(dev *verbs.Device) uint64 {
	var n uint64
	for i := range dev.NumContexts() {
		n += dev.Context(i).Stats().Halts
	}
	return n
}

// newPathDevice builds the SDMA device and the verbs device over it for path, and returns a
// function that closes both.
func newPathDevice(cfg Config, path string, sink sdma.Sink) (*verbs.Device, func(), error) {
	m, _, err := newMapper(cfg)
	if err != nil {
		return nil, nil, err
	}
	// -ring and -completion are refused with -path pio|auto (checkPath): their defaults, the
	// device's own.
	sd, err := newSDMADevice(cfg, m, sink)
	if err != nil {
		return nil, nil, err
	}
	vc := verbs.Config{SDMA: sd, Contexts: max(1, min(cfg.Producers, 16))}
	switch path {
	case pathPIO:
		vc.PIOThreshold = pio.ThresholdCeiling
	case pathSDMA:
		vc.DisablePIO = true
	}
	vc.PIOFaults = cfg.Faults.pioPlan() // haltat is armed after the warm-up (armPaths)
	dev, err := verbs.New(vc)
	if err != nil {
		sd.Close()
		return nil, nil, err
	}
	return dev, func() { dev.Close(); sd.Close() }, nil
}

// warmPaths sends -warmup packets per producer and waits until they are delivered.
func warmPaths(ctx context.Context, cfg Config, ps []*pathProducer) error {
	if err := pathTogether(ps, func(p *pathProducer) error { return p.run(ctx, cfg.Warmup, time.Time{}) }); err != nil {
		return err
	}
	if err := drainFlows(ctx, ps); err != nil {
		return err
	}
	for _, p := range ps {
		p.reset()
	}
	return nil
}

// measurePaths runs the producers for -n packets or -D and waits for every flow to drain.
func measurePaths(ctx context.Context, cfg Config, ps []*pathProducer) (time.Duration, error) {
	quota, deadline := map[*pathProducer]int{}, time.Time{}
	if cfg.Iterations > 0 { // -n over all producers (at least one each: checkLength)
		for i, n := range split(cfg.Iterations, len(ps)) {
			quota[ps[i]] = n
		}
	} else {
		deadline = time.Now().Add(cfg.Duration)
	}
	start := time.Now()
	if err := pathTogether(ps, func(p *pathProducer) error { return p.run(ctx, quota[p], deadline) }); err != nil {
		return 0, err
	}
	if err := drainFlows(ctx, ps); err != nil { // also after Ctrl-C: the partial result
		return 0, err
	}
	return time.Since(start), nil
}

// pathDrainGrace bounds a drain once the run's context has ended (Ctrl-C, or a caller's deadline:
// the tests' one minute): what is in flight then completes within microseconds, so a flow still
// busy after it is stuck, and the run fails with errStalled, saying what it waited for, instead
// of waiting forever. A variable for the tests.
var pathDrainGrace = 5 * time.Second

// errStalled: a -path run's flow did not drain, a packet in flight never completed (a lost
// wake-up or a lost packet). It is a failure, not an interruption, even after the context
// ended (run).
var errStalled = errors.New("stalled")

// drainFlows waits until every producer's flow has drained (verbs.Flow.Drain): while ctx lasts,
// and once it has ended (Ctrl-C: the partial result counts what was sent; as the packet run's
// drain) for pathDrainGrace more. A flow still busy then is an errStalled, and so is a drain that
// does not return (a wait inside it that ignores its context), pathDrainGrace later again.
func drainFlows(ctx context.Context, ps []*pathProducer) error {
	dctx, done := graceContext(ctx, pathDrainGrace)
	defer done()
	var at atomic.Int64 // the producer whose flow is being drained
	return bounded(dctx, func() error {
		for i, p := range ps {
			at.Store(int64(i))
			if err := p.flow.Drain(dctx); err != nil {
				return p.stalled("did not drain", context.Cause(dctx))
			}
		}
		return nil
	}, func() error {
		return ps[at.Load()].stalled("was draining, and the drain did not return", context.Cause(dctx))
	})
}

// closeBounded runs closeDev, and gives up on it once ctx has ended and twice pathDrainGrace
// passed: a Close that has not returned by then (it waits for the PIO contexts' unfinished copies
// and the engines' goroutines) is an errStalled.
func closeBounded(ctx context.Context, closeDev func()) error {
	gctx, done := graceContext(ctx, pathDrainGrace)
	defer done()
	return bounded(gctx, func() error {
		closeDev()
		return nil
	}, func() error {
		return fmt.Errorf("%w: closing the devices did not return (%v)", errStalled, context.Cause(gctx))
	})
}

// bounded runs f on a goroutine and returns its error. Once ctx has ended it waits
// pathDrainGrace more for f, then returns stalled() and leaves f's goroutine behind: a wait that
// does not return is reported, not waited for (the process exits, or a test fails, soon after).
func bounded(ctx context.Context, f, stalled func() error) error {
	res := make(chan error, 1)
	go func() { res <- f() }()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(pathDrainGrace)
	defer t.Stop()
	select {
	case err := <-res:
		return err
	case <-t.C:
		return stalled()
	}
}

// graceContext returns a context that ends grace after ctx ends (its cause says so), not with
// it, and the function that releases it.
func graceContext(ctx context.Context, grace time.Duration) (context.Context, func()) {
	gctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, func() {
			cancel(fmt.Errorf("%w, then %v more", context.Cause(ctx), grace))
		})
		context.AfterFunc(gctx, func() { t.Stop() })
	})
	return gctx, func() { stop(); cancel(nil) }
}

// stalled is the errStalled of p's flow, which did not drain (what: how; cause: why the wait
// ended): what it still has in flight, and what its PIO context and SDMA engine say.
func (p *pathProducer) stalled(what string, cause error) error {
	f := p.flow
	pb, sb := f.Busy()
	sc, e := f.Context(), f.Engine()
	cs, es := sc.Stats(), e.Stats()
	return fmt.Errorf("%w: producer %d's flow %s (%v): %d PIO and %d SDMA packets in flight, "+
		"%d sent by PIO and %d by SDMA, %d delivered; PIO context %d: %d packets sent, %d credit returns, %d releases, %d flushed, %d halts, %d waiting, %d buffers being written; "+
		"SDMA engine %d: running %v, ring empty %v, %d packets sent, %d completed, %d aborted, %d interrupts, %d completion passes",
		errStalled, p.id, what, cause, pb, sb, f.Sent(verbs.PathPIO), f.Sent(verbs.PathSDMA), p.sink.n[p.id].Load(),
		sc.Index(), cs.Packets, cs.CreditReturns, cs.Releases, cs.Flushed, cs.Halts, sc.Waiting(), sc.InFlight(),
		e.Index(), e.Running(), e.Empty(), es.Packets, es.Completed, es.Aborted, es.Interrupts, es.Passes)
}

// collectPath makes the result row of the measured run from what the sink counted and the flows
// say (runPath adds the halts).
func collectPath(cfg Config, path string, size int, packets uint64, el time.Duration, ps []*pathProducer) pathResult {
	r := pathResult{Path: path, Bytes: size, Packets: packets, Seconds: el.Seconds()}
	r.Mpps = float64(r.Packets) / el.Seconds() / 1e6
	r.MiBps = float64(r.Packets) * float64(size) / el.Seconds() / mib
	if r.Packets > 0 {
		r.NsPerPkt = float64(el.Nanoseconds()) / float64(r.Packets)
	}
	h := hdrhistogram.New(1, int64(10*time.Second), 3)
	for _, p := range ps {
		if p.hist != nil {
			h.Merge(p.hist)
		}
		r.ByPIO += p.flow.Sent(verbs.PathPIO) - p.basePIO
		r.BySDMA += p.flow.Sent(verbs.PathSDMA) - p.baseSDMA
		r.Refused += p.refused
	}
	if cfg.Mode == ModeLat {
		r.P50, r.P99 = float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(99))
	}
	if sent := r.ByPIO + r.BySDMA; sent > r.Packets {
		r.Flushed = sent - r.Packets
	}
	return r
}

// pathTogether runs f on every producer at once and returns the first error.
func pathTogether(ps []*pathProducer, f func(*pathProducer) error) error {
	errs := make([]error, len(ps))
	atOnce(len(ps), func(i int) { errs[i] = f(ps[i]) })
	return errors.Join(errs...)
}

// pathProducer is one producer: a flow and its packet, cut into -frags pieces.
type pathProducer struct {
	id                uint8
	flow              *verbs.Flow
	sink              *flowSink
	segs              [][]byte
	hist              *hdrhistogram.Histogram // latency mode only
	sent              uint64
	refused           uint64
	basePIO, baseSDMA uint64
}

func newPathProducer(dev *verbs.Device, sink *flowSink, i, size, frags int, lat bool) *pathProducer {
	buf := make([]byte, size)
	for k := range buf {
		buf[k] = byte(k * 7)
	}
	buf[0] = byte(i) // the flowSink's key
	p := &pathProducer{id: byte(i), flow: dev.NewFlow(uint32(i), 0), sink: sink}
	off := 0
	for _, n := range split(size, min(frags, size)) {
		p.segs = append(p.segs, buf[off:off+n])
		off += n
	}
	if lat {
		p.hist = hdrhistogram.New(1, int64(10*time.Second), 3)
	}
	return p
}

func (p *pathProducer) reset() {
	p.sent, p.refused = 0, 0
	p.basePIO, p.baseSDMA = p.flow.Sent(verbs.PathPIO), p.flow.Sent(verbs.PathSDMA)
	if p.hist != nil {
		p.hist.Reset()
	}
}

// run sends until quota packets (quota > 0) went out, or the deadline. A send refused while a
// halted context or engine recovers sends nothing: it is counted (refused) and tried again, so
// -n counts packets sent (delivered, or flushed by a halt), as without faults. In latency mode
// each packet is timed from the send call until the sink has it.
func (p *pathProducer) run(ctx context.Context, quota int, deadline time.Time) error {
	for i := 0; ; i++ {
		if quota > 0 && p.sent >= uint64(quota) || quota == 0 && (deadline.IsZero() || i&63 == 0 && time.Now().After(deadline)) {
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		t0, before := time.Now(), p.sink.n[p.id].Load()
		_, err := p.flow.Send(ctx, p.segs, nil)
		if errors.Is(err, pio.ErrNotRunning) || errors.Is(err, sdma.ErrNotRunning) { // a halted context or engine recovering: the packet was not sent
			p.refused++
			runtime.Gosched() // let the recovery run (on one P it needs this goroutine's time)
			continue
		}
		if err != nil {
			if ctx.Err() != nil { // Ctrl-C while Send waited for room: stop, as above
				return nil
			}
			return err
		}
		p.sent++
		if p.hist != nil && p.awaitDelivery(ctx, before) {
			_ = p.hist.RecordValue(int64(time.Since(t0)))
		}
	}
}

// awaitDelivery waits until the sink has the packet this producer just sent (latency mode): its
// count is past before (taken before the send), or the flow has nothing in flight any more,
// which without the delivery means a halt flushed the packet (-faults: a PIO context's halt
// releases what it did not send), or ctx ended. It reports whether the packet was delivered.
func (p *pathProducer) awaitDelivery(ctx context.Context, before uint64) bool {
	for spin := 1; ; spin++ {
		if p.sink.n[p.id].Load() > before {
			return true
		}
		if spin&63 == 0 {
			// A delivery comes before the release that drops the flow's busy count: loaded
			// after an idle flow, the count says whether the packet went out.
			if pb, sb := p.flow.Busy(); pb == 0 && sb == 0 {
				return p.sink.n[p.id].Load() > before
			}
			if ctx.Err() != nil {
				return false
			}
			runtime.Gosched()
		}
	}
}
