package main

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// sendEnds sends the end markers of run (udpsink.FlagRunGiven with given) of a run of engines
// engines: engine e's says it sent sent[e] packets; the engines past len(sent) send none (their
// markers lost). No packet of the run is sent: these are an earlier run's markers, as its sink's
// Close repeats them.
func sendEnds(t *testing.T, addr string, run uint64, given bool, engines int, sent ...uint64) {
	t.Helper()
	c := dialUDP(t, addr)
	flags := udpsink.FlagEnd
	if given {
		flags |= udpsink.FlagRunGiven
	}
	for e, n := range sent {
		sendFrame(t, c, udpsink.Header{Flags: flags, Engine: uint8(e), Seq: n, Run: run}, binary.LittleEndian.AppendUint32(nil, uint32(engines)))
	}
}

// TestServerIgnoresEarlierRunsEnds: a client restarted on the port while its earlier run's
// sink repeated that run's end markers (or a -server started during that run): the earlier
// run's markers arrive first, none of its packets, and then the new run. A single run took the
// markers for the run (they were all there: "received 0 packets ... lost 4", exit 0, the new
// run never received; some were: that report printed, and a warning that "the run did not end:
// 0 packets arrived, then a datagram of another run"). Markers counting packets none of which
// arrived, followed by another run, are an earlier run's: -server notes them and receives the
// run that follows, in text and -json.
func TestServerIgnoresEarlierRunsEnds(t *testing.T) {
	for _, c := range []struct {
		name    string
		engines int
		sent    []uint64
	}{{"all markers", 1, []uint64{4}}, {"some markers", 2, []uint64{4}}} {
		for _, js := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s -json %v", c.name, js), func(t *testing.T) {
				var stdout syncBuffer
				args := []string{"-idle", "30s"}
				if js {
					args = append(args, "-json")
				}
				addr, stderr, done := startServer(t, &stdout, args...)
				sendEnds(t, addr, 0x1, false, c.engines, c.sent...)
				restarted := newRunSink(t, addr, 0x2)
				deliver(t, restarted, 5, 8)
				require.NoError(t, restarted.Close())
				require.Equal(t, exitOK, <-done, stderr.String())
				assert.Contains(t, stderr.String(), "sdmaperf: the end markers of run 0000000000000001 arrived (4 packets sent) and none of its packets, then another run: an earlier run's markers, resent (its client restarted, or ran before this server listened); not counted\n")
				assert.NotContains(t, stderr.String(), "did not end")
				assert.NotContains(t, stderr.String(), "lost")
				if js {
					rep := serverRunJSON(t, stdout.String()) // the run served
					assert.EqualValues(t, 5, rep.Packets)
					assert.EqualValues(t, 2, rep.Run)
					assert.True(t, rep.Ended)
					assert.Zero(t, rep.Lost)
					return
				}
				assert.NotContains(t, stdout.String(), "received 0 packets")
				assert.Contains(t, stdout.String(), "received 5 packets, 40 bytes from 1 engine(s)")
			})
		}
	}
}

// TestServerRunOfNoPacketEndedIsItsRun: a run of which all the end markers arrived and none of
// its packets, with nothing after it within -idle, is the run received (its packets lost), as
// before earlier runs' markers were told apart: the report counts the loss, a warning says so,
// exit 0.
func TestServerRunOfNoPacketEndedIsItsRun(t *testing.T) {
	serveWithinIdle(t, 300*time.Millisecond, func(idle time.Duration, late func() bool) bool {
		var stdout syncBuffer
		addr, stderr, done := startServer(t, &stdout, "-idle", idle.String())
		sendEnds(t, addr, 0x1, false, 1, 4)
		if late() {
			<-done
			return false
		}
		require.Equal(t, exitOK, <-done, stderr.String())
		assert.Contains(t, stdout.String(), "received 0 packets")
		assert.Contains(t, stdout.String(), "lost 4")
		assert.Contains(t, stderr.String(), "sdmaperf: warning: the receiver lost 4 of 4 packets")
		assert.NotContains(t, stderr.String(), "earlier run")
		return true
	})
}

