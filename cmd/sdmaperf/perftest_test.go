package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run %s -update to create it", t.Name())
	assert.Equal(t, string(want), got, "%s differs (go test -update rewrites it)", path)
}

// render drives cfg's reporter over rep as a run does: begin, a row per result, end.
func render(t *testing.T, rep Report) string {
	var out bytes.Buffer
	r := newReporter(rep.Config, &out)
	r.begin()
	for _, res := range rep.Results {
		r.row(res)
	}
	require.NoError(t, r.end(rep))
	return out.String()
}

// goldenReport is sampleReport with a second size and fixed counters: the golden files' input.
func goldenReport(t *testing.T, args ...string) Report {
	rep := sampleReport(t, append([]string{"-sweep", "-size", "8192"}, args...)...)
	r2 := rep.Results[0]
	r2.Bytes, r2.BWPeak, r2.BWAvg, r2.MsgRate, r2.SinkErrors, r2.Faults, r2.Halts = 8192, 2500, 2400.5, 0.307264, 5, 8, 0
	rep.Results = append(rep.Results, r2)
	return rep
}

// TestGoldenOutputs: the tables (bw and lat mode, MiB/s and Gb/s), -csv and --output, as a
// user sees them.
func TestGoldenOutputs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bw.txt", nil},
		{"bw_gbits.txt", []string{"--report_gbits"}},
		{"lat.txt", []string{"-mode", "lat"}},
		{"bw.csv", []string{"-csv"}},
		{"output_bandwidth.txt", []string{"--output=bandwidth"}},
		{"output_message_rate.txt", []string{"--output=message_rate"}},
		{"output_latency.txt", []string{"-mode", "lat", "--output=latency"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, tc.name, render(t, goldenReport(t, tc.args...)))
		})
	}
}

