package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/bits"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/ring"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/udpsink"
)

// Limits the flags are checked against.
const (
	maxPacket     = 16383         // MAX_SDMA_PKT_SIZE: tlen is 14 bits on the wire
	maxSweepSize  = 8192          // the largest power of two that fits in a packet
	minSweepSize  = 2             // the smallest swept size (perftest -a: 2..2^23, capped here at maxSweepSize)
	maxFrags      = 256           // past 63 descriptors the library coalesces; more is only slower
	maxEngines    = 16            // hfi1 has 16 SDMA engines per device
	maxProducers  = 1024          //
	maxDepth      = 4096          // packets in flight per producer
	maxPayloadMem = 1 << 30       // payload memory over all producers' packets in flight
	maxPackets    = math.MaxInt32 // packets of one size's run or warm-up over all producers: -n (with or without -q), -warmup
	defaultUDP    = "127.0.0.1:18515"
	defaultSweepD = 250 * time.Millisecond
)

// Mode is what is measured.
type Mode string

const (
	ModeBW  Mode = "bw"  // bandwidth: keep up to -depth packets in flight per producer (ib_send_bw)
	ModeLat Mode = "lat" // latency: one packet in flight per producer, ping-pong (ib_send_lat)
)

// Config is one sdmaperf invocation, after flag parsing and validation.
type Config struct {
	Mode       Mode          `json:"mode"`
	Engines    int           `json:"engines"`
	Producers  int           `json:"producers"`
	Sizes      []int         `json:"sizes"`            // packet sizes in bytes, one run each
	Frags      int           `json:"frags"`            // fragments (Add calls) per packet
	MTU        int           `json:"mtu,omitempty"`    // -mode msg: packet payload (fragment size)
	Mem        string        `json:"mem"`              // kvaddr | page | registered: how fragments are added
	Shared     bool          `json:"shared,omitempty"` // every packet maps the same payload memory
	Iterations int           `json:"iterations,omitempty"`
	Duration   time.Duration `json:"duration_ns,omitempty"`
	Warmup     int           `json:"warmup"`              // packets sent per producer before measuring
	Depth      int           `json:"depth"`               // packets in flight per producer
	Ring       int           `json:"ring"`                // descriptors per engine ring
	Mapper     string        `json:"mapper"`              // direct | iommu
	Alloc      string        `json:"alloc"`               // slab | list | pool
	Wait       string        `json:"wait"`                // spin-park | busy-poll | park: how an idle engine waits
	Send       string        `json:"send"`                // block | sleep | spin: what a producer does when the ring is full
	Completion string        `json:"completion"`          // irq | poll: who runs the completion pass
	Sink       string        `json:"sink"`                // discard | udp
	UDPAddr    string        `json:"udp_addr,omitempty"`  // "" with -sink udp: in-process receiver
	UDPBatch   int           `json:"udp_batch,omitempty"` // -sink udp: packets per sendmmsg; 0 the sink's default, 1 unbatched
	UDPGSO     bool          `json:"udp_gso,omitempty"`   // -sink udp: UDP GSO runs in each batch
	Faults     FaultSpec     `json:"faults"`
	Path       string        `json:"path,omitempty"` // sdma | pio | auto (paths.go)
	JSON       bool          `json:"-"`
	CSV        bool          `json:"-"`
	Output     string        `json:"-"` // --output: bandwidth | message_rate | latency, one number per size
	Progress   bool          `json:"-"`

	ReportGbits   bool   `json:"report_gbits,omitempty"`   // --report_gbits: bandwidth in Gb/s
	RunInfinitely bool   `json:"run_infinitely,omitempty"` // --run_infinitely: a row every -D until Ctrl-C
	Histogram     bool   `json:"-"`                        // -H: print the latency histogram
	HistFile      string `json:"-"`                        // -hist: write it to a file
	Plot          string `json:"-"`                        // -plot: draw the results to a file
	HTTP          string `json:"-"`                        // -http: serve /debug/vars and /debug/pprof/

	Args []string `json:"-"` // the command line as given (Report.Host has it)

	// Server mode (sdmaperf -server).
	Server bool          `json:"-"`
	Idle   time.Duration `json:"-"`
}

// FaultSpec is the parsed -faults flag.
type FaultSpec struct {
	MapFraction float64       `json:"map,omitempty"`       // fraction of DMA map calls that fail
	MapNth      int           `json:"map_nth,omitempty"`   // the Nth map call fails
	HaltRate    float64       `json:"halt,omitempty"`      // per packet: the engine halts (random cause) and recovers
	HaltAt      int           `json:"haltat,omitempty"`    // each engine halts once per measured run (size, or --run_infinitely interval), at its Nth descriptor of it
	Cause       string        `json:"cause,omitempty"`     // HaltAt's halt cause, as sdma.HaltCause names it
	SinkFail    float64       `json:"sinkfail,omitempty"`  // fraction of deliveries the sink fails
	SinkStall   float64       `json:"sinkstall,omitempty"` // fraction of deliveries the sink stalls first
	Stall       time.Duration `json:"stall_ns,omitempty"`  // how long a stall lasts (with SinkStall)
	Seed        int64         `json:"seed,omitempty"`      // seed for the fraction generators
}

// Defaults and limits of the -faults keys.
const (
	defaultStall = time.Millisecond
	maxStall     = time.Second
	defaultCause = sdma.CauseHalt
)

// Any reports whether any fault is asked for.
func (f FaultSpec) Any() bool {
	return f.MapFraction > 0 || f.MapNth > 0 || f.SinkFail > 0 || f.SinkStall > 0 || f.InjectsHalts()
}

// InjectsHalts reports whether engine halts are asked for (halt or haltat): every halt cause
// the run shows then is an injected one.
func (f FaultSpec) InjectsHalts() bool { return f.HaltRate > 0 || f.HaltAt > 0 }

// haltCause is the cause of the haltat halt.
func (f FaultSpec) haltCause() sdma.HaltCause {
	if c, ok := haltCauseByName(f.Cause); ok {
		return c
	}
	return defaultCause
}

// haltCauseNames lists the names of the halt causes a halt can be injected with, as
// sdma.HaltCause's String gives them (CauseNone excluded).
func haltCauseNames() []string {
	names := make([]string, 0, sdma.NumHaltCauses-1)
	for c := sdma.CauseNone + 1; c < sdma.NumHaltCauses; c++ {
		names = append(names, c.String())
	}
	return names
}

// haltCauseByName finds the halt cause named name: sdma's name, in any case, with "-" or "_"
// allowed for each space (so that it needs no quoting in a shell).
func haltCauseByName(name string) (sdma.HaltCause, bool) {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("-", " ", "_", " ").Replace(strings.TrimSpace(s)))
	}
	n := norm(name)
	for c := sdma.CauseNone + 1; c < sdma.NumHaltCauses; c++ {
		if norm(c.String()) == n {
			return c, true
		}
	}
	return sdma.CauseNone, false
}

