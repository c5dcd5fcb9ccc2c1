package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// runTool runs sdmaperf in-process and returns its exit status and output.
func runTool(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// runJSON runs sdmaperf with -json, demands success, and decodes the report.
func runJSON(t *testing.T, args ...string) Report {
	t.Helper()
	code, out, errOut := runTool(t, append(args, "-json")...)
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	var rep Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	return rep
}

func TestRunBandwidth(t *testing.T) {
	rep := runJSON(t, "-n", "2000", "-warmup", "10", "-size", "1024", "-frags", "3")
	require.Len(t, rep.Results, 1)
	r := rep.Results[0]
	assert.Equal(t, 1024, r.Bytes)
	assert.EqualValues(t, 2000, r.Iterations)
	assert.Positive(t, r.BWAvg)
	assert.GreaterOrEqual(t, r.BWPeak, r.BWAvg)
	assert.Positive(t, r.MsgRate)
	assert.EqualValues(t, 2000, r.Latency.Count)
	assert.LessOrEqual(t, r.Latency.P50, r.Latency.P99)
	assert.LessOrEqual(t, r.Latency.P99, r.Latency.Max)
	assert.Zero(t, r.Aborted)
	assert.Zero(t, r.Halts)
	assert.Equal(t, ModeBW, rep.Config.Mode)
}

func TestRunLatencyTable(t *testing.T) {
	code, out, errOut := runTool(t, "-mode", "lat", "-n", "300", "-warmup", "5", "-size", "64", "-frags", "1")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "Send Latency Test")
	assert.Contains(t, out, "99.9% percentile[usec]")
	assert.Regexp(t, `(?m)^ 64 +300 `, out)
	assert.Empty(t, errOut, "no progress line when stderr is not a terminal")
}

// TestRunEveryOption runs a sweep over the other choice of every option at once. (-depth 16: 2
// producers × 16 packets × 3 descriptors can fill the ring of 64, as -send spin needs.)
func TestRunEveryOption(t *testing.T) {
	rep := runJSON(t, "-sweep", "-size", "128", "-n", "400", "-warmup", "0", "-engines", "2", "-producers", "3",
		"-frags", "2", "-mem", "page", "-mapper", "iommu", "-alloc", "list", "-depth", "16",
		"-wait", "park", "-send", "spin", "-completion", "poll", "-ring", "64")
	require.Len(t, rep.Results, 7) // 2, 4, 8, 16, 32, 64, 128
	for i, r := range rep.Results {
		assert.Equal(t, 2<<i, r.Bytes)
		assert.EqualValues(t, 400, r.Iterations, "%d bytes", r.Bytes)
		assert.Zero(t, r.Aborted)
	}
	rep = runJSON(t, "-n", "300", "-alloc", "pool", "-wait", "busy-poll", "-producers", "2")
	assert.EqualValues(t, 300, rep.Results[0].Iterations)
}

// TestRunSendSleep runs the kernel-style sleeper (-send sleep: Send with an IOWait whose sleep is
// ParkOrRetry, resend from TxHead after the wakeup). With -completion poll nothing completes
// while the producer sends, so a ring of 64 (21 packets of 3 descriptors) fills before -depth 64
// packets are in flight: the producer must park and be woken, every time, and no packet may be
// lost or sent twice.
func TestRunSendSleep(t *testing.T) {
	rep := runJSON(t, "-send", "sleep", "-completion", "poll", "-ring", "64", "-depth", "64",
		"-n", "2000", "-warmup", "0", "-size", "256", "-frags", "2")
	r := rep.Results[0]
	assert.EqualValues(t, 2000, r.Iterations)
	assert.EqualValues(t, 2000, r.Latency.Count)
	assert.Positive(t, r.RingFull, "the ring filled")
	assert.Positive(t, r.Sleeps, "the producer parked on the wait list")
	assert.Equal(t, r.Sleeps, r.Wakeups, "every park was woken")
	assert.Equal(t, "sleep", rep.Config.Send)

	// The engine's own completion goroutine wakes the sleepers; producers share engines.
	rep = runJSON(t, "-send", "sleep", "-ring", "64", "-depth", "64", "-engines", "2", "-producers", "4",
		"-n", "4000", "-warmup", "10", "-size", "512", "-frags", "4", "-alloc", "list")
	assert.EqualValues(t, 4000, rep.Results[0].Iterations)
	assert.Zero(t, rep.Results[0].Aborted)

	// Halts: a parked packet is resent into a halted engine and flushed (aborted), never lost.
	rep = runJSON(t, "-send", "sleep", "-ring", "64", "-depth", "64", "-n", "3000", "-warmup", "0",
		"-size", "256", "-faults", "halt=0.01,seed=4")
	r = rep.Results[0]
	assert.Positive(t, r.Halts)
	assert.EqualValues(t, 3000, r.Iterations+r.Aborted, "every packet completed, OK or aborted")
}