// TestPerftestSpellings: perftest's flags mean what they mean there.
func TestPerftestSpellings(t *testing.T) {
	var errOut bytes.Buffer
	cfg, err := parseConfig([]string{"-s", "64", "-t", "16", "-q", "4", "-D", "3", "-d", "mlx5_0", "-F"}, &errOut)
	require.NoError(t, err)
	assert.Equal(t, []int{64}, cfg.Sizes)
	assert.Equal(t, 16, cfg.Depth)
	assert.Equal(t, 4, cfg.Producers)
	assert.Equal(t, 4, cfg.Engines, "-q N: N queue pairs over N engines (at most 16)")
	assert.Equal(t, 3*time.Second, cfg.Duration, "-D: a bare number is seconds")
	assert.Equal(t, "sdmaperf: not applicable: -d (an RDMA device; sdmaperf drives the software SDMA engine); ignored\n"+
		"sdmaperf: not applicable: -F (the CPU frequency check; figures are quoted as ratios); ignored\n", errOut.String())

	cfg, err = parseConfig([]string{"-a", "-D", "0.5"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, 2, cfg.Sizes[0], "-a starts at 2 bytes, as perftest")
	assert.Equal(t, maxSweepSize, cfg.Sizes[len(cfg.Sizes)-1], "and stops at the largest power of two in a packet")
	assert.Equal(t, 500*time.Millisecond, cfg.Duration)

	cfg, err = parseConfig([]string{"-D", "250ms", "-q", "40"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, 250*time.Millisecond, cfg.Duration, "Go durations still work")
	assert.Equal(t, 40, cfg.Producers)
	assert.Equal(t, maxEngines, cfg.Engines)

	var help bytes.Buffer
	_, err = parseConfig([]string{"-h"}, &help)
	require.ErrorIs(t, err, errHelp)
	for _, want := range []string{"perftest: -s", "perftest: -a", "perftest: -t", "perftest: -q", "\n  -report_gbits\n",
		"\n  -output string\n", "\n  -run_infinitely\n", "\n  -H\n", "do not apply here", " -d ", " -F ", " -R"} {
		assert.Contains(t, help.String(), want)
	}

	for _, bad := range [][]string{{"-q", "2", "-producers", "2"}, {"-q", "0"}, {"--output=speed"},
		{"-json", "-csv"}, {"-plot", "x.pdf"}, {"--run_infinitely", "-n", "5"}, {"-http", "nonsense"}, {"-D", "soon"}} {
		_, err := parseConfig(bad, new(bytes.Buffer))
		var ue *usageError
		assert.ErrorAs(t, err, &ue, "%v", bad)
	}
}

// TestOutputOneNumber: --output prints one number per size, nothing else, for scripts.
func TestOutputOneNumber(t *testing.T) {
	code, out, errOut := runTool(t, "--output=message_rate", "-n", "300", "-warmup", "0", "-size", "64", "-frags", "1")
	require.Equal(t, exitOK, code, errOut)
	x, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
	require.NoError(t, err, "stdout %q is one number", out)
	assert.Positive(t, x)
}

// TestCSVRun: -csv from a real run: a header and one row per size, with the same columns.
func TestCSVRun(t *testing.T) {
	code, out, errOut := runTool(t, "-csv", "-sweep", "-size", "16", "-n", "100", "-warmup", "0", "-frags", "1")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5, out) // header, 2, 4, 8, 16... with -frags 1 the sweep starts at 2
	head := strings.Split(lines[0], ",")
	assert.Equal(t, "bytes", head[0])
	for i, l := range lines[1:] {
		f := strings.Split(l, ",")
		assert.Len(t, f, len(head))
		assert.Equal(t, strconv.Itoa(2<<i), f[0])
		assert.Equal(t, "100", f[1])
	}
}

// TestNoReceiverFailsFast: a UDP client with nobody at the address stops in its first second
// with perftest's kind of message, and prints no figures.
func TestNoReceiverFailsFast(t *testing.T) {
	addr := freeUDPPort(t)
	start := time.Now()
	code, out, errOut := runTool(t, "-sink", "udp", "-udp-addr", addr, "-D", "20", "-warmup", "0", "-size", "64", "-frags", "1")
	assert.Equal(t, exitFail, code)
	assert.Equal(t, "sdmaperf: no receiver at "+addr+": connection refused\n", errOut)
	assert.Less(t, time.Since(start), 5*time.Second, "fails in its first second, not after -D 20")
	assert.NotRegexp(t, `(?m)^ 64 `, out, "no figures")

	code, _, errOut = runTool(t, "-sink", "udp", "-udp-addr", addr, "-n", "100000", "-size", "64", "-frags", "1")
	assert.Equal(t, exitFail, code)
	assert.Equal(t, "sdmaperf: no receiver at "+addr+": connection refused\n", errOut, "the warm-up finds it")
}

// TestSinkFailuresAreNotBandwidth: deliveries the sink refused are not counted as sent.
func TestSinkFailuresAreNotBandwidth(t *testing.T) {
	rep := runJSON(t, "-n", "2000", "-warmup", "0", "-faults", "sinkfail=0.5,seed=1", "-size", "1024")
	r := rep.Results[0]
	assert.InDelta(t, 1000, float64(r.SinkErrors), 150)
	assert.EqualValues(t, 2000, r.Iterations+r.SinkErrors)
	assert.InDelta(t, float64(r.Iterations)*1024/mib/r.Elapsed.Seconds(), r.BWAvg, 1e-6, "bandwidth of the accepted packets only")
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestInterruptPrintsResultsSoFar: a real SIGINT in the middle of a sweep; the rows of the sizes
// done streamed out before it, the cut size's partial row and the other tables follow, exit 130.
func TestInterruptPrintsResultsSoFar(t *testing.T) {
	ctx, stop := interruptContext()
	defer stop()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-sweep", "-size", "1024", "-D", "0.1", "-warmup", "0"}, &stdout, &stderr)
	}()
	// The first size's row streams out while the sweep goes on.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stdout.String(), "\n 2 ") {
		require.True(t, time.Now().Before(deadline), "no streamed row: %q", stdout.String())
		time.Sleep(10 * time.Millisecond)
	}
	require.NotContains(t, stdout.String(), "t_min[usec]", "the other tables come at the end")
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	var code int
	select {
	case code = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not stop at SIGINT")
	}
	assert.Equal(t, exitInterrupted, code)
	out := stdout.String()
	assert.Contains(t, out, "t_min[usec]")
	assert.Contains(t, out, "interrupted: the results so far")
	assert.NotContains(t, out, "\n 1024 ", "the sweep stopped")
	assert.Equal(t, "sdmaperf: interrupted\n", stderr.String())
}

// TestInterruptKeepsThePartialSize: Ctrl-C in the middle of a size's measured run prints that
// size's figures so far, marked (interrupted), not an empty table.
func TestInterruptKeepsThePartialSize(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-D", "60", "-warmup", "0", "-size", "64"}, &stdout, &stderr) }()
	// Into the measured run (there is no warm-up): the device has delivered packets.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if dev := currentDev.Load(); dev != nil && dev.Engine(0).Stats().Packets > 100 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no packets sent")
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	assert.Equal(t, exitInterrupted, <-done)
	assert.Regexp(t, `(?m)^ 64 +[1-9][0-9]* .* \(interrupted\)$`, stdout.String(), "the partial row, with packets")
}

// TestServerWaitsIndefinitely: -server -idle 0 waits for its client until Ctrl-C, then prints
// what it received (nothing) and exits 130.
func TestServerWaitsIndefinitely(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var stdout bytes.Buffer
	stderr := &readyWriter{ready: make(chan string, 1)}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-server", "-udp-addr", "127.0.0.1:0", "-idle", "0"}, &stdout, stderr)
	}()
	<-stderr.ready
	select {
	case <-done:
		t.Fatal("-idle 0 stopped by itself")
	case <-time.After(200 * time.Millisecond):
	}
	assert.Contains(t, stderr.String(), "(stops after Ctrl-C or at the end-of-run marker)")
	cancel()
	assert.Equal(t, exitInterrupted, <-done)
	assert.Contains(t, stdout.String(), "received 0 packets")
}