// String formats the spec as the flag takes it.
func (f FaultSpec) String() string {
	var parts []string
	rate := func(k string, x float64) {
		if x > 0 {
			parts = append(parts, k+"="+strconv.FormatFloat(x, 'g', -1, 64))
		}
	}
	rate("map", f.MapFraction)
	if f.MapNth > 0 {
		parts = append(parts, "mapnth="+strconv.Itoa(f.MapNth))
	}
	rate("halt", f.HaltRate)
	if f.HaltAt > 0 {
		parts = append(parts, "haltat="+strconv.Itoa(f.HaltAt), "cause="+strings.ReplaceAll(f.haltCause().String(), " ", "-")) // the flag's spelling: no quoting
	}
	rate("sinkfail", f.SinkFail)
	rate("sinkstall", f.SinkStall)
	if f.SinkStall > 0 {
		parts = append(parts, "stall="+f.Stall.String())
	}
	if f.Seed != 0 {
		parts = append(parts, "seed="+strconv.FormatInt(f.Seed, 10))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// faultKeys is the -faults syntax, for the errors.
const faultKeys = "map=FRACTION, mapnth=N, halt=RATE, haltat=N, cause=NAME, sinkfail=RATE, sinkstall=RATE, stall=DURATION, seed=N"

// faultKey is one key of -faults: set parses its value into the spec.
type faultKey struct {
	key string
	set func(f *FaultSpec, v string) error
}

// rateKey parses a probability per packet into *field(f).
func rateKey(k string, field func(*FaultSpec) *float64) faultKey {
	return faultKey{k, func(f *FaultSpec, v string) error {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || !(x >= 0 && x <= 1) {
			return fmt.Errorf("-faults: %s=%s: want a probability per packet, 0 to 1", k, v)
		}
		*field(f) = x
		return nil
	}}
}

// ordinalKey parses a count from 1 into *field(f); what says what is counted.
func ordinalKey(k, what string, field func(*FaultSpec) *int) faultKey {
	return faultKey{k, func(f *FaultSpec, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("-faults: %s=%s: want the number (from 1) of %s", k, v, what)
		}
		*field(f) = n
		return nil
	}}
}

// faultTable is every -faults key.
var faultTable = []faultKey{
	{"map", func(f *FaultSpec, v string) error {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || !(x >= 0 && x <= 1) {
			return fmt.Errorf("-faults: map=%s: want a fraction of map calls to fail, 0 to 1", v)
		}
		f.MapFraction = x
		return nil
	}},
	ordinalKey("mapnth", "the map call that fails", func(f *FaultSpec) *int { return &f.MapNth }),
	rateKey("halt", func(f *FaultSpec) *float64 { return &f.HaltRate }),
	ordinalKey("haltat", "the descriptor to halt at", func(f *FaultSpec) *int { return &f.HaltAt }),
	{"cause", func(f *FaultSpec, v string) error {
		c, ok := haltCauseByName(v)
		if !ok {
			return fmt.Errorf("-faults: cause=%s: unknown halt cause; want one of: %s (a - or _ may stand for each space)",
				v, strings.Join(haltCauseNames(), ", "))
		}
		f.Cause = c.String()
		return nil
	}},
	rateKey("sinkfail", func(f *FaultSpec) *float64 { return &f.SinkFail }),
	rateKey("sinkstall", func(f *FaultSpec) *float64 { return &f.SinkStall }),
	{"stall", func(f *FaultSpec, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxStall {
			return fmt.Errorf("-faults: stall=%s: want a duration above 0 and at most %v, such as 1ms", v, maxStall)
		}
		f.Stall = d
		return nil
	}},
	{"seed", func(f *FaultSpec, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("-faults: seed=%s: want an integer", v)
		}
		f.Seed = n
		return nil
	}},
}

// parseFaults parses "map=0.01,mapnth=5,halt=0.001,haltat=100,cause=wrong-dword-count,
// sinkfail=0.01,sinkstall=0.001,stall=2ms,seed=7"; "" and "none" mean no faults. Stall defaults
// to defaultStall with sinkstall, and cause to defaultCause with haltat.
func parseFaults(s string) (FaultSpec, error) {
	var f FaultSpec
	if s == "" || s == "none" {
		return f, nil
	}
	given := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return f, fmt.Errorf("-faults: %q is not key=value (keys: %s)", kv, faultKeys)
		}
		i := slices.IndexFunc(faultTable, func(fk faultKey) bool { return fk.key == k })
		if i < 0 {
			return f, fmt.Errorf("-faults: unknown fault %q (known: %s)", k, faultKeys)
		}
		if given[k] {
			return f, fmt.Errorf("-faults: %s given twice: give each key once", k)
		}
		if err := faultTable[i].set(&f, v); err != nil {
			return f, err
		}
		given[k] = true
	}
	return f, faultDefaults(&f, given)
}

// faultDefaults checks the keys that qualify another (cause, stall) and fills their defaults.
func faultDefaults(f *FaultSpec, given map[string]bool) error {
	if given["cause"] && f.HaltAt == 0 {
		return fmt.Errorf("-faults: cause=%s applies to haltat=N only (halt=RATE picks its causes at random)", f.Cause)
	}
	if given["stall"] && f.SinkStall == 0 {
		return fmt.Errorf("-faults: stall=%v applies to sinkstall=RATE only", f.Stall)
	}
	if f.HaltAt > 0 && !given["cause"] {
		f.Cause = defaultCause.String()
	}
	if f.SinkStall > 0 && !given["stall"] {
		f.Stall = defaultStall
	}
	return nil
}

// faultsUsage is the -faults help: every key with its default.
func faultsUsage() string {
	return "fault injection, a comma-separated `list` of key=value, given once (none: no faults). " +
		"map=FRACTION: that fraction of DMA map calls fail (default 0); " +
		"mapnth=N: the Nth map call fails (default: none); " +
		"halt=RATE: per packet, the engine halts with a random cause and recovers (default 0); " +
		"haltat=N: each engine halts once in each measured run (each size, and with --run_infinitely each -D interval: every row alike), at the first packet that starts at or after the Nth descriptor it reads in that run (after the warm-up), and recovers (default: none); " +
		"cause=NAME: haltat's halt cause, one of " + strings.Join(haltCauseNames(), ", ") + " (default " + defaultCause.String() + "; a - or _ may stand for each space); " +
		"sinkfail=RATE: that fraction of deliveries fail (default 0); " +
		"sinkstall=RATE: that fraction of deliveries stall before delivering (default 0); " +
		"stall=DURATION: how long a sinkstall stall lasts, up to " + maxStall.String() + " (default " + defaultStall.String() + "); " +
		"seed=N: seeds the map, halt, sinkfail and sinkstall draws (default 0)"
}

