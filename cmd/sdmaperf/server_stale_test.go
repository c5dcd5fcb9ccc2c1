package main

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// newRunSink is a one-engine UDP sink to addr whose frames carry run ID run.
func newRunSink(t *testing.T, addr string, run uint64) *udpsink.Sink {
	t.Helper()
	s, err := udpsink.New(udpsink.Config{Addr: addr, Engines: 1, Run: run})
	require.NoError(t, err)
	return s
}

// deliver sends n packets of payload bytes on s's engine 0.
func deliver(t *testing.T, s *udpsink.Sink, n, payload int) {
	t.Helper()
	p := make([]byte, payload)
	for range n {
		require.NoError(t, s.Deliver(0, [][]byte{p}))
	}
}

// TestServerNamesSecondClient: two clients sending to one -server at once: the first client's
// run is superseded by the second's first datagram, and the warning names a second client as a
// cause. It said "(the client restarted)" alone, which sends a user with two senders looking
// for a crash. The server then serves the second client's run (it stopped there, exit 1), and
// counts the first client's later packets as stale.
func TestServerNamesSecondClient(t *testing.T) {
	for _, c := range []struct {
		args   []string
		prefix string
	}{{nil, "sdmaperf: warning: "}, {[]string{"-sweep", "-size", "4"}, "sdmaperf: warning: 2 bytes: "}} {
		var stdout syncBuffer
		addr, stderr, done := startServer(t, &stdout, append([]string{"-idle", "30s"}, c.args...)...)
		a, b := newRunSink(t, addr, 0xa), newRunSink(t, addr, 0xb)
		deliver(t, a, 2, 4)
		deliver(t, b, 1, 4)
		deliver(t, a, 2, 4) // a's run was superseded: stale now
		require.NoError(t, b.Close())
		if c.args != nil { // the sweep's second size, 4 bytes
			sendRun(t, addr, 3, 4)
		}
		assert.Equal(t, exitOK, <-done, "%v: %s", c.args, stderr.String())
		a.Close() // the markers go to a server that stopped: their error does not matter here
		assert.Contains(t, stderr.String(), c.prefix+"the run did not end: 2 packets arrived, then a datagram of another run: the client restarted, or a second client sends to this port", "%v", c.args)
		assert.Regexp(t, `stale datagrams arrived during this run, not counted in it: 2 packets`, stderr.String(), "%v", c.args)
		if c.args == nil {
			assert.Contains(t, stdout.String(), "(superseded by a new run)", "the report says so too")
			assert.Regexp(t, `received 1 packets, 4 bytes from 1 engine\(s\) in .*\(end marker; \d+ stale datagrams of earlier runs\)`, stdout.String(), "b's run is served")
		} else {
			assert.Regexp(t, `(?m)^ 2 +1 +4 `, stdout.String(), "b's run is the first size's row")
			assert.Regexp(t, `(?m)^ 4 +3 +12 `, stdout.String())
		}
	}
}

// TestServerSweepNotesStalePackets: a -server sweep says, after a run, how many packets of runs
// it had already reported arrived during it (Report.Stale less its end markers): here a sender
// still sending in run A's name after A ended, as a second client whose run was superseded does.
// They were counted nowhere a user saw. The end markers every client repeats after its run
// (stale in each later run of a sweep) are not worth a line: there is none for them.
func TestServerSweepNotesStalePackets(t *testing.T) {
	var stdout syncBuffer
	addr, stderr, done := startServer(t, &stdout, "-idle", "30s", "-sweep", "-size", "4")
	a := newRunSink(t, addr, 0xa)
	deliver(t, a, 3, 4) // 2 bytes, padded to 4
	require.NoError(t, a.Close())
	late := newRunSink(t, addr, 0xa) // A's run ID again: stale
	deliver(t, late, 2, 4)
	require.NoError(t, late.Close())
	b := newRunSink(t, addr, 0xb)
	deliver(t, b, 3, 4) // 4 bytes
	require.NoError(t, b.Close())
	require.Equal(t, exitOK, <-done, stderr.String())
	assert.Regexp(t, `(?m)^ 2 +3 +12 `, stdout.String())
	assert.Regexp(t, `(?m)^ 4 +3 +12 `, stdout.String(), "the stale packets are not counted in the row")
	assert.Regexp(t, `(?m)^sdmaperf: 4 bytes: \d+ stale datagrams arrived during this run, not counted in it: 2 packets and \d+ end markers of runs already reported \(a second client sends to this port, or frames came late\)$`, stderr.String())
	assert.NotContains(t, stderr.String(), "2 bytes: ", "no line for the first run")
	assert.Equal(t, 1, strings.Count(stderr.String(), "stale"), stderr.String())

	// A sweep with nothing but the routine repeats of the end markers has no such line.
	addr, stderr, done = startServer(t, io.Discard, "-idle", "30s", "-sweep", "-size", "4")
	code, _, errOut := runTool(t, "-sink", "udp", "-udp-addr", addr, "-sweep", "-size", "4", "-n", "50", "-warmup", "0", "-frags", "1")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, exitOK, <-done, stderr.String())
	assert.NotContains(t, stderr.String(), "stale")
}
