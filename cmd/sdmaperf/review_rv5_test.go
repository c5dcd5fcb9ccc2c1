package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	stderr := &readyWriter{ready: make(chan string, 1)}
	done := make(chan int, 1)
	go func() {
		done <- run(t.Context(), []string{"-server", "-udp-addr", "127.0.0.1:0", "-idle", "30s"}, fullWriter{}, stderr)
	}()
	var addr string
	select {
	case addr = <-stderr.ready:
	case code := <-done:
		t.Fatalf("server exit %d: %s", code, stderr.String())
	}
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