// errHelp is returned by parseConfig for -h: usage was printed, exit 0.
var errHelp = flag.ErrHelp

// usageError is a bad flag or an impossible combination: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// choice checks that v is one of the allowed values; the error names the flag as the user typed
// it (typed).
func choice(typed, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return usagef("%s %q: want one of %s", typed, v, strings.Join(allowed, ", "))
}

// typed is how the user spelled flag name: "--name" if its last occurrence on the command line
// had two dashes (perftest's long options: --output=bandwidth), else "-name".
func (r rawFlags) typed(name string) string {
	if r.long[name] {
		return "--" + name
	}
	return "-" + name
}

// longFlags returns the flags of args (parsed by fs) whose last occurrence was typed with two
// dashes, scanning args as fs.Parse does: flags up to "--" or the first argument that is not one,
// a flag's value the next argument unless it is a boolean flag or came after "=".
func longFlags(fs *flag.FlagSet, args []string) map[string]bool {
	long := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			break
		}
		name := strings.TrimPrefix(a[1:], "-")
		name, _, hasValue := strings.Cut(name, "=")
		long[name] = strings.HasPrefix(a, "--")
		f := fs.Lookup(name)
		if f == nil || hasValue {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			i++ // the value
		}
	}
	return long
}

// newFlagSet declares every flag into cfg's fields. raw receives the flags that need parsing
// after flag.Parse.
type rawFlags struct {
	mode, faults string
	faultsGiven  int             // how many -faults flags: a second would replace the first's keys
	long         map[string]bool // flags typed with two dashes (--output): see typed
	size         int
	sweep        bool
	qps          int      // -q: perftest's queue pairs
	notApplied   []string // perftest flags given that do not apply, by name ("d")
}

// countedString is a string flag that counts how often it was given.
type countedString struct {
	s *string
	n *int
}

func (c countedString) String() string {
	if c.s == nil {
		return ""
	}
	return *c.s
}

func (c countedString) Set(v string) error { *c.s = v; *c.n++; return nil }

// seconds is -D: a bare number is seconds, as perftest's -D; a Go duration (500ms) works too.
type seconds time.Duration

func (s *seconds) String() string { return time.Duration(*s).String() }

func (s *seconds) Set(v string) error {
	if x, err := strconv.ParseFloat(v, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		// NaN, the infinities and anything past ±292 years do not fit a time.Duration: the
		// conversion would wrap to a value nobody typed.
		ns := x * float64(time.Second)
		if err != nil || math.IsNaN(ns) || ns >= math.MaxInt64 || ns <= math.MinInt64 {
			return errors.New("want seconds (5) or a duration (500ms), at most 292 years")
		}
		if x > 0 && ns < 1 { // would truncate to 0s, a value nobody typed
			return errors.New("want seconds (5) or a duration (500ms), at least 1ns")
		}
		*s = seconds(ns)
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("want seconds (5) or a duration (500ms)")
	}
	*s = seconds(d)
	return nil
}

// aliases are perftest's spellings of sdmaperf's flags, shown in -h next to ours.
var aliases = []struct{ alias, flag string }{
	{"s", "size"},
	{"a", "sweep"},
	{"t", "depth"},
}

// notApplicable are perftest flags that have no meaning here: given, they get one line on
// stderr and are ignored.
var notApplicable = []struct {
	name    string
	isValue bool // takes a value (-d mlx5_0), or is a switch (-F)
	why     string
}{
	{"d", true, "an RDMA device; sdmaperf drives the software SDMA engine"},
	{"i", true, "an IB port; there is no port"},
	{"x", true, "a GID index; there is no GID"},
	{"c", true, "a connection type; SDMA sends packets, with no QP"},
	{"m", true, "the MTU; a packet is one SDMA packet of -size bytes"},
	{"I", true, "inline data; SDMA has no inline send"},
	{"u", true, "a QP timeout; there is no QP"},
	{"S", true, "a service level; there is no fabric"},
	{"F", false, "the CPU frequency check; figures are quoted as ratios"},
	{"R", false, "rdma_cm; there is no connection to set up"},
	{"z", false, "rdma_cm; there is no connection to set up"},
}

// naFlag records a not-applicable perftest flag when given.
type naFlag struct {
	name    string
	isValue bool
	raw     *rawFlags
}

func (f *naFlag) String() string { return "" }
func (f *naFlag) Set(string) error {
	f.raw.notApplied = append(f.raw.notApplied, f.name)
	return nil
}
func (f *naFlag) IsBoolFlag() bool { return !f.isValue }

// spell is flag name as the command line gave it: "-s" for -size given as -s, "--t" for -depth
// given as --t, so that an error names the flag the user typed. (An alias and its flag both
// given are refused before any check, so a set alias is the spelling.)
func spell(raw rawFlags, set flagSet, name string) string {
	for _, a := range aliases {
		if a.flag == name && set[a.alias] {
			return raw.typed(a.alias)
		}
	}
	return raw.typed(name)
}

// aliasOf returns the flag name alias stands for, or "".
func aliasOf(alias string) string {
	for _, a := range aliases {
		if a.alias == alias {
			return a.flag
		}
	}
	return ""
}

// aliasesFor lists perftest's spellings of flag name, for -h.
func aliasesFor(name string) []string {
	var out []string
	for _, a := range aliases {
		if a.flag == name {
			out = append(out, "-"+a.alias)
		}
	}
	if name == "producers" {
		out = append(out, "-q (which also sets -engines)")
	}
	return out
}

// isPerftestOnly reports whether a flag name is an alias or a not-applicable perftest flag
// (not listed on its own in -h).
func isPerftestOnly(name string) bool {
	if aliasOf(name) != "" || name == "q" {
		return true
	}
	for _, na := range notApplicable {
		if na.name == name {
			return true
		}
	}
	return false
}

