package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// TestServerRestartedSweepCountsOldFramesStale: a -sweep client killed after its first two
// sizes and run again, with late frames of the killed sweep's second size arriving before the
// restarted sweep's first size and again before its second: each size's run ID names its sweep,
// so the late frames are Stale (a run already reported), not counted into the restarted sweep's
// rows, and they neither supersede a run nor break the sweep's order.
func TestServerRestartedSweepCountsOldFramesStale(t *testing.T) {
	var stdout syncBuffer
	addr, stderr, done := startServer(t, &stdout, "-idle", "30s", "-sweep", "-size", "8", "-json")
	sendSweepRun(t, addr, 0xa, 0, 7, 4)
	sendSweepRun(t, addr, 0xa, 1, 7, 4)
	late := func() { // a late frame of the killed sweep's 4-byte run (already reported)
		s := newRunSink(t, addr, sweepRunID(0xa, 1))
		deliver(t, s, 1, 4)
		require.NoError(t, s.Close())
	}
	late()
	sendSweepRun(t, addr, 0xb, 0, 5, 4)
	late()
	sendSweepRun(t, addr, 0xb, 1, 5, 4)
	sendSweepRun(t, addr, 0xb, 2, 5, 8)
	require.Equal(t, exitOK, <-done, stderr.String())
	reps := serverSweepJSON(t, stdout.String())
	var got [][3]uint64
	var stale uint64
	for _, r := range reps {
		got = append(got, [3]uint64{uint64(r.Bytes), r.Report.Packets, r.Report.Lost})
		stale += r.Report.Stale - r.Report.StaleEnds
		assert.False(t, r.Report.Superseded, "%d bytes", r.Bytes)
	}
	assert.Equal(t, [][3]uint64{{2, 5, 0}, {4, 5, 0}, {8, 5, 0}}, got, "the restarted sweep's rows only, none counting a late frame")
	assert.Equal(t, uint64(2), stale, "the two late frames, stale")
	assert.NotContains(t, stderr.String(), "superseded")
}

// sweepOutcome is what a -server -sweep printed: its exit code, stdout, stderr and, with -json,
// its rows.
type sweepOutcome struct {
	code           int
	stdout, stderr string
	rows           []SizeReport
}

// serveSweepOf runs a -server -sweep -size 8 (2, 4 and 8 bytes) with args, while send sends
// the client's side to its address.
func serveSweepOf(t *testing.T, js bool, send func(addr string), args ...string) sweepOutcome {
	t.Helper()
	var stdout syncBuffer
	args = append([]string{"-sweep", "-size", "8"}, args...)
	if js {
		args = append(args, "-json")
	}
	addr, stderr, done := startServer(t, &stdout, args...)
	send(addr)
	o := sweepOutcome{code: <-done, stdout: stdout.String(), stderr: stderr.String()}
	if js && o.code != exitUsage {
		o.rows = serverSweepJSON(t, o.stdout)
	}
	return o
}

// sendUnended sends n packets of payload bytes of size index of sweep, without their end markers
// (lost, or the client killed); the sink is closed at the test's end.
func sendUnended(t *testing.T, addr string, sweep uint32, index, n, payload int) {
	t.Helper()
	s := newRunSink(t, addr, sweepRunID(sweep, index))
	t.Cleanup(func() { _ = s.Close() }) // its markers go to a stopped server: their error does not matter
	deliver(t, s, n, payload)
}

// sendRunOrLate is sendSweepRun (ended: its sink closed, which sends the end markers) or
// sendUnended (not ended) in a test that tries again when it sent late (serveWithinIdle): it asks
// late after each delivery and after the Close, and stops at the first late one. A refused
// delivery or Close (ECONNREFUSED: the server stopped at its -idle before a datagram sent late)
// fails the test only when it was not late. It reports whether it sent the run in time.
func sendRunOrLate(t *testing.T, addr string, sweep uint32, index, n, payload int, ended bool, late func() bool) bool {
	t.Helper()
	s := newRunSink(t, addr, sweepRunID(sweep, index))
	t.Cleanup(func() { _ = s.Close() }) // a run not ended, or cut: its markers' errors do not matter
	inTime := func(err error) bool {
		if late() {
			return false
		}
		require.NoError(t, err)
		return true
	}
	p := make([]byte, payload)
	for range n {
		if !inTime(s.Deliver(0, [][]byte{p})) {
			return false
		}
	}
	return !ended || inTime(s.Close())
}