func TestRunMapFaults(t *testing.T) {
	rep := runJSON(t, "-n", "1000", "-warmup", "0", "-faults", "map=0.1,seed=3", "-size", "512")
	r := rep.Results[0]
	assert.Positive(t, r.MapErrors)
	assert.Equal(t, r.MapErrors, r.Faults, "every injected mapping failure dropped one packet")
	assert.EqualValues(t, 1000, r.Iterations+r.MapErrors)
	assert.Equal(t, 0.1, rep.Config.Faults.MapFraction)
}

func TestRunUDPInProcess(t *testing.T) {
	rep := runJSON(t, "-sink", "udp", "-n", "300", "-warmup", "10", "-size", "256", "-frags", "4", "-engines", "2", "-producers", "2")
	require.NotNil(t, rep.Receiver)
	rr := rep.Receiver
	assert.True(t, rr.Ended)
	assert.Zero(t, rr.Dups)
	assert.Zero(t, rr.BadChecksum)
	assert.Zero(t, rr.BadFrames)
	assert.EqualValues(t, 320, rr.Packets+rr.Lost, "every packet sent is received or counted lost")
	assert.Len(t, rr.Engines, 2)
	require.Len(t, rep.Results, 1)
	assert.Less(t, rep.Results[0].Syscalls, 1.0, "batched by default: fewer send syscalls than packets")
	assert.Positive(t, rep.Results[0].Syscalls)
}

// TestRunUDPBatchOne: -udp-batch 1 is the unbatched sink, one sendmsg a packet; -udp-gso rides
// on batching.
func TestRunUDPBatchOne(t *testing.T) {
	rep := runJSON(t, "-sink", "udp", "-udp-batch", "1", "-n", "200", "-warmup", "10", "-size", "256")
	require.Len(t, rep.Results, 1)
	assert.Equal(t, 1.0, rep.Results[0].Syscalls)
	assert.Equal(t, 1, rep.Config.UDPBatch)
	rep = runJSON(t, "-sink", "udp", "-udp-gso", "-n", "200", "-warmup", "10", "-size", "256")
	require.NotNil(t, rep.Receiver)
	assert.Zero(t, rep.Receiver.BadChecksum)
	assert.True(t, rep.Config.UDPGSO)
}

// freeUDPPort returns a loopback UDP port that was free a moment ago.
func freeUDPPort(t *testing.T) string {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	addr := c.LocalAddr().String()
	require.NoError(t, c.Close())
	return addr
}

// readyWriter is the server's stderr in TestServerAndClient: it keeps what is written and, on
// the "receiving on ADDR" line the server prints once it is bound, sends ADDR on ready.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan string // cap 1
}

// startServer runs sdmaperf -server on a free loopback port with args (after -server and
// -udp-addr) in a goroutine, its report to stdout, and returns the address it receives on (from
// its stderr, also returned) and the channel its exit code comes on. A server that exits before
// it listens fails the test.
func startServer(t *testing.T, stdout io.Writer, args ...string) (addr string, stderr *readyWriter, done <-chan int) {
	t.Helper()
	stderr = &readyWriter{ready: make(chan string, 1)}
	exit := make(chan int, 1)
	go func() {
		exit <- run(t.Context(), append([]string{"-server", "-udp-addr", "127.0.0.1:0"}, args...), stdout, stderr)
	}()
	select {
	case addr = <-stderr.ready:
	case code := <-exit:
		t.Fatalf("server exit %d: %s", code, stderr.String())
	}
	return addr, stderr, exit
}