func newFlagSet(cfg *Config, raw *rawFlags, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sdmaperf", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&raw.mode, "mode", "bw", "what to measure: bw (bandwidth, like ib_send_bw), lat (latency, one packet in flight per producer, like ib_send_lat) or msg (whole messages of -size bytes through a usdma packet queue, split into -mtu packets, -depth messages in flight)")
	fs.IntVar(&cfg.MTU, "mtu", defaultMTU, "-mode msg: the packets' payload (fragment size), a multiple of 64 up to 10240")
	pathFlag(fs, cfg)
	fs.IntVar(&cfg.Engines, "engines", 1, fmt.Sprintf("SDMA engines, 1..%d and at most -producers (producers go round-robin over the engines, one engine each)", maxEngines))
	fs.IntVar(&cfg.Producers, "producers", 1, "producer goroutines, spread round-robin over the engines")
	fs.IntVar(&raw.size, "size", 4096, fmt.Sprintf("packet size in bytes, 1..%d; with -sweep, the largest size (%d unless given)", maxPacket, maxSweepSize))
	fs.BoolVar(&raw.sweep, "sweep", false, fmt.Sprintf("run every power of two from %d bytes up to -size (like perftest -a)", minSweepSize))
	fs.IntVar(&cfg.Frags, "frags", 2, fmt.Sprintf("fragments per packet: each is one Add call and one descriptor, 1..%d (past 63 the library coalesces)", maxFrags))
	fs.StringVar(&cfg.Mem, "mem", "kvaddr", "how fragments are added: kvaddr (AddKVAddr of a Go buffer, mapped per add), page (AddPage of dma.AllocPages memory, mapped per add) or registered (AddKVAddr of a Go buffer registered with the device once: no per-packet mapping)")
	fs.BoolVar(&cfg.Shared, "shared", false, "every packet of a producer maps the same payload memory: many overlapping live mappings of one buffer, as perftest posts one buffer (-mode bw with -depth 2 or more: with one packet in flight the buffer is one anyway)")
	fs.IntVar(&cfg.Iterations, "n", 0, fmt.Sprintf("packets per size, over all producers (with -q: per queue pair, as perftest's), at most %d in all; 0: run for -D instead", maxPackets))
	cfg.Duration = 2 * time.Second
	fs.Var((*seconds)(&cfg.Duration), "D", fmt.Sprintf("run time per size when -n is 0, in `seconds` as perftest (-D 5) or a Go duration (-D 500ms) (%v per size with -sweep unless given)", defaultSweepD))
	fs.IntVar(&cfg.Warmup, "warmup", 100, fmt.Sprintf("packets (-mode msg: messages) per producer sent before measuring each size, unmeasured; at most %d over all producers, as -n with -q", maxPackets))
	fs.IntVar(&cfg.Depth, "depth", 128, "packets in flight per producer in bw mode (like perftest -t), each with its own payload memory; lat mode uses 1")
	fs.IntVar(&cfg.Ring, "ring", 2048, fmt.Sprintf("descriptors per engine ring, a power of two, %d..%d", ring.MinSize, ring.MaxSize))
	fs.StringVar(&cfg.Mapper, "mapper", "direct", "DMA mapper: direct (identity, like ipath's) or iommu (software IOMMU with its own IOVA space)")
	fs.StringVar(&cfg.Alloc, "alloc", "slab", "txreq allocator: slab, list (fixed, lock-free) or pool (sync.Pool-backed)")
	fs.StringVar(&cfg.Wait, "wait", "spin-park", "how an idle engine's hardware goroutine waits: spin-park (spin, then park), busy-poll (never park: a core per engine) or park")
	fs.StringVar(&cfg.Send, "send", "block", "what a producer does when the ring is full: block (SendWait: park on the engine's wait list, the iowait protocol), sleep (the kernel's verbs sleeper: Send with the producer's IOWait, whose sleep is ParkOrRetry (hfi1: qp.c iowait_sleep); the packet parks on the iowait's TxHead and is resent after the wakeup) or spin (retry Send at once); sleep and spin need a ring that can fill: more descriptors in flight per engine (-depth × descriptors per packet × producers per engine) than -ring holds")
	fs.StringVar(&cfg.Completion, "completion", "irq", "who runs the completion pass: irq (the engine, on the interrupts it raises) or poll (the producers, with Engine.Poll; not -mode msg, whose packet queue sleeps in Submit on a full ring)")
	fs.StringVar(&cfg.Sink, "sink", "discard", "where packets go: discard (count and drop) or udp (one loopback UDP datagram per packet, gather I/O: sendmmsg batches, see -udp-batch)")
	fs.StringVar(&cfg.UDPAddr, "udp-addr", "", fmt.Sprintf("loopback address of the UDP receiver; with -sink udp, empty runs a receiver in-process; with -server, empty means %s", defaultUDP))
	fs.IntVar(&cfg.UDPBatch, "udp-batch", 0, fmt.Sprintf("with -sink udp, the packets an engine holds and sends with one sendmmsg, 1..%d; 0 means %d; 1 sends each with its own sendmsg (the unbatched sink)", sdma.MaxBatch, udpsink.DefaultBatch))
	fs.BoolVar(&cfg.UDPGSO, "udp-gso", false, "with -sink udp, send each run of same-size packets in a batch as one UDP GSO message (UDP_SEGMENT); needs batching (not -udp-batch 1) and two or more packets in flight per engine (not -mode lat with no more producers than engines)")
	raw.faults = "none"
	fs.Var(countedString{&raw.faults, &raw.faultsGiven}, "faults", faultsUsage())
	fs.BoolVar(&cfg.JSON, "json", false, "print the results as one JSON object instead of tables, with the host, the build and the flags as given; bandwidths in MiB/s (bw_peak_mib_s, bw_avg_mib_s, bw_stdev_mib_s), and with --report_gbits also in Gb/s (the same names with _gbit_s); with -server, the host and the receiver's report (receiver), or a -sweep's rows (sizes)")
	fs.BoolVar(&cfg.CSV, "csv", false, "print the results as CSV: one header row, then one row per size")
	fs.StringVar(&cfg.Output, "output", "", "print one number per size for scripts: bandwidth (average, MiB/s or Gb/s) or message_rate (Mpps) in -mode bw and msg, latency (median, us) in -mode lat (perftest --output, which pairs them with the test alike)")
	fs.BoolVar(&cfg.ReportGbits, "report_gbits", false, "report bandwidth in Gb/s instead of MiB/s (perftest --report_gbits): the tables' (-mode lat's bandwidth table too), -csv's, --output=bandwidth's and the -plot of a -mode bw or msg sweep; -json adds bw_peak_gbit_s, bw_avg_gbit_s and bw_stdev_gbit_s beside its _mib_s fields; refused with an output that has no bandwidth (--output=latency or message_rate, -H)")
	fs.BoolVar(&cfg.RunInfinitely, "run_infinitely", false, "measure -D intervals one after another, printing a row for each, until Ctrl-C (perftest --run_infinitely)")
	fs.BoolVar(&cfg.Histogram, "H", false, "print the latency histogram, in HdrHistogram's percentile distribution format (perftest -H)")
	fs.StringVar(&cfg.HistFile, "hist", "", "write the latency histogram to this file, in HdrHistogram's percentile distribution format (HdrHistogram's plotters read it)")
	fs.StringVar(&cfg.Plot, "plot", "", "draw what the run measured to this file (.svg, .png or .html): bandwidth and message rate against size for a sweep (-mode lat: the median and 99th percentile latency against size), the latency distribution otherwise")
	fs.StringVar(&cfg.HTTP, "http", "", "serve /debug/vars (expvar, with the engines' counters) and /debug/pprof/ on this address during the run, such as localhost:6060")
	fs.BoolVar(&cfg.Progress, "progress", true, "show a live progress line on stderr on long runs (only when stderr is a terminal)")
	fs.BoolVar(&cfg.Server, "server", false, "run the UDP receiver: check sequence numbers and checksums, report loss, stop after -idle or the client's end-of-run marker. A run superseded by a new one (the client restarted) is reported as it stands, with a warning, and the new run is served (a sweep starts again at its first size; a sweep's size superseded by the same sweep's next size lost its end markers on the way: its row is kept, marked not ended). End markers alone, of a run none of whose packets arrived, followed by another run are an earlier run's, resent (its client restarted): noted and not counted")
	cfg.Idle = 5 * time.Second
	fs.Var((*seconds)(&cfg.Idle), "idle", "with -server: stop after this long without a packet, in `seconds` (-idle 5) or a Go duration (-idle 500ms), as -D; 0 waits without limit, but for the wait of at most 5 s after a run of which only end markers arrived, for the run that may follow them")
	fs.IntVar(&raw.qps, "q", 0, "perftest's queue pairs: -q N is -producers N over min(N, 16) engines unless -engines is given, and -n counts per queue pair, as perftest's does; also in -mode lat, an extension (perftest's latency tests exit: \"Multiple QPs only available on bw tests\"): N producers, each with one packet in flight, its own latencies in the one histogram")
	for _, a := range aliases {
		fs.Var(fs.Lookup(a.flag).Value, a.alias, "perftest's spelling of -"+a.flag)
	}
	for _, na := range notApplicable {
		fs.Var(&naFlag{na.name, na.isValue, raw}, na.name, "not applicable: "+na.why)
	}
	fs.Usage = func() {} // parseConfig prints usage for -h itself
	return fs
}