// TestHTTPDebug: -http serves /debug/vars, with the running device's counters, and /debug/pprof/.
func TestHTTPDebug(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &addrWriter{prefix: "on http://", ready: make(chan string, 1)}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-http", "127.0.0.1:0", "-D", "60", "-warmup", "0", "-size", "64"}, io.Discard, stderr)
	}()
	var addr string
	select {
	case addr = <-stderr.ready:
	case code := <-done:
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	get := func(path string) string {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	var vars struct {
		Sdma struct {
			Device  string
			Engines []struct{ Packets uint64 }
		} `json:"sdma"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(vars.Sdma.Engines) == 0 || vars.Sdma.Engines[0].Packets == 0 {
		require.True(t, time.Now().Before(deadline), "no packets in /debug/vars")
		require.NoError(t, json.Unmarshal([]byte(get("/debug/vars")), &vars))
	}
	assert.Regexp(t, `^sdma[0-9]+$`, vars.Sdma.Device)
	assert.Contains(t, get("/debug/pprof/"), "goroutine")
	cancel()
	assert.Equal(t, exitInterrupted, <-done)
}

// addrWriter keeps what is written and sends the word after prefix on ready, once.
type addrWriter struct {
	syncBuffer
	prefix string
	ready  chan string // cap 1
}

func (w *addrWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if _, rest, ok := strings.Cut(w.String(), w.prefix); ok {
		if addr, _, ok := strings.Cut(rest, "\n"); ok {
			select {
			case w.ready <- addr:
			default:
			}
		}
	}
	return n, err
}

// TestJSONHasHostAndFlags: -json says where and how the figures were made.
func TestJSONHasHostAndFlags(t *testing.T) {
	rep := runJSON(t, "-n", "3000", "-warmup", "0", "-size", "256")
	require.NotNil(t, rep.Host)
	assert.Equal(t, runtime.Version(), rep.Host.GoVersion)
	assert.Equal(t, runtime.GOMAXPROCS(0), rep.Host.GOMAXPROCS)
	assert.NotEmpty(t, rep.Host.CPU)
	assert.Equal(t, []string{"-n", "3000", "-warmup", "0", "-size", "256", "-json"}, rep.Host.Args, "the flags as given")
	assert.GreaterOrEqual(t, rep.Results[0].BWStdev, 0.0)
	assert.Positive(t, rep.Results[0].Latency.Stdev)
}

// TestServerSweepRowPerSize: -server given the client's -sweep prints a row per size, each as the
// client's run of that size ends.
func TestServerSweepRowPerSize(t *testing.T) {
	sweep := []string{"-sweep", "-size", "16", "-frags", "1"}
	var stdout syncBuffer
	stderr := &readyWriter{ready: make(chan string, 1)}
	done := make(chan int, 1)
	go func() {
		done <- run(t.Context(), append([]string{"-server", "-udp-addr", "127.0.0.1:0", "-idle", "30s"}, sweep...), &stdout, stderr)
	}()
	var addr string
	select {
	case addr = <-stderr.ready:
	case code := <-done:
		t.Fatalf("server exit %d: %s", code, stderr.String())
	}
	code, _, errOut := runTool(t, append([]string{"-sink", "udp", "-udp-addr", addr, "-n", "200", "-warmup", "0"}, sweep...)...)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, exitOK, <-done, stderr.String())
	var sizes []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(l)
		if len(f) == 8 && f[0] != "#bytes" {
			sizes = append(sizes, f[0])
			n, _ := strconv.Atoi(f[1])
			lost, _ := strconv.Atoi(f[3])
			assert.Equal(t, 200, n+lost, "size %s: every packet received or counted lost", f[0])
		}
	}
	assert.Equal(t, []string{"2", "4", "8", "16"}, sizes, stdout.String())
}

// TestRunInfinitely: --run_infinitely prints a row per -D interval, through a pipe as it goes,
// until Ctrl-C; with --output=bandwidth each row is one number, the last, partial interval's
// marked after it.
func TestRunInfinitely(t *testing.T) {
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--run_infinitely", "-D", "0.05", "-warmup", "0", "-size", "256", "--output=bandwidth"}, pw, io.Discard)
		pw.Close()
	}()
	// Three rows come through the pipe while the run goes on.
	buf := make([]byte, 4096)
	var got string
	for strings.Count(got, "\n") < 3 {
		n, err := pr.Read(buf)
		require.NoError(t, err, "the pipe closed after %q", got)
		got += string(buf[:n])
	}
	cancel()
	assert.Equal(t, exitInterrupted, <-done)
	rest, err := io.ReadAll(pr)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(got+string(rest)), "\n")
	// The interval Ctrl-C cut short, if it came after a whole one (Ctrl-C may also come as one
	// ends: no partial row), is marked after its number (TestNumberRowInterruptedMarked).
	lines[len(lines)-1], _ = strings.CutSuffix(lines[len(lines)-1], " (interrupted)")
	for _, l := range lines {
		_, err := strconv.ParseFloat(l, 64)
		assert.NoError(t, err, "each interval's row is one number: %q", l)
	}
}