// serveWithinIdle runs a -server test whose server is to stop at its -idle after the test's
// datagrams, with a short -idle for the test's speed (from idle on). try(idle, late) starts the
// server with that -idle, sends and checks; after each datagram it sends (or run of the client),
// so before the next and before it checks, it asks late whether -idle has passed since try
// began. If so, the server may rightly have stopped before the datagram came (the test's
// goroutine, or its client, held up that long on a loaded machine; a server stopped that way is
// not what the test checks): try waits for the server's exit, checks nothing, and returns false,
// and serveWithinIdle runs it again with -idle doubled, up to 6 times. A datagram sent before
// late said no came in time: the server's -idle began after try did. (Asked only before a
// datagram, late leaves it unchecked: held up between the two, it came after the server stopped.)
func serveWithinIdle(t *testing.T, idle time.Duration, try func(idle time.Duration, late func() bool) bool) {
	t.Helper()
	for range 6 {
		start := time.Now()
		if try(idle, func() bool { return time.Since(start) >= idle }) {
			return
		}
		t.Logf("the test's sending took -idle %v or longer: the server may have stopped before it ended; again with -idle %v", idle, 2*idle)
		idle *= 2
	}
	t.Fatalf("the test's sending took longer than the server's -idle 6 times, the last %v", idle/2)
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if _, rest, ok := strings.Cut(w.buf.String(), "receiving on "); ok {
		if addr, _, ok := strings.Cut(rest, " "); ok {
			select {
			case w.ready <- addr:
			default:
			}
		}
	}
	return len(p), nil
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestServerAndClient(t *testing.T) {
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	stderr := &readyWriter{ready: make(chan string, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var stdout bytes.Buffer
		// Port 0: the server binds a free port itself and says which; no port is probed or raced.
		code := run(ctx, []string{"-server", "-udp-addr", "127.0.0.1:0", "-idle", "30s", "-json"}, &stdout, stderr)
		done <- result{code, stdout.String(), stderr.String()}
	}()
	var addr string
	select {
	case addr = <-stderr.ready:
	case srv := <-done:
		t.Fatalf("server stopped before it was ready: exit %d: %s", srv.code, srv.errOut)
	case <-time.After(30 * time.Second): // a hang guard only: a loaded CI machine
		t.Fatal("server never said it was receiving")
	}

	code, out, errOut := runTool(t, "-sink", "udp", "-udp-addr", addr, "-n", "200", "-warmup", "0", "-size", "100", "-frags", "3")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "udp ("+addr+")")

	var srv result
	select {
	case srv = <-done:
	case <-time.After(50 * time.Second): // within runTool's minute
		t.Fatal("server did not stop at the end-of-run marker")
	}
	require.Equal(t, exitOK, srv.code, srv.errOut)
	rr := serverRunJSON(t, srv.out)
	assert.True(t, rr.Ended)
	assert.EqualValues(t, 200, rr.Packets+rr.Lost)
	assert.EqualValues(t, 100*rr.Packets, rr.Bytes, "each payload is the 100-byte packet")
}

func TestServerStopsWhenIdle(t *testing.T) {
	start := time.Now()
	code, _, errOut := runTool(t, "-server", "-udp-addr", freeUDPPort(t), "-idle", "50ms")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, errOut, "no packets arrived")
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestClientRefusesNonLoopback(t *testing.T) {
	code, _, errOut := runTool(t, "-sink", "udp", "-udp-addr", "198.51.100.1:"+strconv.Itoa(18515))
	assert.Equal(t, exitUsage, code)
	assert.True(t, strings.Contains(errOut, "not a loopback address"), errOut)
}

// TestRunSharedPayload maps one payload buffer for every packet in flight (overlapping live
// mappings). With the IOMMU each mapping has its own bus address.
func TestRunSharedPayload(t *testing.T) {
	rep := runJSON(t, "-shared", "-mapper", "iommu", "-n", "1000", "-warmup", "0", "-size", "2048", "-depth", "32")
	assert.EqualValues(t, 1000, rep.Results[0].Iterations)
	assert.True(t, rep.Config.Shared)
}

func TestClientWithoutServerFails(t *testing.T) {
	code, _, errOut := runTool(t, "-sink", "udp", "-udp-addr", freeUDPPort(t), "-n", "200", "-warmup", "0", "-size", "64", "-frags", "1")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, errOut, "connection refused")
}

func TestRunHaltAndSinkFaults(t *testing.T) {
	rep := runJSON(t, "-n", "3000", "-warmup", "0", "-faults", "halt=0.01,sinkfail=0.02,seed=5", "-size", "256", "-engines", "2", "-producers", "2")
	r := rep.Results[0]
	assert.Positive(t, r.Halts, "halts were injected")
	assert.Equal(t, r.Halts, r.Recoveries, "every halt recovered and the run went on")
	var byCause uint64
	for _, n := range r.HaltsBy {
		byCause += n
	}
	assert.Equal(t, r.Halts, byCause)
	assert.Positive(t, r.Aborted, "packets in flight at a halt are aborted")
	assert.EqualValues(t, 3000, r.Iterations+r.Aborted+r.SinkErrors, "every packet was accepted, aborted or refused by the sink")
	assert.Equal(t, r.MapErrors+r.Halts+r.SinkErrors+r.SinkStalls, r.Faults, "faults is the sum of the fault events")
	assert.Positive(t, r.SinkFailed)
	assert.Equal(t, r.SinkFailed, r.SinkErrors)
	assert.Equal(t, 0.01, rep.Config.Faults.HaltRate)
	assert.Equal(t, 0.02, rep.Config.Faults.SinkFail)

	code, out, errOut := runTool(t, "-n", "500", "-warmup", "0", "-faults", "halt=0.05,seed=2", "-size", "64")
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	assert.Contains(t, out, "recoveries")
	assert.Contains(t, out, " halts (injected): ", "random halt causes are shown as injected")
}