// usage prints the synopsis and every flag with its default, zero defaults included (the
// standard PrintDefaults leaves those out).
func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `sdmaperf measures gosdma's send-DMA path, like perftest's ib_send_bw/ib_send_lat.

Usage:
  sdmaperf [flags]                      bandwidth run on the software engine
  sdmaperf -mode lat                    latency run
  sdmaperf -sweep -n 100000             all power-of-two sizes
  sdmaperf -sink udp                    send over loopback UDP to an in-process receiver
  sdmaperf -server &                    a receiver in another process...
  sdmaperf -sink udp -udp-addr 127.0.0.1:18515   ...and its client

Flags:
`)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	var na []string
	for _, n := range names {
		if isPerftestOnly(n) {
			if aliasOf(n) == "" && n != "q" {
				na = append(na, "-"+n)
			}
			continue
		}
		f := fs.Lookup(n)
		typ, help := flag.UnquoteUsage(f)
		if a := aliasesFor(n); len(a) > 0 {
			help += "; perftest: " + strings.Join(a, ", ")
		}
		line := "  -" + f.Name
		if typ != "" {
			line += " " + typ
		}
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "%s\n    \t%s (default %s)\n", line, help, def)
	}
	fmt.Fprintf(w, "\nperftest flags that do not apply here are accepted with a one-line notice and ignored: %s\n", strings.Join(na, " "))
}

// parseConfig parses args into a validated Config. It returns errHelp after printing usage for
// -h, and a *usageError for a bad flag or combination.
func parseConfig(args []string, stderr io.Writer) (Config, error) {
	var cfg Config
	var raw rawFlags
	fs := newFlagSet(&cfg, &raw, io.Discard) // errors are returned, not printed with usage
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			usage(fs)
			return cfg, errHelp
		}
		return cfg, usagef("%v (sdmaperf -h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return cfg, usagef("unexpected argument %q: sdmaperf takes flags only", fs.Arg(0))
	}
	raw.long = longFlags(fs, args)
	set, given := flagSet{}, map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		if a := aliasOf(f.Name); a != "" {
			set[a] = true
		}
		set[f.Name], given[f.Name] = true, true
	})
	for _, a := range aliases { // one value under two names: the last would win without a word
		if given[a.alias] && given[a.flag] {
			return cfg, usagef("-%s and -%s both given: -%s is perftest's spelling of -%s", a.alias, a.flag, a.alias, a.flag)
		}
	}
	for _, n := range raw.notApplied {
		fmt.Fprintf(stderr, "sdmaperf: not applicable: %s (%s); ignored\n", raw.typed(n), notApplicableWhy(n))
	}

	if raw.faultsGiven > 1 { // the last would win without a word, dropping the others' faults
		return cfg, usagef("-faults given twice: give one comma-separated list, such as -faults halt=0.001,map=0.01")
	}

	cfg.Args = slices.Clone(args)
	cfg.Mode = Mode(raw.mode)
	var err error
	if cfg.Faults, err = parseFaults(raw.faults); err != nil {
		// Each of parseFaults' errors begins "-faults": name it as typed (--faults).
		return cfg, &usageError{strings.Replace(err.Error(), "-faults", raw.typed("faults"), 1)}
	}
	if err := validate(&cfg, raw, set); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// flagSet is what validation knows of the command line: which flags were given.
type flagSet map[string]bool

// check is one step of the client's validation: it checks one flag or combination and may fill
// derived fields. validate runs clientChecks in order; a new flag adds a row or a step.
type check func(cfg *Config, raw rawFlags, set flagSet) error

// clientChecks is the client's validation, in order: later steps rely on the fields earlier
// ones fill (Sizes, Depth).
var clientChecks = []check{
	checkNoServerFlags,
	checkQPs,
	checkChoices,
	checkRanges,
	checkIdleEngines,
	checkSizes,
	checkMsg,
	checkPageMem,
	checkLength,
	checkDepth,
	checkSharedDepth,
	checkRing,
	checkSendFills,
	checkSink,
	checkLoneUDP,
	checkFaults,
	checkMsgFaults,
	checkOutputs,
	checkReportGbits,
	checkPath,
	checkPathOutputs,
}

// notApplicableWhy says why perftest's flag name does not apply.
func notApplicableWhy(name string) string {
	for _, na := range notApplicable {
		if na.name == name {
			return na.why
		}
	}
	return ""
}

// validate checks each flag and the combinations, and fills the derived fields.
func validate(cfg *Config, raw rawFlags, set flagSet) error {
	if cfg.Server {
		return validateServer(cfg, raw, set)
	}
	for _, c := range clientChecks {
		if err := c(cfg, raw, set); err != nil {
			return err
		}
	}
	return nil
}

