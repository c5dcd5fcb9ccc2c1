package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

func TestDefaults(t *testing.T) {
	cfg, err := parseConfig(nil, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, Config{
		Mode: ModeBW, Engines: 1, Producers: 1, Sizes: []int{4096}, Frags: 2, Mem: "kvaddr",
		Duration: 2 * time.Second, Warmup: 100, Depth: 128, Ring: 2048, Mapper: "direct",
		Alloc: "slab", Wait: "spin-park", Send: "block", Completion: "irq", Sink: "discard", Progress: true,
		Idle: 5 * time.Second,
	}, cfg)
}

func TestHelpListsEveryFlagWithDefault(t *testing.T) {
	var out bytes.Buffer
	_, err := parseConfig([]string{"-h"}, &out)
	require.ErrorIs(t, err, errHelp)
	text := out.String()

	var cfg Config
	var raw rawFlags
	fs := newFlagSet(&cfg, &raw, new(bytes.Buffer))
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		if isPerftestOnly(f.Name) {
			return // listed beside ours (aliases) or in the not-applicable line
		}
		n++
		i := strings.Index(text, "\n  -"+f.Name+" ")
		if i < 0 {
			i = strings.Index(text, "\n  -"+f.Name+"\n")
		}
		require.GreaterOrEqual(t, i, 0, "-%s missing from usage", f.Name)
		entry := text[i+1:]
		if j := strings.Index(entry[1:], "\n  -"); j >= 0 {
			entry = entry[:j+1]
		}
		assert.Contains(t, entry, "(default ", "-%s shows no default", f.Name)
		assert.Contains(t, entry, f.DefValue, "-%s shows the wrong default", f.Name)
	})
	assert.Greater(t, n, 20)

	// -faults documents every key with its default, and names every halt cause.
	i := strings.Index(text, "\n  -faults ")
	require.GreaterOrEqual(t, i, 0)
	entry := text[i+1:]
	entry = entry[:strings.Index(entry[1:], "\n  -")+1]
	for _, k := range []string{"map=", "mapnth=", "halt=", "haltat=", "cause=", "sinkfail=", "sinkstall=", "stall=", "seed="} {
		j := strings.Index(entry, " "+k)
		require.GreaterOrEqual(t, j, 0, "-faults help lacks %s", k)
		rest := entry[j:]
		if end := strings.Index(rest, ";"); end >= 0 {
			rest = rest[:end]
		}
		assert.Contains(t, rest, "(default", "-faults %s shows no default", k)
	}
	assert.Contains(t, entry, "(default explicit halt;")
	assert.Contains(t, entry, "(default 1ms)")
	for _, c := range haltCauseNames() {
		assert.Contains(t, entry, c)
	}
}