// TestRunHaltAt: haltat halts each engine once, with the cause asked for, at a descriptor of the
// measured run (the warm-up's do not count), and the engine recovers.
func TestRunHaltAt(t *testing.T) {
	rep := runJSON(t, "-n", "50", "-warmup", "20", "-size", "256", "-frags", "2", "-depth", "4",
		"-faults", "haltat=10,cause=memory-read-fault")
	r := rep.Results[0]
	assert.EqualValues(t, 1, r.Halts)
	assert.Equal(t, map[string]uint64{"memory read fault": 1}, r.HaltsBy)
	assert.EqualValues(t, 1, r.Recoveries)
	assert.True(t, r.HaltsInjected)
	require.Len(t, r.HaltCauses, 1)
	assert.Contains(t, r.HaltCauses[0], "memory read fault")
	assert.Contains(t, r.HaltCauses[0], "FaultPlan.HaltAt")
	assert.EqualValues(t, 50, r.Iterations+r.Aborted, "every packet completed, OK or aborted")
	assert.Equal(t, 10, rep.Config.Faults.HaltAt)
	assert.Equal(t, "memory read fault", rep.Config.Faults.Cause)

	// The table says the halt was injected.
	code, out, errOut := runTool(t, "-n", "30", "-warmup", "0", "-size", "64", "-frags", "1", "-faults", "haltat=1,cause=explicit halt")
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	assert.Contains(t, out, " 64 bytes: halts (injected): explicit halt 1\n")

	// A haltat beyond the run's descriptors halts nothing, and says so.
	code, _, errOut = runTool(t, "-n", "10", "-warmup", "0", "-size", "64", "-frags", "1", "-faults", "haltat=100000")
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	assert.Contains(t, errOut, "haltat=100000: no engine halted")
}

// TestRunSinkStall: sinkstall=1 stalls every delivery (1µs each, so the test stays short).
func TestRunSinkStall(t *testing.T) {
	rep := runJSON(t, "-n", "40", "-warmup", "5", "-size", "128", "-faults", "sinkstall=1,stall=1us")
	r := rep.Results[0]
	assert.Positive(t, r.SinkStalls)
	assert.EqualValues(t, 40, r.SinkStalls, "every measured delivery stalled, the warm-up's not counted")
	assert.EqualValues(t, 40, r.Iterations)
	assert.Zero(t, r.SinkErrors)
	assert.Zero(t, r.Halts)
	assert.Equal(t, time.Microsecond, rep.Config.Faults.Stall)

	code, out, errOut := runTool(t, "-n", "20", "-warmup", "0", "-size", "64", "-faults", "sinkstall=1,stall=1us")
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	assert.Contains(t, out, "stalls")
	assert.Regexp(t, `(?m)^ 64 +0 +\d+ +\d+ +20 +0 +0 +0 +20 +0 +0$`, out, "the counter row shows 20 stalls, faults counting them")
}

// TestRunDurationSaysWhatTheDrainWaitsFor: -D bounds the sending; a sink that stalls every
// delivery makes the drain of what is in flight outlast it, and sdmaperf says so on stderr (how
// many packets, and how long at the current rate) instead of running on silently.
func TestRunDurationSaysWhatTheDrainWaitsFor(t *testing.T) {
	code, _, errOut := runTool(t, "-D", "50ms", "-warmup", "0", "-size", "64", "-frags", "1", "-depth", "64",
		"-producers", "1", "-faults", "sinkstall=1,stall=15ms")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `-D 50ms is over; draining [1-9][0-9]* packets still in flight: ~[0-9.]+m?s at the current rate`, errOut)
}

// TestRunMemRegistered runs -mem registered on both mappers: every packet completes, none is
// aborted, and the run ends with the registrations undone (the device closes cleanly).
func TestRunMemRegistered(t *testing.T) {
	for _, m := range []string{"direct", "iommu"} {
		rep := runJSON(t, "-mem", "registered", "-mapper", m, "-n", "500", "-warmup", "5", "-size", "300",
			"-frags", "3", "-producers", "2", "-depth", "16")
		assert.EqualValues(t, 500, rep.Results[0].Iterations, "-mapper %s", m)
		assert.Zero(t, rep.Results[0].Aborted)
		assert.Equal(t, "registered", rep.Config.Mem)
	}
}