// TestServerSweepSizeEndsLost: a -sweep client (not restarted) whose one size's end markers
// were all lost (a lossy link; Close repeats them, so rare) and whose next size then arrives.
// The server reported the size Superseded, warned "the client restarted, or a second client
// sends to this port", started the sweep again at the first size, and then failed because the
// next run was size #2 of the same sweep ("where a sweep's first size was due"). Now the run
// after a superseded one decides: a later size of the same sweep (a restarted client draws a
// new sweep ID and starts at its first size) makes the superseded run that size's row, its
// packets counted, marked not ended in text (a note under the row) and -json (not_ended), with
// a warning, and the sweep goes on: exit 0. So with two consecutive sizes. The last size's
// markers lost: no run follows, the server stops at -idle and prints the row, marked, then
// fails as a run without its end does (it printed no row).
func TestServerSweepSizeEndsLost(t *testing.T) {
	const lostNote = "not ended, end markers all lost: the sweep's next size began; a packet lost after the last one received is not counted as lost"
	for _, js := range []bool{false, true} {
		out := map[bool]string{false: " text", true: " -json"}[js]
		for lost := 1; lost <= 2; lost++ { // the first size's markers lost; the first two sizes'
			t.Run(fmt.Sprintf("%d sizes%s", lost, out), func(t *testing.T) {
				o := serveSweepOf(t, js, func(addr string) {
					for k := range 3 { // 2, 4 and 8 bytes, 5, 6 and 7 packets
						if k < lost {
							sendUnended(t, addr, 0xa, k, 5+k, max(4, 2<<k))
						} else {
							sendSweepRun(t, addr, 0xa, k, 5+k, max(4, 2<<k))
						}
					}
				}, "-idle", "30s")
				require.Equal(t, exitOK, o.code, o.stderr)
				assert.NotContains(t, o.stderr, "the client restarted")
				assert.NotContains(t, o.stderr, "starts again")
				var rows []string
				text := `(?s)`
				for k := range 3 {
					bytes, n, why := 2<<k, 5+k, ""
					text += fmt.Sprintf(`\n %d +%d +%d +0 .*`, bytes, n, n*max(4, bytes))
					if k < lost {
						why = "end markers all lost: the sweep's next size began"
						text += fmt.Sprintf(`\n \(%d bytes: %s\)`, bytes, regexp.QuoteMeta(lostNote))
						assert.Contains(t, o.stderr, fmt.Sprintf("sdmaperf: warning: %d bytes: the run did not end: %d packets arrived, then the sweep's next size: its end markers were all lost; the row counts the packets that arrived", bytes, n))
					}
					rows = append(rows, fmt.Sprintf("%d/%d/%s", bytes, n, why))
				}
				if js {
					assert.Equal(t, rows, rowsOf(o.rows))
					return
				}
				assert.Regexp(t, text, o.stdout)
			})
		}
		t.Run("last size"+out, func(t *testing.T) {
			serveWithinIdle(t, time.Second, func(idle time.Duration, late func() bool) bool {
				inTime := false
				o := serveSweepOf(t, js, func(addr string) {
					inTime = sendRunOrLate(t, addr, 0xa, 0, 5, 4, true, late) &&
						sendRunOrLate(t, addr, 0xa, 1, 5, 4, true, late) &&
						sendRunOrLate(t, addr, 0xa, 2, 6, 8, false, late)
				}, "-idle", idle.String())
				if !inTime {
					return false
				}
				require.Equal(t, exitFail, o.code, o.stderr)
				assert.Contains(t, o.stderr, fmt.Sprintf("sdmaperf: 8 bytes: the run did not end: 6 packets arrived, then no end-of-run marker within %v", idle))
				if js {
					assert.Equal(t, []string{"2/5/", "4/5/", "8/6/no end marker within -idle " + idle.String()}, rowsOf(o.rows))
					return true
				}
				assert.Regexp(t, `(?s)\n 8 +6 +48 .*\n \(8 bytes: not ended, no end marker within -idle `+regexp.QuoteMeta(idle.String())+`; a packet lost after the last one received is not counted as lost\)\n`, o.stdout)
				return true
			})
		})
	}
}

