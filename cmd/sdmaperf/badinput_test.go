package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadDurations: a -D of seconds that no time.Duration holds (NaN, an infinity, more than
// 292 years) is refused naming the value given. It used to wrap around: "-D NaN" and
// "-D 9999999999999" were reported as "-D -2562047h47m16.854775808s: want a positive duration",
// a value nobody typed.
func TestBadDurations(t *testing.T) {
	for _, v := range []string{"NaN", "Inf", "-Inf", "+Inf", "9999999999999", "1e300", "-1e300"} {
		t.Run(v, func(t *testing.T) {
			_, err := parseConfig([]string{"-D", v}, new(bytes.Buffer))
			var ue *usageError
			require.ErrorAs(t, err, &ue)
			assert.Contains(t, err.Error(), `invalid value "`+v+`" for flag -D`)
			assert.False(t, strings.Contains(err.Error(), "2562047h"), "error names a wrapped duration: %v", err)
		})
	}
	// The largest duration still parses, as seconds and as a Go duration.
	for _, v := range []string{"9223372036", "2562047h"} {
		cfg, err := parseConfig([]string{"-D", v}, new(bytes.Buffer))
		require.NoError(t, err, v)
		assert.Positive(t, cfg.Duration, v)
	}
}

// TestPathRefusesMsgMode: -mode msg sends whole messages through a usdma packet queue, an SDMA
// path; with -path pio or auto it used to be ignored without a word (the run measured packets
// by the path, under a header that said "mode msg"). It is a usage error now, like the other
// flags that apply to -path sdma only.
func TestPathRefusesMsgMode(t *testing.T) {
	for _, p := range []string{"pio", "auto"} {
		_, err := parseConfig([]string{"-path", p, "-mode", "msg"}, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, p)
		assert.Contains(t, err.Error(), "-mode msg applies to -path sdma only", p)
	}
	_, err := parseConfig([]string{"-path", "sdma", "-mode", "msg"}, new(bytes.Buffer))
	require.NoError(t, err)
}

// TestMsgModeRefusesPacketFlags: -frags and -send shape a packet run (Adds per packet, what a
// producer does when the ring is full); -mode msg sends each message as one vector through a
// packet queue that waits for room itself, so they used to be ignored without a word. They are
// usage errors now, as -mem and -shared already were.
func TestMsgModeRefusesPacketFlags(t *testing.T) {
	for _, args := range [][]string{{"-frags", "5"}, {"-send", "sleep"}, {"-send", "spin"}} {
		_, err := parseConfig(append([]string{"-mode", "msg"}, args...), new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, "%v", args)
		assert.Contains(t, err.Error(), args[0]+" does not apply", "%v", args)
	}
}

// TestErrorsNamePerftestSpelling: a bad value given under perftest's spelling (-s, -t, -a) is
// refused naming that spelling: "-s 0" said "-size 0", a flag the user did not type. And -server
// names the first flag it does not take in name order, as typed: it ranged over a map, so
// "-server -t 5 -n 3" named -t, -depth or -n from one run to the next.
func TestErrorsNamePerftestSpelling(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-s", "0"}, "-s 0: want 1..16383 bytes"},
		{[]string{"-size", "0"}, "-size 0: want 1..16383 bytes"},
		{[]string{"-s", "1", "-frags", "2"}, "-frags 2 with -s 1: a fragment is at least one byte"},
		{[]string{"-a", "-s", "2", "-frags", "3"}, "-a -s 2: the sweep starts at 4 bytes (3 fragments of at least one byte); raise -s"},
		{[]string{"-sweep", "-size", "2", "-frags", "3"}, "-sweep -size 2: the sweep starts at 4 bytes"},
		{[]string{"-t", "0"}, "-t 0: want 1..4096 packets in flight per producer"},
		{[]string{"-t", "99999"}, "-t 99999: want 1..4096"},
		{[]string{"-mode", "lat", "-t", "8"}, "-t 8 applies to -mode bw"},
		{[]string{"-mode", "msg", "-t", "70000", "-size", "64"}, "-t 70000: "},
		{[]string{"-server", "-s", "0"}, "-s 0: want 1..16383 bytes"},
		{[]string{"-server", "-t", "5"}, "-t does not apply to -server"},
		{[]string{"-server", "-t", "5", "-n", "3"}, "-n does not apply to -server"},
		{[]string{"-server", "-warmup", "1", "-t", "5", "-n", "3"}, "-n does not apply to -server"},
	} {
		for range 20 { // the map order the -server check used differs from run to run
			_, err := parseConfig(c.args, new(bytes.Buffer))
			var ue *usageError
			require.ErrorAs(t, err, &ue, "%v", c.args)
			require.Contains(t, err.Error(), c.want, "%v", c.args)
		}
	}
}