// serverFlags are the flags -server takes.
var serverFlags = []string{"server", "udp-addr", "idle", "json", "http", "sweep", "a", "size", "s", "frags"}

// serverOnly lists the flags that apply to -server only (the client refuses them).
var serverOnly = []string{"idle"}

// validateServer checks -server's flags: only the receiver's make sense.
func validateServer(cfg *Config, raw rawFlags, set flagSet) error {
	// In name order, each as typed (-t, not the -depth it sets): a map's order would name a
	// different flag from run to run. perftest's flags that do not apply had their notice and are
	// ignored, here as in a client.
	names := slices.Sorted(maps.Keys(set))
	for _, n := range names {
		if !slices.Contains(serverFlags, n) && spell(raw, set, n) == raw.typed(n) && notApplicableWhy(n) == "" {
			return usagef("%s does not apply to -server (the receiver takes -udp-addr, -idle, -json, -http, and the client's -sweep, -size and -frags to expect a run per size)", raw.typed(n))
		}
	}
	if cfg.Frags < 1 || cfg.Frags > maxFrags { // checkSizes derives the sweep's first size from it
		return usagef("-frags %d: want 1..%d", cfg.Frags, maxFrags)
	}
	if err := checkSizes(cfg, raw, set); err != nil {
		return err
	}
	if cfg.UDPAddr == "" {
		cfg.UDPAddr = defaultUDP
	}
	if cfg.Idle < 0 {
		return usagef("-idle %v: want a duration, or 0 to wait for the client indefinitely", cfg.Idle)
	}
	if _, err := udpsink.ResolveLoopback(cfg.UDPAddr); err != nil {
		return usagef("-udp-addr: %v", err)
	}
	return checkHTTP(cfg.HTTP)
}

func checkNoServerFlags(_ *Config, raw rawFlags, set flagSet) error {
	for _, n := range serverOnly {
		if set[n] {
			return usagef("%s applies to -server only", raw.typed(n))
		}
	}
	return nil
}

// choices are the flags that take one of a list of words.
var choices = []struct {
	name    string
	field   func(*Config) string
	allowed []string
}{
	{"mode", func(c *Config) string { return string(c.Mode) }, []string{string(ModeBW), string(ModeLat), string(ModeMsg)}},
	{"mem", func(c *Config) string { return c.Mem }, []string{"kvaddr", "page", "registered"}},
	{"mapper", func(c *Config) string { return c.Mapper }, []string{"direct", "iommu"}},
	{"alloc", func(c *Config) string { return c.Alloc }, []string{"slab", "list", "pool"}},
	{"wait", func(c *Config) string { return c.Wait }, []string{"spin-park", "busy-poll", "park"}},
	{"send", func(c *Config) string { return c.Send }, []string{"block", "sleep", "spin"}},
	{"completion", func(c *Config) string { return c.Completion }, []string{"irq", "poll"}},
	{"sink", func(c *Config) string { return c.Sink }, []string{"discard", "udp"}},
}

func checkChoices(cfg *Config, raw rawFlags, _ flagSet) error {
	for _, c := range choices {
		if err := choice(raw.typed(c.name), c.field(cfg), c.allowed...); err != nil {
			return err
		}
	}
	return nil
}

// ranges are the integer flags with simple bounds (those whose bounds depend on other flags
// have steps of their own).
var ranges = []struct {
	name   string
	field  func(*Config) int
	lo, hi int
}{
	{"engines", func(c *Config) int { return c.Engines }, 1, maxEngines},
	{"producers", func(c *Config) int { return c.Producers }, 1, maxProducers},
	{"frags", func(c *Config) int { return c.Frags }, 1, maxFrags},
}

func checkRanges(cfg *Config, _ rawFlags, set flagSet) error {
	for _, r := range ranges {
		if v := r.field(cfg); v < r.lo || v > r.hi {
			return usagef("-%s %d: want %d..%d", r.name, v, r.lo, r.hi)
		}
	}
	if cfg.Warmup < 0 {
		return usagef("-warmup %d: want 0 or more packets", cfg.Warmup)
	}
	// The warm-up is unmeasured and precedes every size: its packets over all producers are
	// held to maxPackets, the ceiling -n has with -q, so that it cannot go on for ever
	// (-warmup 9e18 was taken: some 146000 years at 2 Mpps, before a first measured packet).
	if cfg.Warmup > maxPackets/cfg.Producers {
		return usagef("-warmup %d with %s %d: %d warm-up packets per size in all; want at most %d (as -n with -q), so 0..%d per producer",
			cfg.Warmup, spellProducers(set), cfg.Producers, uint64(cfg.Warmup)*uint64(cfg.Producers), maxPackets, maxPackets/cfg.Producers)
	}
	return nil
}

// spellProducers is the flag that set the producers as the command line gave it: -q or -producers.
func spellProducers(set flagSet) string {
	if set["q"] {
		return "-q"
	}
	return "-producers"
}

// checkSizes fills Sizes: -size, or the powers of two of -sweep.
func checkSizes(cfg *Config, raw rawFlags, set flagSet) error {
	size := raw.size
	if raw.sweep && !set["size"] {
		size = maxSweepSize
	}
	if hi := maxSizeFor(cfg.Mode); size < 1 || size > hi {
		return usagef("%s %d: want 1..%d bytes (an SDMA packet is at most %d; a -mode msg message %d)", spell(raw, set, "size"), size, hi, maxPacket, maxMessage)
	}
	frags := cfg.Frags
	if cfg.Mode == ModeMsg {
		frags = 1 // a message is one data vector: -frags does not apply (checkMsg)
	}
	if !raw.sweep {
		if frags > size {
			return usagef("-frags %d with %s %d: a fragment is at least one byte", cfg.Frags, spell(raw, set, "size"), size)
		}
		cfg.Sizes = []int{size}
		return nil
	}
	lo := max(minSweepSize, 1<<bits.Len(uint(frags-1))) // every fragment at least a byte
	if size < lo {
		return usagef("%s %s %d: the sweep starts at %d bytes (%d fragments of at least one byte); raise %[2]s", spell(raw, set, "sweep"), spell(raw, set, "size"), size, lo, cfg.Frags)
	}
	for s := lo; s <= size; s *= 2 {
		cfg.Sizes = append(cfg.Sizes, s)
	}
	return nil
}

// largest is the largest packet size of the run.
func (c *Config) largest() int { return c.Sizes[len(c.Sizes)-1] }

func checkPageMem(cfg *Config, _ rawFlags, _ flagSet) error {
	if big := cfg.largest(); cfg.Mem == "page" && cfg.Frags*dma.PageSize < big {
		return usagef("-mem page puts each fragment in its own %d-byte page: %d bytes need -frags %d or more", dma.PageSize, big, (big+dma.PageSize-1)/dma.PageSize)
	}
	return nil
}