// TestServerSweepIgnoresEarlierSweepsEnds: -server -sweep, an earlier sweep's end markers (of
// a size none of whose packets arrived) before the restarted client's sweep, or between its
// sizes: they are noted and counted nowhere, the sweep served has its three rows and exits 0,
// text and -json. Before, a size of another sweep whose markers all arrived stopped the server
// ("the client's run is size #3 of sweep 0000000a, where a sweep's first size was due"), one
// some of whose markers arrived started the sweep again ("superseded by a new run"), and an
// earlier sweep's first size was the 2-byte row (0 packets), then "a new sweep began".
func TestServerSweepIgnoresEarlierSweepsEnds(t *testing.T) {
	for _, c := range []struct {
		name    string
		index   int // the earlier sweep's size
		engines int
		sent    []uint64
		before  int // the served sweep's sizes sent before the earlier sweep's markers
	}{
		{"last size, all markers", 2, 1, []uint64{4}, 0},
		{"last size, some markers", 2, 2, []uint64{4}, 0},
		{"first size, all markers", 0, 1, []uint64{4}, 0},
		{"first size, some markers", 0, 2, []uint64{4}, 0},
		{"between sizes", 1, 1, []uint64{4}, 1},
	} {
		for _, js := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s -json %v", c.name, js), func(t *testing.T) {
				o := serveSweepOf(t, js, func(addr string) {
					for k := range 3 {
						if k == c.before {
							sendEnds(t, addr, sweepRunID(0xa, c.index), true, c.engines, c.sent...)
						}
						sendSweepRun(t, addr, 0xb, k, 5+k, max(4, 2<<k))
					}
				}, "-idle", "30s")
				require.Equal(t, exitOK, o.code, o.stderr)
				prefix := fmt.Sprintf("%d bytes: ", 2<<c.before)
				assert.Contains(t, o.stderr, fmt.Sprintf("sdmaperf: %sthe end markers of size #%d of sweep 0000000a arrived (4 packets sent) and none of its packets, then another run: an earlier run's markers, resent (its client restarted, or ran before this server listened); not counted\n", prefix, c.index+1))
				for _, not := range []string{"warning", "starts again", "superseded", "lost"} {
					assert.NotContains(t, o.stderr, not)
				}
				if js {
					assert.Equal(t, []string{"2/5/", "4/6/", "8/7/"}, rowsOf(o.rows))
					return
				}
				assert.Regexp(t, `(?s)^[^()]*\n 2 +5 +20 +0 [^()]*\n 4 +6 +24 +0 [^()]*\n 8 +7 +56 +0 [^()]*$`, o.stdout)
			})
		}
	}
}

// TestServerSweepFirstSizeOfNoPacketEnded: a sweep's first size of which all the end markers
// arrived and none of the packets, followed by the same sweep's next sizes, is that size's row
// (0 packets, the markers' 3 lost), not an earlier sweep's markers: the run after it decides.
func TestServerSweepFirstSizeOfNoPacketEnded(t *testing.T) {
	for _, js := range []bool{false, true} {
		o := serveSweepOf(t, js, func(addr string) {
			sendEnds(t, addr, sweepRunID(0xa, 0), true, 1, 3)
			sendSweepRun(t, addr, 0xa, 1, 5, 4)
			sendSweepRun(t, addr, 0xa, 2, 5, 8)
		}, "-idle", "30s")
		require.Equal(t, exitOK, o.code, o.stderr)
		assert.NotContains(t, o.stderr, "earlier run")
		assert.Contains(t, o.stderr, "sdmaperf: warning: the receiver lost 3 of 3 packets")
		if js {
			assert.Equal(t, []string{"2/0/", "4/5/", "8/5/"}, rowsOf(o.rows))
			continue
		}
		assert.Regexp(t, `(?s)\n 2 +0 +0 +3 .*\n 4 +5 +20 .*\n 8 +5 +40 `, o.stdout)
	}
}

// TestServerIdleZeroSaysItWaitsAfterEnds: -idle 0, a single run whose end markers alone arrived
// (its packets lost, or an earlier run's markers): the server waits for a run after them, and
// says so at once, naming the run and how long it waits. With -idle 0 it waited until Ctrl-C
// (then exit 130) though the run had ended; it now waits endsWaitIdle0, and with nothing after
// the markers reports the run (0 packets, the markers' 4 lost) and its loss with no Ctrl-C,
// exit 0, as with an -idle time (TestServerRunOfNoPacketEndedIsItsRun).
func TestServerIdleZeroSaysItWaitsAfterEnds(t *testing.T) {
	var stdout syncBuffer
	addr, stderr, done := startServer(t, &stdout, "-idle", "0")
	sendEnds(t, addr, 0x1, false, 1, 4)
	want := "sdmaperf: the end markers of run 0000000000000001 arrived (4 packets sent) and none of its packets: waiting 5s (-idle 0's limit on this wait) for another run: if one comes, they were a previous run's, resent; if none, the report of their run follows, its packets missing\n"
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), want) }, 30*time.Second, 10*time.Millisecond, "no word of the wait: %s", stderr.String())
	require.Equal(t, exitOK, <-done, stderr.String())
	assert.Contains(t, stdout.String(), "received 0 packets")
	assert.Contains(t, stdout.String(), "lost 4")
	assert.Contains(t, stderr.String(), "sdmaperf: warning: the receiver lost 4 of 4 packets")
	assert.NotContains(t, stderr.String(), "earlier run")
}

// TestServerIdleZeroRunBegunAfterEndsIsNotCut: -idle 0, end markers alone, then a run whose
// first packet arrived within endsWaitIdle0 and whose end comes after it: the run is received
// to its end (no limit once it began, as -idle 0 promises), the markers noted as an earlier
// run's.
func TestServerIdleZeroRunBegunAfterEndsIsNotCut(t *testing.T) {
	var stdout syncBuffer
	addr, stderr, done := startServer(t, &stdout, "-idle", "0")
	sendEnds(t, addr, 0x1, false, 1, 4)
	c := dialUDP(t, addr)
	sendFrame(t, c, udpsink.Header{Engine: 0, Seq: 0, Run: 0x2}, []byte("payload!"))
	time.Sleep(endsWaitIdle0 + time.Second) // past the wait for a run to begin
	sendEnds(t, addr, 0x2, false, 1, 1)
	require.Equal(t, exitOK, <-done, stderr.String())
	assert.Contains(t, stdout.String(), "received 1 packets")
	assert.Contains(t, stderr.String(), "an earlier run's markers")
}