// rowsOf is each row's bytes, packets and not_ended, as "bytes/packets/not_ended".
func rowsOf(reps []SizeReport) []string {
	var rows []string
	for _, r := range reps {
		rows = append(rows, fmt.Sprintf("%d/%d/%s", r.Bytes, r.Report.Packets, r.NotEnded))
	}
	return rows
}

// TestServerRestartedSweepKilledMidSize: a -sweep client killed in the middle of a size (its
// run superseded) and run again is still told from a size whose end markers were lost: the
// next run is a new sweep's first size, so the sweep starts again there, as before the run
// after a superseded one decided. Killed in the first size (where the new sweep's first size is
// also the index due) and in the second.
func TestServerRestartedSweepKilledMidSize(t *testing.T) {
	for _, killedAt := range []int{0, 1} {
		for _, js := range []bool{false, true} {
			o := serveSweepOf(t, js, func(addr string) {
				for k := range killedAt {
					sendSweepRun(t, addr, 0xa, k, 7, 4)
				}
				sendUnended(t, addr, 0xa, killedAt, 3, 4)
				for k := range 3 {
					sendSweepRun(t, addr, 0xb, k, 5, max(4, 2<<k))
				}
			}, "-idle", "30s")
			require.Equal(t, exitOK, o.code, "killed at #%d: %s", killedAt+1, o.stderr)
			size := strconv.Itoa(2 << killedAt)
			assert.Contains(t, o.stderr, "sdmaperf: warning: "+size+" bytes: the run did not end: 3 packets arrived, then a datagram of another run: the client restarted, or a second client sends to this port", "killed at #%d", killedAt+1)
			assert.Contains(t, o.stderr, "; the sweep starts again at 2 bytes\n")
			assert.NotContains(t, o.stderr, "end markers were all lost")
			if js {
				assert.Equal(t, []string{"2/5/", "4/5/", "8/5/"}, rowsOf(o.rows), "the restarted sweep's rows only")
				continue
			}
			assert.Regexp(t, `(?s)\n \(`+size+` bytes: superseded by a new run; the sweep starts again at 2 bytes\)\n 2 +5 +20 .*\n 4 +5 +20 .*\n 8 +5 +40 `, o.stdout)
			assert.NotContains(t, o.stdout, "not ended")
		}
	}
}

// TestServerSweepEndsLostThenLaterSize: a size whose end markers were lost, followed by a later
// size of the same sweep than the next (a whole size's run never arrived): the client went on
// (same sweep), so the size is its row, not ended, and the out-of-order run is refused naming
// the size it is and the one due, not taken for a restarted client.
func TestServerSweepEndsLostThenLaterSize(t *testing.T) {
	o := serveSweepOf(t, false, func(addr string) {
		sendUnended(t, addr, 0xa, 0, 5, 4)
		sendSweepRun(t, addr, 0xa, 2, 5, 8)
	}, "-idle", "30s")
	require.Equal(t, exitFail, o.code, o.stderr)
	assert.NotContains(t, o.stderr, "starts again")
	assert.Contains(t, o.stderr, "4 bytes: the client's run is size #3 of sweep 0000000a, where size #2 of sweep 0000000a was due")
	assert.Regexp(t, `\n 2 +5 +20 .*\n \(2 bytes: not ended, end markers all lost`, o.stdout)
}