// checkLength checks the length of each size's run: -n packets or -D time.
func checkLength(cfg *Config, raw rawFlags, set flagSet) error {
	if cfg.Iterations < 0 {
		return usagef("-n %d: want a positive packet count, or 0 to run for -D", cfg.Iterations)
	}
	if cfg.Iterations > 0 {
		if set["D"] {
			return usagef("-n and -D both given: a run is either a packet count or a duration")
		}
		cfg.Duration = 0
		// The same ceiling as -n with -q (checkQPs, which has multiplied it already) and
		// -warmup: -n 9000000000 was taken, some 140 years at 2 Mpps.
		if cfg.Iterations > maxPackets {
			return usagef("-n %d: want at most %d packets per size over all producers (as -n with -q and -warmup)", cfg.Iterations, maxPackets)
		}
		if cfg.Iterations < cfg.Producers {
			return usagef("-n %d with -producers %d: every producer needs at least one packet", cfg.Iterations, cfg.Producers)
		}
		return nil
	}
	if raw.sweep && !set["D"] {
		cfg.Duration = defaultSweepD
	}
	if cfg.Duration <= 0 {
		return usagef("-D %v: want a positive duration", cfg.Duration)
	}
	return nil
}

// checkDepth checks the packets in flight and the payload memory they need.
func checkDepth(cfg *Config, raw rawFlags, set flagSet) error {
	if cfg.Mode == ModeLat {
		if set["depth"] && cfg.Depth != 1 {
			return usagef("%[1]s lat sends one packet at a time per producer; %[2]s %[3]d applies to %[1]s bw", raw.typed("mode"), spell(raw, set, "depth"), cfg.Depth)
		}
		cfg.Depth = 1
	}
	if cfg.Depth < 1 || cfg.Depth > maxDepth {
		return usagef("%s %d: want 1..%d packets in flight per producer", spell(raw, set, "depth"), cfg.Depth, maxDepth)
	}
	// Every packet in flight has payload memory of its own: producers × depth slots.
	slot := cfg.largest()
	if cfg.Mem == "page" {
		slot = cfg.Frags * dma.PageSize
	}
	if cfg.Shared {
		slot = 0
	}
	if mem := int64(cfg.Producers) * int64(cfg.Depth) * int64(slot); mem > maxPayloadMem {
		return usagef("-producers %d × -depth %d × %d bytes = %d MiB of payload memory; the limit is %d MiB",
			cfg.Producers, cfg.Depth, slot, mem>>20, maxPayloadMem>>20)
	}
	return nil
}

func checkRing(cfg *Config, _ rawFlags, _ flagSet) error {
	if cfg.Ring < ring.MinSize || cfg.Ring > ring.MaxSize || cfg.Ring&(cfg.Ring-1) != 0 {
		return usagef("-ring %d: want a power of two, %d..%d", cfg.Ring, ring.MinSize, ring.MaxSize)
	}
	// A packet needs its fragments plus a pad descriptor (and coalesces past 63); it must fit
	// in the ring with room to spare, or Send can never succeed.
	if need := min(cfg.Frags, 63) + 1; need > cfg.Ring-1 {
		return usagef("-frags %d needs %d descriptors per packet; -ring %d holds %d", cfg.Frags, need, cfg.Ring, cfg.Ring-1)
	}
	return nil
}

func checkSink(cfg *Config, _ rawFlags, set flagSet) error {
	for _, f := range []string{"udp-addr", "udp-batch", "udp-gso"} {
		if cfg.Sink != "udp" && set[f] {
			return usagef("-%s needs -sink udp", f)
		}
	}
	if cfg.UDPBatch < 0 || cfg.UDPBatch > sdma.MaxBatch {
		return usagef("-udp-batch %d: want 1..%d, or 0 for the default", cfg.UDPBatch, sdma.MaxBatch)
	}
	if cfg.UDPGSO && cfg.UDPBatch == 1 {
		return usagef("-udp-gso with -udp-batch 1: GSO needs batching (-udp-batch 0 or 2..%d); -udp-batch 1 sends each packet with its own sendmsg", sdma.MaxBatch)
	}
	if cfg.Sink == "udp" && cfg.UDPAddr != "" {
		ua, err := udpsink.ResolveLoopback(cfg.UDPAddr)
		if err != nil {
			return usagef("-udp-addr: %v", err)
		}
		if ua.Port == 0 { // a -server binds a free port for :0; a client cannot send to one
			return usagef("-udp-addr %s: port 0; give the receiver's port (a -server prints it: \"receiving on ADDR\"), or no -udp-addr for an in-process receiver", cfg.UDPAddr)
		}
	}
	return nil
}

func checkFaults(cfg *Config, _ rawFlags, _ flagSet) error {
	if cfg.Faults.Seed != 0 && !cfg.Faults.Any() {
		return usagef("-faults seed=%d without a fault to seed", cfg.Faults.Seed)
	}
	// map and mapnth fail the DMA map calls of the adds; -mem registered adds from memory
	// registered once before the run, and a registration is not subject to injection
	// (dma.FaultInjector.Register): no map call would fail, and the run would report a clean
	// result for faults that were never injected.
	if f := cfg.Faults; cfg.Mem == "registered" && (f.MapFraction > 0 || f.MapNth > 0) {
		return usagef("-faults map=/mapnth= fail the DMA map call of each add; -mem registered adds from memory registered once, with no map call to fail: use -mem kvaddr or page")
	}
	return nil
}

// checkQPs applies perftest's -q: N producers (queue pairs) over up to 16 engines, and, as
// perftest counts -n per queue pair (tot_iters = iters * num_of_qps), -n packets each: N times -n
// in all (with -producers, sdmaperf's own spelling, -n is the total).
func checkQPs(cfg *Config, raw rawFlags, set flagSet) error {
	if !set["q"] {
		return nil
	}
	if set["producers"] {
		return usagef("-q and -producers both given: -q is perftest's spelling of -producers")
	}
	if raw.qps < 1 || raw.qps > maxProducers {
		return usagef("-q %d: want 1..%d queue pairs (producers)", raw.qps, maxProducers)
	}
	cfg.Producers = raw.qps
	if !set["engines"] {
		cfg.Engines = min(raw.qps, maxEngines)
	}
	if cfg.Iterations > 0 {
		if cfg.Iterations > maxPackets/raw.qps {
			return usagef("-n %d with -q %d: %d queue pairs of %d packets each is more than %d packets", cfg.Iterations, raw.qps, raw.qps, cfg.Iterations, maxPackets)
		}
		cfg.Iterations *= raw.qps
	}
	return nil
}

