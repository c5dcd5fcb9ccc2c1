package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
