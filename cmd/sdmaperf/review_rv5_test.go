package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// errDiskFull stands for a stdout that refuses writes (sdmaperf > /dev/full, a full disk).
var errDiskFull = errors.New("no space left on device")

// fullWriter refuses every write, as /dev/full does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// TestStdoutWriteErrorFails: a run whose results could not be written fails, naming the error,
// in every output format. The text tables and --output's numbers were printed with the errors
// dropped: `sdmaperf --output=bandwidth > out` on a full disk exited 0 with an empty file
// (-json and -csv already failed).
func TestStdoutWriteErrorFails(t *testing.T) {
	for _, format := range [][]string{nil, {"--output=bandwidth"}, {"-json"}, {"-csv"}, {"-path", "pio", "-size", "64"}} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		var stderr syncBuffer
		args := append([]string{"-n", "200", "-warmup", "0"}, format...)
		code := run(ctx, args, fullWriter{}, &stderr)
		cancel()
		assert.Equal(t, exitFail, code, "%v: %s", format, stderr.String())
		assert.Contains(t, stderr.String(), errDiskFull.Error(), "%v", format)
	}
}

// TestServerStdoutWriteErrorFails: likewise for -server's report.
func TestServerStdoutWriteErrorFails(t *testing.T) {
	addr, stderr, done := startServer(t, fullWriter{}, "-idle", "30s")
	code, _, errOut := runTool(t, "-sink", "udp", "-udp-addr", addr, "-n", "200", "-warmup", "0", "-size", "64")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, exitFail, <-done, stderr.String())
	assert.True(t, strings.Contains(stderr.String(), errDiskFull.Error()), stderr.String())
}

// TestReceiverGoneMidSweepKeepsResults: a sweep whose receiver stops after the first size (a
// -server not given the client's -sweep receives one run and exits) reports the sizes it
// measured and fails naming the size that found nobody. The sizes measured were dropped: -json
// printed nothing at all, the text tables stopped after the streamed rows, as if nothing had
// been measured ("no receiver" is the one line of a client with nobody listening from the
// start).
func TestReceiverGoneMidSweepKeepsResults(t *testing.T) {
	r, err := udpsink.Listen(udpsink.ReceiverConfig{Idle: 30 * time.Second})
	require.NoError(t, err)
	done := make(chan udpsink.Report, 1)
	go func() { // one run, then gone, as a -server without -sweep
		rep, _ := r.Run(t.Context())
		r.Close()
		done <- rep
	}()
	code, out, errOut := runTool(t, "-sink", "udp", "-udp-addr", r.Addr().String(), "-sweep", "-size", "16",
		"-frags", "1", "-n", "20000", "-warmup", "0", "-json")
	first := <-done
	require.True(t, first.Ended, "the receiver got the first size's run")
	require.Equal(t, exitFail, code, errOut)
	assert.Contains(t, errOut, "connection refused")
	var rep Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), "stdout: %q", out)
	require.NotEmpty(t, rep.Results)
	assert.Equal(t, 2, rep.Results[0].Bytes)
	assert.EqualValues(t, 20000, rep.Results[0].Iterations)
	failed := 2 << len(rep.Results)
	assert.Contains(t, errOut, fmt.Sprintf("sdmaperf: %d bytes: no receiver at %s", failed, r.Addr()))
}

// TestServerSweepRefusesOtherSizes: a -server sweep checks that each run's packets are the size
// its row names. A client that sent another size (here one run of 4096-byte packets to a server
// expecting -sweep -size 16) was printed as the sweep's first row, "2 bytes" at the 4096-byte
// run's bandwidth, and the server then failed on the next size with "4 bytes: no packets
// arrived", which named neither the mismatch nor its cure.
func TestServerSweepRefusesOtherSizes(t *testing.T) {
	serveWithinIdle(t, 2*time.Second, func(idle time.Duration, late func() bool) bool {
		var stdout syncBuffer
		addr, stderr, done := startServer(t, &stdout, "-idle", idle.String(), "-sweep", "-size", "16", "-frags", "1")
		code, _, errOut := runTool(t, "-sink", "udp", "-udp-addr", addr, "-n", "200", "-warmup", "0", "-size", "4096")
		if late() {
			<-done
			return false
		}
		require.Equal(t, exitOK, code, errOut)
		require.Equal(t, exitFail, <-done, stderr.String())
		assert.Contains(t, stderr.String(), "sdmaperf: 2 bytes: the client's packets carry 4096 bytes each, where a 2-byte packet carries 4")
		for _, l := range strings.Split(stdout.String(), "\n") {
			assert.False(t, strings.HasPrefix(l, " 2 "), "no row for a run of another size: %q", l)
		}
		return true
	})
}