// outputChoices are --output's values.
var outputChoices = []string{outBandwidth, outMsgRate, outLatency}

// checkOutputMode checks --output against the kind of run, as perftest does: a bandwidth test
// (-mode bw, and -mode msg, which keeps -depth messages in flight) prints bandwidth or
// message_rate, a latency test (-mode lat) latency only; any other pairing is a usage error
// (perftest exits 1). perftest (linux-rdma/perftest, src/perftest_parameters.c) takes the three
// words in parser():
//
//	if (verbosity_output_flag) {
//		if (strcmp("bandwidth",optarg) == 0) { user_param->output = OUTPUT_BW;
//		} else if (strcmp("message_rate",optarg) == 0) { user_param->output = OUTPUT_MR;
//		} else if (strcmp("latency",optarg) == 0) { user_param->output = OUTPUT_LAT;
//		} else { fprintf(stderr, " Invalid verbosity level output flag. Please use bandwidth, latency, message_rate\n"); ...
//
// and pairs them with the test in force_dependecies():
//
//	if (user_param->tst == BW && !(user_param->output == OUTPUT_BW || user_param->output == OUTPUT_MR)) {
//		fprintf(stderr," Output verbosity level for BW can be: bandwidth, message_rate\n"); exit(1);
//	if (user_param->tst == LAT && !(user_param->output == OUTPUT_LAT)) {
//		fprintf(stderr," Output verbosity level for LAT can be: latency\n"); exit(1);
//
// (its latency-under-load test, LAT_BY_BW, takes latency only; sdmaperf has none). --output=latency
// prints the median (print_report_lat: the median as "latency"), as here.
func checkOutputMode(mode Mode, output string) error {
	switch {
	case mode == ModeLat && output != outLatency:
		return usagef("--output=%s: a latency run (-mode lat) prints %s only, as perftest's latency tests (%q takes -mode bw or msg)", output, outLatency, output)
	case mode != ModeLat && output == outLatency:
		return usagef("--output=%s: a bandwidth run (-mode %s) prints %s or %s, as perftest's bandwidth tests (%q takes -mode lat)", output, mode, outBandwidth, outMsgRate, output)
	}
	return nil
}

// plotFormats are -plot's file extensions.
var plotFormats = []string{".svg", ".png", ".html"}

// checkOutputs checks the output flags: one stdout format, the plot's file type, the run
// forever's shape, the -http address.
func checkOutputs(cfg *Config, raw rawFlags, set flagSet) error {
	n := 0
	for _, on := range []bool{cfg.JSON, cfg.CSV, cfg.Output != "", cfg.Histogram} {
		if on {
			n++
		}
	}
	if n > 1 {
		return usagef("-json, -csv, --output and -H each take stdout: give one")
	}
	if cfg.Output != "" {
		if err := choice(raw.typed("output"), cfg.Output, outputChoices...); err != nil {
			return err
		}
		if err := checkOutputMode(cfg.Mode, cfg.Output); err != nil {
			return err
		}
	}
	if cfg.Plot != "" && !slices.Contains(plotFormats, strings.ToLower(filepath.Ext(cfg.Plot))) {
		return usagef("-plot %s: want a file name ending in %s", cfg.Plot, strings.Join(plotFormats, ", "))
	}
	for _, f := range []struct{ flag, path string }{{"hist", cfg.HistFile}, {"plot", cfg.Plot}} {
		if set[f.flag] && f.path == "" { // given, and empty: it would write nothing without a word
			return usagef("-%s \"\": want a file name", f.flag)
		}
		if err := checkOutFile(f.flag, f.path); err != nil {
			return err
		}
	}
	if cfg.Plot != "" && cfg.HistFile != "" && filepath.Clean(cfg.Plot) == filepath.Clean(cfg.HistFile) {
		return usagef("-plot and -hist both name %s: the plot would overwrite the histogram; give two files", cfg.Plot)
	}
	if cfg.RunInfinitely && (cfg.Iterations > 0 || len(cfg.Sizes) > 1) {
		return usagef("--run_infinitely measures one size for -D intervals: it takes neither -n nor -sweep")
	}
	// perftest_parameters.c, force_dependecies(): "run_infinitely exists only in BW tests for now."
	if cfg.RunInfinitely && cfg.Mode == ModeLat {
		return usagef("--run_infinitely exists only in bandwidth runs (-mode bw, msg), as in perftest; -mode lat measures -n or -D once")
	}
	if cfg.RunInfinitely && cfg.Duration < sampleInterval {
		return usagef("--run_infinitely -D %v: a row every -D; want at least %v, the bandwidth sampling interval (a shorter one measures next to nothing and prints thousands of rows a second)", cfg.Duration, sampleInterval)
	}
	return checkHTTP(cfg.HTTP)
}

// checkReportGbits refuses --report_gbits where no output it converts is printed. It converts
// the bandwidths of the text tables (in -mode lat too: sdmaperf's latency run prints a bandwidth
// table after its latency table), of -csv, of --output=bandwidth and of the -plot of a -mode bw
// or msg sweep. perftest (linux-rdma/perftest, src/perftest_parameters.c) lists --report_gbits in the usage of its BW
// tests only and its latency tests print no bandwidth: they take the flag and drop it. Here an
// output with no bandwidth in it (--output=latency or message_rate, -H) refuses it, naming both
// flags, as perftest's force_dependecies does for the flags a test cannot honour. -json keeps
// its MiB/s fields, named so (bw_avg_mib_s), and adds the Gb/s ones (bw_avg_gbit_s: writeJSON).
func checkReportGbits(cfg *Config, _ rawFlags, _ flagSet) error {
	if !cfg.ReportGbits {
		return nil
	}
	switch {
	case cfg.Output == outLatency || cfg.Output == outMsgRate:
		return usagef("--report_gbits with --output=%s: it prints no bandwidth for --report_gbits to convert (--output=bandwidth does)", cfg.Output)
	case cfg.Histogram:
		return usagef("--report_gbits with -H: -H prints the latency histogram alone, with no bandwidth for --report_gbits to convert")
	}
	return nil
}

// checkOutFile checks a file the run writes when it ends (-hist, -plot): its directory must
// exist and the path must not be one, so that a bad path is a usage error now rather than a
// failure after the whole run.
func checkOutFile(flag, path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usagef("-%s %s: a directory; want a file name", flag, path)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return usagef("-%s %s: no directory %s to write it in", flag, path, filepath.Dir(path))
	}
	return nil
}

// checkHTTP checks -http's address (client and -server): host:port, the port a number in
// 0..65535 or a service name, so that a bad one is a usage error, not a failure once the run
// starts.
func checkHTTP(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return usagef("-http %s: want host:port, such as localhost:6060", addr)
	}
	return nil
}