// TestServerSweepTagByChanceIsNoSweep: a run whose ID was drawn at random (an older client's,
// whose frames carry no udpsink.FlagRunGiven) and whose top 16 bits are the sweep tag anyway
// (1 time in 65536) is served as an untagged run: the first size's row. It was read as size #2
// of sweep 0000000a and refused ("where a sweep's first size was due"), the sweep failing on
// the chance of its random ID. Only a run ID the client gave (a -sweep client's sizeSink sets
// Config.Run, so its frames carry the flag) names a sweep.
func TestServerSweepTagByChanceIsNoSweep(t *testing.T) {
	o := serveSweepOf(t, false, func(addr string) {
		c, err := net.Dial("udp", addr)
		require.NoError(t, err)
		defer c.Close()
		payload := make([]byte, 4) // a 2-byte packet's, padded to a dword
		count := binary.LittleEndian.AppendUint32(nil, 1)
		run := sweepRunID(0xa, 1) // drawn at random, by chance with the tag
		for seq := range uint64(6) {
			d, p, flags := make([]byte, udpsink.HeaderLen), payload, uint8(0)
			if seq == 5 { // the end marker, after 5 packets
				p, flags = count, udpsink.FlagEnd
			}
			udpsink.PutHeader(d, udpsink.Header{Flags: flags, Seq: min(seq, 5), CRC: udpsink.Checksum([][]byte{p}), Run: run})
			_, err := c.Write(append(d, p...))
			require.NoError(t, err)
		}
		sendRun(t, addr, 5, 4) // the older client's next sizes: random IDs
		sendRun(t, addr, 5, 8)
	}, "-idle", "30s")
	require.Equal(t, exitOK, o.code, o.stderr)
	assert.Regexp(t, `(?s)\n 2 +5 +20 .*\n 4 +5 +20 .*\n 8 +5 +40 `, o.stdout)
	assert.NotContains(t, o.stderr, "sweep 0000000a")
}

// TestServerSweepRestartedBetweenSizesEndsLost: a -sweep client killed between two sizes and
// run again, whose new sweep's first size then lost its end markers (the new sweep's second
// size began). The first size's run is superseded by the same sweep's next size, as in
// TestServerSweepSizeEndsLost, but it arrives where the old sweep's next size was due: the
// server took it for a restarted client (it read no run ahead, the index not being the one
// due), dropped its row, started the sweep again and then refused the new sweep's second size
// ("where a sweep's first size was due"). It is the new sweep's first size, its row kept, not
// ended, and the sweep starts again there, as for a restart between sizes.
func TestServerSweepRestartedBetweenSizesEndsLost(t *testing.T) {
	for _, js := range []bool{false, true} {
		o := serveSweepOf(t, js, func(addr string) {
			sendSweepRun(t, addr, 0xa, 0, 7, 4) // the first client's first size, then it was killed
			sendUnended(t, addr, 0xb, 0, 5, 4)  // the restarted client's: its markers all lost
			sendSweepRun(t, addr, 0xb, 1, 6, 4)
			sendSweepRun(t, addr, 0xb, 2, 7, 8)
		}, "-idle", "30s")
		require.Equal(t, exitOK, o.code, "-json %v: %s", js, o.stderr)
		assert.Contains(t, o.stderr, "sdmaperf: warning: 4 bytes: the run is the first size of a new sweep (the client restarted after its 2-byte run); the sweep starts again at 2 bytes\n")
		assert.Contains(t, o.stderr, "sdmaperf: warning: 2 bytes: the run did not end: 5 packets arrived, then the sweep's next size: its end markers were all lost")
		assert.NotContains(t, o.stderr, "superseded")
		assert.NotContains(t, o.stderr, "the client restarted, or a second client")
		if js {
			assert.Equal(t, []string{"2/5/end markers all lost: the sweep's next size began", "4/6/", "8/7/"}, rowsOf(o.rows), "the restarted sweep's rows")
			continue
		}
		assert.Regexp(t, `(?s)\n \(4 bytes: a new sweep began; it starts again at 2 bytes\)\n 2 +5 +20 .*\n \(2 bytes: not ended, end markers all lost.*\n 4 +6 +24 .*\n 8 +7 +56 `, o.stdout)
	}
}

