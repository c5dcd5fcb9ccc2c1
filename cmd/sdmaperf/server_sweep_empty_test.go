package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// sendRun sends one client run to addr as a sweep's size does: n packets of payload bytes on
// engine 0 of a UDP sink of its own, then its end markers (Close).
func sendRun(t *testing.T, addr string, n, payload int) {
	t.Helper()
	s, err := udpsink.New(udpsink.Config{Addr: addr, Engines: 1})
	require.NoError(t, err)
	p := make([]byte, payload)
	for range n {
		require.NoError(t, s.Deliver(0, [][]byte{p}))
	}
	require.NoError(t, s.Close())
}

// TestServerSweepEmptySize: a -server sweep takes a run that ended with no packet (a size of
// which the client delivered nothing: -faults sinkfail=1, every delivery refused) as that
// size's row, 0 packets, and says so. receiveRun skipped such a run: the next size's run was
// taken for it, and the server failed on a size mismatch whose cure (give -server the client's
// -sweep) was wrong; with no packet at any size it waited out -idle and said "no packets
// arrived".
func TestServerSweepEmptySize(t *testing.T) {
	var stdout syncBuffer
	addr, stderr, done := startServer(t, &stdout, "-idle", "30s", "-sweep", "-size", "8")
	sendRun(t, addr, 5, 4) // 2 bytes, padded to 4
	sendRun(t, addr, 0, 4) // 4 bytes: nothing delivered
	sendRun(t, addr, 5, 8) // 8 bytes
	require.Equal(t, exitOK, <-done, stderr.String())
	out := stdout.String()
	assert.Regexp(t, `(?m)^ 2 +5 +20 `, out)
	assert.Regexp(t, `(?m)^ 4 +0 +0 `, out)
	assert.Regexp(t, `(?m)^ 8 +5 +40 `, out)
	assert.Contains(t, stderr.String(), "sdmaperf: warning: 4 bytes: the client's run ended with no packet sent")
	assert.False(t, strings.Contains(stderr.String(), "the client's packets carry"), stderr.String())
}

// TestServerClientDeliversNothing: the real client with every delivery refused (-faults
// sinkfail=1) against a -server, one run or a sweep: a row of 0 packets per size, each named.
// (-idle bounds the wait of the server before the fix, which skipped every run.)
func TestServerClientDeliversNothing(t *testing.T) {
	for _, c := range []struct {
		sweep []string
		sizes []string
	}{{[]string{"-size", "8"}, []string{""}}, {[]string{"-sweep", "-size", "8"}, []string{"2", "4", "8"}}} {
		var stdout syncBuffer
		addr, stderr, done := startServer(t, &stdout, append([]string{"-idle", "10s"}, c.sweep...)...)
		code, _, errOut := runTool(t, append([]string{"-sink", "udp", "-udp-addr", addr, "-n", "50", "-warmup", "0",
			"-faults", "sinkfail=1"}, c.sweep...)...)
		require.Equal(t, exitOK, code, errOut)
		require.Equal(t, exitOK, <-done, stderr.String())
		for _, size := range c.sizes {
			prefix := ""
			if size != "" {
				assert.Regexp(t, `(?m)^ `+size+` +0 +0 `, stdout.String())
				prefix = size + " bytes: "
			}
			assert.Contains(t, stderr.String(), "sdmaperf: warning: "+prefix+"the client's run ended with no packet sent", "%v", c.sweep)
		}
	}
}

// TestServerSweepClientStoppedEarly: a -server sweep whose client's sweep ended before the
// server's sizes did (the client given a smaller -size, or none where the server has one)
// waits out -idle for the next size and fails, as it must, but said only "4 bytes: no packets
// arrived in 300ms", where the cure is to give -server the client's -size. The error names the
// size whose run ended last and that cure.
func TestServerSweepClientStoppedEarly(t *testing.T) {
	serveWithinIdle(t, 300*time.Millisecond, func(idle time.Duration, late func() bool) bool {
		var stdout syncBuffer
		addr, stderr, done := startServer(t, &stdout, "-idle", idle.String(), "-sweep", "-size", "8")
		code, _, errOut := runTool(t, "-sink", "udp", "-udp-addr", addr, "-sweep", "-size", "2", "-n", "20", "-warmup", "0")
		if late() {
			<-done
			return false
		}
		require.Equal(t, exitOK, code, errOut)
		require.Equal(t, exitFail, <-done, stderr.String())
		assert.Regexp(t, `(?m)^ 2 +20 `, stdout.String())
		assert.Contains(t, stderr.String(), fmt.Sprintf("sdmaperf: 4 bytes: no packets arrived in %v", idle))
		assert.Contains(t, stderr.String(), "give -server the client's -size: -size 2", stderr.String())
		return true
	})
}

// TestServerSweepFirstSizeOnlyEndsHint: a -server sweep whose first size's end markers alone
// arrived (none of its packets), and nothing after: the row is that size's (0 packets, the
// markers' 3 lost) and the next size's error named it as where the client's sweep stopped ("give
// -server the client's -size: -size 2"), a size no packet showed: the client's sweep may start
// above it (-frags 4 starts at 4 bytes) or not be a sweep at all (a single run, another -size),
// so the cure pointed below the client's size. With no packet to show the size, the error says
// so and names the flags that must match, not a -size; after a size whose packets arrived, the
// hint stands (TestServerSweepClientStoppedEarly).
func TestServerSweepFirstSizeOnlyEndsHint(t *testing.T) {
	for _, given := range []bool{true, false} {
		run := sweepRunID(0xa, 0)
		if !given {
			run = 0x1 // a single run's ID (an older client's, or no -sweep)
		}
		serveWithinIdle(t, 300*time.Millisecond, func(idle time.Duration, late func() bool) bool {
			inTime := false
			o := serveSweepOf(t, false, func(addr string) {
				sendEnds(t, addr, run, given, 1, 3)
				inTime = !late()
			}, "-idle", idle.String())
			if !inTime {
				return false
			}
			require.Equal(t, exitFail, o.code, o.stderr)
			assert.Regexp(t, `(?m)^ 2 +0 +0 +3 `, o.stdout)
			assert.Contains(t, o.stderr, fmt.Sprintf("sdmaperf: 4 bytes: no packets arrived in %v, after the 2-byte run ended with none of its packets received (3 sent): no packet showed its size, so the client's sweep may not be this one: give -server the client's -sweep, -size and -frags\n", idle))
			assert.NotContains(t, o.stderr, "-size 2", "a size no packet showed")
			return true
		})
	}
}