// TestIdleTakesSeconds: -idle takes a bare number of seconds as -D does (perftest's habit), or
// a Go duration; nonsense is refused saying what it wants. "-idle 5" was refused with Go's
// "parse error" (a time.Duration needs a unit), which said neither.
func TestIdleTakesSeconds(t *testing.T) {
	for v, want := range map[string]time.Duration{"5": 5 * time.Second, "1.5": 1500 * time.Millisecond, "300ms": 300 * time.Millisecond, "0": 0} {
		cfg, err := parseConfig([]string{"-server", "-idle", v}, new(bytes.Buffer))
		require.NoError(t, err, v)
		assert.Equal(t, want, cfg.Idle, v)
	}
	for v, want := range map[string]string{
		"x":    `invalid value "x" for flag -idle: want seconds (5) or a duration (500ms)`,
		"1k":   `invalid value "1k" for flag -idle: want seconds (5) or a duration (500ms)`,
		"NaN":  `invalid value "NaN" for flag -idle: want seconds (5) or a duration (500ms), at most 292 years`,
		"1e30": `invalid value "1e30" for flag -idle: want seconds (5) or a duration (500ms), at most 292 years`,
		"-1":   "-idle -1s: want a duration, or 0 to wait for the client indefinitely",
		"-5ms": "-idle -5ms: want a duration, or 0 to wait for the client indefinitely",
	} {
		_, err := parseConfig([]string{"-server", "-idle", v}, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, v)
		assert.Contains(t, err.Error(), want, v)
	}
}

// TestClientRefusesPortZero: a client's -udp-addr with port 0 is a usage error naming the flag.
// It was taken, and the run failed after the header with exit 1 and the UDP sink's "invalid
// configuration: ... has port 0", which named no flag. (A -server's port 0 is a free port.)
func TestClientRefusesPortZero(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", ":0", "[::1]:0", "localhost:0"} {
		code, out, errOut := runTool(t, "-sink", "udp", "-udp-addr", addr, "-n", "10")
		assert.Equal(t, exitUsage, code, addr)
		assert.Empty(t, out, addr)
		assert.Contains(t, errOut, "sdmaperf: -udp-addr "+addr+": port 0; give the receiver's port", addr)
	}
	_, err := parseConfig([]string{"-server", "-udp-addr", "127.0.0.1:0"}, new(bytes.Buffer))
	assert.NoError(t, err, "-server: any free port")
}

// TestRunInfinitelyRefusesTinyIntervals: --run_infinitely prints a row every -D; a -D below the
// bandwidth sampling interval (50ms) is refused. "-D 1ns" was taken and printed some 20000 rows
// a second, each of next to no packets, until Ctrl-C.
func TestRunInfinitelyRefusesTinyIntervals(t *testing.T) {
	for _, d := range []string{"1e-9", "1ms", "0.049"} {
		_, err := parseConfig([]string{"--run_infinitely", "-D", d}, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, d)
		assert.Contains(t, err.Error(), "--run_infinitely -D ", d)
		assert.Contains(t, err.Error(), "want at least 50ms", d)
	}
	for _, d := range []string{"0.05", "1"} {
		_, err := parseConfig([]string{"--run_infinitely", "-D", d}, new(bytes.Buffer))
		assert.NoError(t, err, d)
	}
}

// TestRunInfinitelyOnlyInBandwidthRuns: perftest refuses --run_infinitely in a latency test
// (force_dependecies: "run_infinitely exists only in BW tests for now."); sdmaperf ran it.
func TestRunInfinitelyOnlyInBandwidthRuns(t *testing.T) {
	_, err := parseConfig([]string{"-mode", "lat", "--run_infinitely"}, new(bytes.Buffer))
	var ue *usageError
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), "--run_infinitely exists only in bandwidth runs")
	for _, mode := range []string{"bw", "msg"} {
		_, err := parseConfig([]string{"-mode", mode, "--run_infinitely"}, new(bytes.Buffer))
		assert.NoError(t, err, mode)
	}
}

// TestWarmupBounded: -warmup is held to 2147483647 packets per size over all producers, the
// ceiling -n has with -q; the error names -warmup and the producers' flag as typed. A huge
// -warmup was taken and ran for ever before the first measured packet (9e18 at 2 Mpps: some
// 146000 years).
func TestWarmupBounded(t *testing.T) {
	if strconv.IntSize == 32 {
		t.Skip("a 32-bit int holds no -warmup past the bound: the flag parser refuses it")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-warmup", "9223372036854775807"}, "-warmup 9223372036854775807 with -producers 1: 9223372036854775807 warm-up packets per size in all; want at most 2147483647"},
		{[]string{"-warmup", "2147483648"}, "-warmup 2147483648 with -producers 1"},
		{[]string{"-warmup", "1073741824", "-producers", "2"}, "so 0..1073741823 per producer"},
		{[]string{"-warmup", "1073741824", "-q", "2"}, "-warmup 1073741824 with -q 2"},
		{[]string{"-path", "pio", "-size", "64", "-warmup", "4000000000"}, "-warmup 4000000000 with -producers 1"},
		{[]string{"-mode", "msg", "-warmup", "4000000000"}, "-warmup 4000000000 with -producers 1"},
	} {
		_, err := parseConfig(c.args, new(bytes.Buffer))
		var ue *usageError
		if assert.ErrorAs(t, err, &ue, "%v", c.args) {
			assert.Contains(t, ue.Error(), c.want, "%v", c.args)
		}
	}
	for _, args := range [][]string{{"-warmup", "2147483647"}, {"-warmup", "1073741823", "-producers", "2"}, {"-warmup", "0"}} {
		cfg, err := parseConfig(args, new(bytes.Buffer))
		if assert.NoError(t, err, "%v", args) {
			assert.Positive(t, cfg.Producers)
		}
	}
}