// udpQueueDrained reports whether the UDP socket bound to the loopback addr has nothing in its
// receive queue (/proc/net/udp's rx_queue): the server read every datagram sent to it so far.
func udpQueueDrained(t *testing.T, addr string) bool {
	t.Helper()
	ua, err := net.ResolveUDPAddr("udp", addr)
	require.NoError(t, err)
	b, err := os.ReadFile("/proc/net/udp")
	require.NoError(t, err)
	local := fmt.Sprintf("0100007F:%04X", ua.Port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 4 && f[1] == local {
			_, rx, _ := strings.Cut(f[4], ":")
			return strings.TrimLeft(rx, "0") == ""
		}
	}
	t.Fatalf("no UDP socket on %s", addr)
	return false
}

// TestServerSweepInterruptedMidSize: Ctrl-C while a size's run is arriving (-idle 0: the server
// waits for the client without limit) prints the size's row, marked "interrupted before its end
// marker" (text: a note under the row; -json: not_ended), after the earlier sizes' rows, and exits
// 130, as the README says of a size that ends without its markers.
func TestServerSweepInterruptedMidSize(t *testing.T) {
	for _, js := range []bool{false, true} {
		ctx, cancel := context.WithCancel(t.Context())
		var stdout syncBuffer
		args := []string{"-server", "-udp-addr", "127.0.0.1:0", "-idle", "0", "-sweep", "-size", "8"}
		if js {
			args = append(args, "-json")
		}
		rw := &readyWriter{ready: make(chan string, 1)}
		done := make(chan int, 1)
		go func() { done <- run(ctx, args, &stdout, rw) }()
		addr := <-rw.ready
		sendSweepRun(t, addr, 0xa, 0, 5, 4)
		sendUnended(t, addr, 0xa, 1, 3, 4)
		require.Eventually(t, func() bool { return udpQueueDrained(t, addr) }, 20*time.Second, time.Millisecond)
		cancel()
		require.Equal(t, exitInterrupted, <-done, rw.String())
		if js {
			rows := serverSweepJSON(t, stdout.String())
			assert.Equal(t, []string{"2/5/", "4/3/interrupted before its end marker"}, rowsOf(rows))
			continue
		}
		assert.Regexp(t, `(?s)\n 2 +5 +20 .*\n 4 +3 +12 .*\n \(4 bytes: not ended, interrupted before its end marker; a packet lost after`, stdout.String())
	}
}