// TestCheckRunSize: the sizes a -server sweep accepts for a row: the packet padded to 4 bytes,
// or -mode msg packets (64 header bytes each, a message cut at -mtu); and what it refuses: another
// size, or the next size of a sweep that started elsewhere (another -frags).
func TestCheckRunSize(t *testing.T) {
	for _, c := range []struct {
		size           int
		packets, bytes uint64
		ok             bool
	}{
		{2, 10, 40, true},                   // padded to 4
		{4096, 10, 40960, true},             // packet mode
		{4096, 10, 10 * (4096 + 64), true},  // -mode msg, one packet per message
		{8192, 20, 20 * (4096 + 64), true},  // -mode msg -mtu 4096: two packets per message
		{6, 10, 10 * (8 + 64), true},        // -mode msg, padded
		{2, 10, 40960, false},               // one run of 4096 bytes against a sweep
		{4, 10, 80, false},                  // the sweep one size ahead (-frags 3 against 1)
		{64, 10, 1280, true},                // a 64-byte message's packet, or a 128-byte packet: either
		{256, 10, 5120, false},              // the sweep one size ahead, larger
		{4096, 10, 10 * 2048, false},        // smaller packets
		{4096, 40, 40 * (1024 + 64), true},  // -mode msg -mtu 1024: four packets per message
		{4096, 30, 30 * (1024 + 64), false}, // 1024-byte messages
		{2, 0, 0, true},                     // nothing to check
	} {
		err := checkRunSize(c.size, &udpsink.Report{Packets: c.packets, Bytes: c.bytes})
		assert.Equal(t, c.ok, err == nil, "%+v: %v", c, err)
	}
}

// TestServerGarbageSaysWhatArrived: a -server that got only datagrams that are not sdmaperf
// frames (another program on its port) says so; it said "no packets arrived", which sends the
// user looking for a client that did not start.
func TestServerGarbageSaysWhatArrived(t *testing.T) {
	for _, sweep := range [][]string{nil, {"-sweep", "-size", "8"}} {
		serveWithinIdle(t, 300*time.Millisecond, func(idle time.Duration, late func() bool) bool {
			addr, stderr, done := startServer(t, io.Discard, append([]string{"-idle", idle.String()}, sweep...)...)
			c := dialUDP(t, addr)
			for _, d := range [][]byte{nil, []byte("x"), []byte("GET / HTTP/1.1\r\n\r\n"), make([]byte, 64)} {
				if late() {
					<-done
					return false
				}
				_, err := c.Write(d)
				require.NoError(t, err)
			}
			if late() {
				<-done
				return false
			}
			assert.Equal(t, exitFail, <-done)
			assert.Contains(t, stderr.String(), fmt.Sprintf("no sdmaperf packets arrived in %v: 4 datagrams were not sdmaperf frames", idle), "%v", sweep)
			return true
		})
	}
}

// TestReceiverGoneMidRunSaysSo: a receiver that answered the warm-up and then went away (a
// -server killed mid-run) is reported as such; the client said "no receiver at ADDR", the
// message of a client that found nobody listening, which sends the user looking for a server
// that was never started.
func TestReceiverGoneMidRunSaysSo(t *testing.T) {
	r, err := udpsink.Listen(udpsink.ReceiverConfig{Idle: 30 * time.Second})
	require.NoError(t, err)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_, _ = r.Run(t.Context())
	}()
	go func() { // gone after the warm-up and a few thousand measured packets
		for r.Received() < 5000 {
			select {
			case <-ran:
				return
			case <-time.After(time.Millisecond):
			}
		}
		r.Close()
	}()
	code, _, errOut := runTool(t, "-sink", "udp", "-udp-addr", r.Addr().String(), "-size", "64", "-frags", "1",
		"-n", "100000000", "-warmup", "100")
	<-ran
	assert.Equal(t, exitFail, code, errOut)
	assert.Contains(t, errOut, "sdmaperf: the receiver at "+r.Addr().String()+" stopped answering during the run: connection refused")
}

// TestInProcessReceiverOutlastsStalls: the in-process receiver of -sink udp waits as long as the
// run goes on. It stopped after 10 s without a datagram, and a sink that holds a batch of stalled
// deliveries sends nothing for the batch's stalls (here 11 of 1 s, sent as one sendmmsg at the
// end): the receiver closed its socket mid-run and the client failed with "no receiver at :
// connection refused", an empty address and the wrong diagnosis. It takes 11 s: the stalls are
// the scenario, not a measurement.
func TestInProcessReceiverOutlastsStalls(t *testing.T) {
	code, out, errOut := runTool(t, "-sink", "udp", "-faults", "sinkstall=1,stall=1s", "-n", "11", "-warmup", "0",
		"-size", "64", "-frags", "1", "-json")
	require.Equal(t, exitOK, code, errOut)
	var rep Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.NotNil(t, rep.Receiver)
	assert.EqualValues(t, 11, rep.Receiver.Packets, "every packet arrived")
	assert.True(t, rep.Receiver.Ended)
}