func TestSweepSizes(t *testing.T) {
	cfg, err := parseConfig([]string{"-sweep"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, []int{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}, cfg.Sizes)
	assert.Equal(t, defaultSweepD, cfg.Duration)

	cfg, err = parseConfig([]string{"-sweep", "-size", "100", "-frags", "20", "-n", "1000"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, []int{32, 64}, cfg.Sizes)
	assert.Equal(t, 1000, cfg.Iterations)
	assert.Zero(t, cfg.Duration)
}

func TestLatencyModeForcesDepthOne(t *testing.T) {
	cfg, err := parseConfig([]string{"-mode", "lat"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, 1, cfg.Depth)
}

func TestServerConfig(t *testing.T) {
	cfg, err := parseConfig([]string{"-server", "-idle", "1s", "-json"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.True(t, cfg.Server)
	assert.Equal(t, defaultUDP, cfg.UDPAddr)
	assert.Equal(t, time.Second, cfg.Idle)
}

func TestFaultSpec(t *testing.T) {
	f, err := parseFaults("map=0.01,mapnth=3,seed=9")
	require.NoError(t, err)
	assert.Equal(t, FaultSpec{MapFraction: 0.01, MapNth: 3, Seed: 9}, f)
	assert.Equal(t, "map=0.01,mapnth=3,seed=9", f.String())
	f, err = parseFaults("halt=0.001,sinkfail=0.5,seed=2")
	require.NoError(t, err)
	assert.Equal(t, FaultSpec{HaltRate: 0.001, SinkFail: 0.5, Seed: 2}, f)
	assert.Equal(t, "halt=0.001,sinkfail=0.5,seed=2", f.String())
	f, err = parseFaults("haltat=7,cause=wrong-dword-count")
	require.NoError(t, err)
	assert.Equal(t, FaultSpec{HaltAt: 7, Cause: "wrong dword count"}, f)
	assert.Equal(t, sdma.CauseWrongDW, f.haltCause())
	assert.Equal(t, "haltat=7,cause=wrong-dword-count", f.String(), "as the flag takes it, with no quoting")
	g, err := parseFaults(f.String())
	require.NoError(t, err)
	assert.Equal(t, f.haltCause(), g.haltCause(), "String round-trips")
	assert.True(t, f.Any())
	assert.True(t, f.InjectsHalts())
	f, err = parseFaults("cause=AHG_Header_Select,haltat=1") // any order, any case, _ for spaces
	require.NoError(t, err)
	assert.Equal(t, sdma.CauseHeaderSelect, f.haltCause())
	f, err = parseFaults("haltat=3") // cause defaults to an explicit halt
	require.NoError(t, err)
	assert.Equal(t, sdma.CauseHalt, f.haltCause())
	assert.Equal(t, "haltat=3,cause=explicit-halt", f.String())
	f, err = parseFaults("sinkstall=0.25,stall=50us,seed=1")
	require.NoError(t, err)
	assert.Equal(t, FaultSpec{SinkStall: 0.25, Stall: 50 * time.Microsecond, Seed: 1}, f)
	assert.Equal(t, "sinkstall=0.25,stall=50µs,seed=1", f.String())
	assert.False(t, f.InjectsHalts())
	f, err = parseFaults("stall=1s,sinkstall=1") // stall may come first; 1s and rate 1 are the limits
	require.NoError(t, err)
	assert.Equal(t, time.Second, f.Stall)
	f, err = parseFaults("sinkstall=0.01") // stall defaults to 1ms
	require.NoError(t, err)
	assert.Equal(t, time.Millisecond, f.Stall)
	assert.Equal(t, "sinkstall=0.01,stall=1ms", f.String())
	for c := sdma.CauseNone + 1; c < sdma.NumHaltCauses; c++ { // every cause by its sdma name
		f, err = parseFaults("haltat=1,cause=" + c.String())
		require.NoError(t, err, c.String())
		assert.Equal(t, c, f.haltCause())
	}
	f, err = parseFaults("none")
	require.NoError(t, err)
	assert.False(t, f.Any())
	assert.Equal(t, "none", f.String())
}

// TestBadFlags: every bad flag or impossible combination is a usage error that names the flag.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-mode", "fast"}, `-mode "fast": want one of bw, lat`},
		{[]string{"-engines", "0"}, "-engines 0: want 1..16"},
		{[]string{"-engines", "17"}, "-engines 17"},
		{[]string{"-producers", "0"}, "-producers 0"},
		{[]string{"-size", "0"}, "-size 0: want 1..16383"},
		{[]string{"-size", "16384"}, "an SDMA packet is at most 16383"},
		{[]string{"-frags", "0"}, "-frags 0"},
		{[]string{"-frags", "300"}, "-frags 300"},
		{[]string{"-size", "4", "-frags", "8"}, "-frags 8 with -size 4: a fragment is at least one byte"},
		{[]string{"-sweep", "-size", "4", "-frags", "8"}, "the sweep starts at 8 bytes"},
		{[]string{"-n", "-1"}, "-n -1"},
		{[]string{"-n", "10", "-D", "1s"}, "-n and -D both given"},
		{[]string{"-n", "3", "-producers", "4"}, "every producer needs at least one packet"},
		{[]string{"-D", "0s"}, "-D 0s: want a positive duration"},
		{[]string{"-warmup", "-1"}, "-warmup -1"},
		{[]string{"-mode", "lat", "-depth", "8"}, "-mode lat sends one packet at a time"},
		{[]string{"-depth", "0"}, "-depth 0"},
		{[]string{"-depth", "5000"}, "-depth 5000: want 1..4096"},
		{[]string{"-producers", "1000", "-depth", "4096"}, "MiB of payload memory; the limit is 1024 MiB"},
		{[]string{"-ring", "1000"}, "-ring 1000: want a power of two"},
		{[]string{"-ring", "32"}, "-ring 32"},
		{[]string{"-ring", "64", "-frags", "100", "-size", "4096"}, "needs 64 descriptors per packet; -ring 64 holds 63"},
		{[]string{"-mapper", "mmu"}, `-mapper "mmu": want one of direct, iommu`},
		{[]string{"-alloc", "arena"}, `-alloc "arena": want one of slab, list, pool`},
		{[]string{"-wait", "sleep"}, `-wait "sleep": want one of spin-park, busy-poll, park`},
		{[]string{"-send", "drop"}, `-send "drop": want one of block, sleep, spin`},
		{[]string{"-ring", "65536"}, "-ring 65536: want a power of two, 64..32768"},
		{[]string{"-completion", "napi"}, `-completion "napi"`},
		{[]string{"-mem", "huge"}, `-mem "huge"`},
		{[]string{"-mem", "page", "-size", "10000"}, "10000 bytes need -frags 3 or more"},
		{[]string{"-sink", "tcp"}, `-sink "tcp": want one of discard, udp`},
		{[]string{"-udp-addr", "127.0.0.1:1"}, "-udp-addr needs -sink udp"},
		{[]string{"-udp-batch", "8"}, "-udp-batch needs -sink udp"},
		{[]string{"-udp-gso"}, "-udp-gso needs -sink udp"},
		{[]string{"-sink", "udp", "-udp-batch", "2000"}, "-udp-batch 2000: want 1..1024"},
		{[]string{"-sink", "udp", "-udp-gso", "-udp-batch", "1"}, "-udp-gso with -udp-batch 1: GSO needs batching"},
		{[]string{"-sink", "udp", "-udp-addr", "192.0.2.7:18515"}, "not a loopback address"},
		{[]string{"-sink", "udp", "-udp-addr", "nonsense"}, "-udp-addr"},
		{[]string{"-faults", "map=2"}, "-faults: map=2: want a fraction"},
		{[]string{"-faults", "halt"}, `-faults: "halt" is not key=value`},
		{[]string{"-faults", "disk=1"}, `unknown fault "disk"`},
		{[]string{"-faults", "halt=1.5"}, "-faults: halt=1.5: want a probability"},
		{[]string{"-faults", "sinkfail=x"}, "-faults: sinkfail=x: want a probability"},
		{[]string{"-faults", "seed=4"}, "without a fault to seed"},
		{[]string{"-faults", "sinkstall=2"}, "-faults: sinkstall=2: want a probability"},
		{[]string{"-faults", "sinkstall=-0.1"}, "-faults: sinkstall=-0.1: want a probability"},
		{[]string{"-faults", "sinkstall=0.1,stall=0s"}, "-faults: stall=0s: want a duration above 0 and at most 1s"},
		{[]string{"-faults", "sinkstall=0.1,stall=-1ms"}, "-faults: stall=-1ms"},
		{[]string{"-faults", "sinkstall=0.1,stall=2s"}, "-faults: stall=2s: want a duration above 0 and at most 1s"},
		{[]string{"-faults", "sinkstall=0.1,stall=fast"}, "-faults: stall=fast"},
		{[]string{"-faults", "stall=1ms"}, "stall=1ms applies to sinkstall=RATE only"},
		{[]string{"-faults", "sinkfail=0.1,stall=1ms"}, "stall=1ms applies to sinkstall=RATE only"},
		{[]string{"-faults", "haltat=0"}, "-faults: haltat=0: want the number (from 1)"},
		{[]string{"-faults", "haltat=x"}, "-faults: haltat=x"},
		{[]string{"-faults", "cause=explicit halt"}, "cause=explicit halt applies to haltat=N only"},
		{[]string{"-faults", "halt=0.1,cause=memory read fault"}, "applies to haltat=N only (halt=RATE picks its causes at random)"},
		{[]string{"-faults", "haltat=5,cause=disk on fire"}, "cause=disk on fire: unknown halt cause; want one of: generation mismatch, first descriptor,"},
		{[]string{"-faults", "haltat=5,cause=none"}, "unknown halt cause"},
		{[]string{"-idle", "1s"}, "-idle applies to -server only"},
		{[]string{"-server", "-depth", "8"}, "-depth does not apply to -server"},
		{[]string{"-server", "-idle", "-1s"}, "-idle -1s"},
		{[]string{"-server", "-udp-addr", "10.0.0.1:18515"}, "not a loopback address"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseConfig(tc.args, new(bytes.Buffer))
			var ue *usageError
			require.ErrorAs(t, err, &ue)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRunExitStatusOnBadFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitUsage, run(t.Context(), []string{"-engines", "99"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "sdmaperf: -engines 99")
	assert.Empty(t, stdout.String())

	// GSO rides on batching: with the unbatched sink it used to be dropped without a word.
	stderr.Reset()
	assert.Equal(t, exitUsage, run(t.Context(), []string{"-sink", "udp", "-udp-gso", "-udp-batch", "1"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "sdmaperf: -udp-gso with -udp-batch 1: GSO needs batching")
	assert.Empty(t, stdout.String())

	stderr.Reset()
	assert.Equal(t, exitOK, run(t.Context(), []string{"-h"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "Usage:")
}

// TestValidationTables: every row of the validation tables names a defined flag, and every -mem
// choice has a payload memory setup (a new choice needs both).
func TestValidationTables(t *testing.T) {
	var cfg Config
	var raw rawFlags
	fs := newFlagSet(&cfg, &raw, new(bytes.Buffer))
	for _, c := range choices {
		assert.NotNil(t, fs.Lookup(c.name), "choice -%s", c.name)
	}
	for _, r := range ranges {
		assert.NotNil(t, fs.Lookup(r.name), "range -%s", r.name)
	}
	for _, n := range append(serverFlags, serverOnly...) {
		assert.NotNil(t, fs.Lookup(n), "server flag -%s", n)
	}
	for _, c := range choices {
		if c.name == "mem" {
			for _, m := range c.allowed {
				assert.Contains(t, payloadMem, m, "-mem %s has no payload memory setup", m)
			}
		}
	}
}