// dialUDP is a UDP socket to addr, closed at the test's end.
func dialUDP(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("udp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// sendFrame sends a frame of header h (its CRC set) and payload p on c: a packet, or with
// udpsink.FlagEnd an end marker (h.Seq the engine's packets sent, p the run's engine count).
func sendFrame(t *testing.T, c net.Conn, h udpsink.Header, p []byte) {
	t.Helper()
	d := make([]byte, udpsink.HeaderLen)
	h.CRC = udpsink.Checksum([][]byte{p})
	udpsink.PutHeader(d, h)
	_, err := c.Write(append(d, p...))
	require.NoError(t, err)
}

// TestServerSweepSomeEngineEndsLost: a size sent on two engines whose engine 0's end marker
// arrived and engine 1's were all lost, then the sweep's next size: the size is its row, not
// ended, as when every marker was lost, but the note and the warning said "end markers all
// lost" (and the row's lost count "not counted after the last one received", of every engine),
// where engine 0's marker arrived and its count holds. They name the engine whose markers were
// lost.
func TestServerSweepSomeEngineEndsLost(t *testing.T) {
	for _, js := range []bool{false, true} {
		o := serveSweepOf(t, js, func(addr string) {
			c := dialUDP(t, addr)
			payload := make([]byte, 4)
			count := binary.LittleEndian.AppendUint32(nil, 2) // two engines in the run
			send := func(flags, engine uint8, seq uint64, p []byte) {
				sendFrame(t, c, udpsink.Header{Flags: flags | udpsink.FlagRunGiven, Engine: engine, Seq: seq, Run: sweepRunID(0xa, 0)}, p)
			}
			for seq := range uint64(3) {
				send(0, 0, seq, payload)
				send(0, 1, seq, payload)
			}
			send(udpsink.FlagEnd, 0, 3, count) // engine 1's marker lost
			sendSweepRun(t, addr, 0xa, 1, 5, 4)
			sendSweepRun(t, addr, 0xa, 2, 5, 8)
		}, "-idle", "30s")
		require.Equal(t, exitOK, o.code, o.stderr)
		assert.NotContains(t, o.stderr, "all lost")
		assert.Contains(t, o.stderr, "sdmaperf: warning: 2 bytes: the run did not end: 6 packets arrived, then the sweep's next size: the end markers of engine 1 were lost (the other engines' arrived)")
		why := "end markers of engine 1 lost (the other engines' arrived): the sweep's next size began"
		if js {
			assert.Equal(t, []string{"2/6/" + why, "4/5/", "8/5/"}, rowsOf(o.rows))
			continue
		}
		assert.Contains(t, o.stdout, "\n (2 bytes: not ended, "+why+"; a packet lost after the last one received is not counted as lost)\n")
	}
}

// TestServerSweepSizeOfNoPacketEndsLost: a size sent on two engines whose packets were all lost,
// engine 0's end marker arrived (it sent 3) and engine 1's were lost, then the sweep's next
// size (as -faults sinkfail with a lossy link makes it). The server failed with "2 bytes: no
// packets arrived in 30s", where the size's run did arrive (its marker) and was superseded by
// the next size: it took a run of no packet and no end for nothing received at all. It is the
// size's row, as when packets arrived: 0 packets, engine 0's 3 lost, marked not ended naming
// the engines whose markers were lost (text note, -json not_ended), with the warnings, and the
// sweep goes on: exit 0.
func TestServerSweepSizeOfNoPacketEndsLost(t *testing.T) {
	for _, js := range []bool{false, true} {
		o := serveSweepOf(t, js, func(addr string) {
			// Engine 0 sent 3 packets, of a run of two engines.
			sendFrame(t, dialUDP(t, addr), udpsink.Header{Flags: udpsink.FlagEnd | udpsink.FlagRunGiven, Engine: 0, Seq: 3, Run: sweepRunID(0xa, 0)}, binary.LittleEndian.AppendUint32(nil, 2))
			sendSweepRun(t, addr, 0xa, 1, 5, 4)
			sendSweepRun(t, addr, 0xa, 2, 5, 8)
		}, "-idle", "30s")
		require.Equal(t, exitOK, o.code, o.stderr)
		assert.NotContains(t, o.stderr, "no packets arrived")
		assert.Contains(t, o.stderr, "sdmaperf: warning: 2 bytes: the run did not end: 0 packets arrived, then the sweep's next size: the end markers of the engines not heard from were lost (the other engines' arrived)")
		assert.Contains(t, o.stderr, "sdmaperf: warning: the receiver lost 3 of 3 packets")
		why := "end markers of the engines not heard from lost (the other engines' arrived): the sweep's next size began"
		if js {
			assert.Equal(t, []string{"2/0/" + why, "4/5/", "8/5/"}, rowsOf(o.rows))
			assert.Equal(t, uint64(3), o.rows[0].Report.Lost)
			continue
		}
		assert.Regexp(t, `(?s)\n 2 +0 +0 +3 +0 +0 .*\n \(2 bytes: not ended, `+regexp.QuoteMeta(why)+`; a packet lost after`, o.stdout)
	}
}
