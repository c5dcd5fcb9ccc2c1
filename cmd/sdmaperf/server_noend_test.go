package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// TestServerRunWithoutEndFails: a -server run whose packets stop before the client's end-of-run
// marker (the client killed mid-run, or quiet past -idle) fails (exit 1) naming what happened:
// it warned and exited 0, as if the run had been whole. With -sweep too.
func TestServerRunWithoutEndFails(t *testing.T) {
	for _, sweep := range [][]string{nil, {"-sweep", "-size", "8"}} {
		serveWithinIdle(t, 300*time.Millisecond, func(idle time.Duration, late func() bool) bool {
			addr, stderr, done := startServer(t, io.Discard, append([]string{"-idle", idle.String()}, sweep...)...)
			c := dialUDP(t, addr)
			payload := make([]byte, 4) // a 2-byte packet's, the sweep's first size (padded to a dword)
			for seq := range uint64(5) {
				if late() {
					<-done
					return false
				}
				sendFrame(t, c, udpsink.Header{Seq: seq, Run: 7}, payload)
			}
			if late() {
				<-done
				return false
			}
			assert.Equal(t, exitFail, <-done, "%v: %s", sweep, stderr.String())
			assert.Contains(t, stderr.String(), fmt.Sprintf("the run did not end: 5 packets arrived, then no end-of-run marker within %v", idle), "%v", sweep)
			return true
		})
	}
}

// TestServerRunOfNoPacketWithoutEndFails: a run whose packets were all lost, engine 0's end
// marker arrived (it sent 3) and engine 1's did not, then nothing within -idle: the server said
// "no packets arrived in 300ms", as if no client had sent, where the run's marker arrived and
// counts its loss. It fails as a run without its end does, after the report (lost 3; a sweep's
// row, not ended).
func TestServerRunOfNoPacketWithoutEndFails(t *testing.T) {
	for _, sweep := range [][]string{nil, {"-sweep", "-size", "8"}} {
		serveWithinIdle(t, 300*time.Millisecond, func(idle time.Duration, late func() bool) bool {
			var stdout syncBuffer
			addr, stderr, done := startServer(t, &stdout, append([]string{"-idle", idle.String()}, sweep...)...)
			// Engine 0 sent 3 packets, of a run of two engines.
			sendFrame(t, dialUDP(t, addr), udpsink.Header{Flags: udpsink.FlagEnd, Engine: 0, Seq: 3, Run: 7}, binary.LittleEndian.AppendUint32(nil, 2))
			if late() {
				<-done
				return false
			}
			assert.Equal(t, exitFail, <-done, "%v: %s", sweep, stderr.String())
			assert.NotContains(t, stderr.String(), "no packets arrived", "%v", sweep)
			assert.Contains(t, stderr.String(), fmt.Sprintf("the run did not end: 0 packets arrived, then no end-of-run marker of the engines not heard from within %v, where the other engines' arrived", idle), "%v", sweep)
			if sweep != nil {
				assert.Regexp(t, `\n 2 +0 +0 +3 +0 +0 .*\n \(2 bytes: not ended, no end marker of the engines not heard from within -idle `+regexp.QuoteMeta(idle.String())+` \(the other engines' arrived\);`, stdout.String())
			} else {
				assert.Contains(t, stdout.String(), "lost 3")
			}
			return true
		})
	}
}

// TestServerRunSomeEngineEndWithinIdle: a run on two engines, each heard from (two packets
// each), engine 0's end marker arrived and engine 1's did not, then nothing within -idle. The
// error said "then no end-of-run marker within 300ms", as if none had arrived: it names the
// engine whose marker is missing, as the sweep's note of a superseded size does (markersLost);
// so does the sweep's row (text and -json not_ended). A run of whose markers none arrived
// keeps the old text (TestServerRunWithoutEndFails).
func TestServerRunSomeEngineEndWithinIdle(t *testing.T) {
	for _, sweep := range [][]string{nil, {"-sweep", "-size", "8"}, {"-sweep", "-size", "8", "-json"}} {
		serveWithinIdle(t, 300*time.Millisecond, func(idle time.Duration, late func() bool) bool {
			var stdout syncBuffer
			addr, stderr, done := startServer(t, &stdout, append([]string{"-idle", idle.String()}, sweep...)...)
			c := dialUDP(t, addr)
			payload := make([]byte, 4) // a 2-byte packet's, the sweep's first size (padded to a dword)
			frames := []udpsink.Header{{Engine: 0, Seq: 0}, {Engine: 0, Seq: 1}, {Engine: 1, Seq: 0}, {Engine: 1, Seq: 1}, {Flags: udpsink.FlagEnd, Engine: 0, Seq: 2}}
			for _, h := range frames {
				if late() {
					<-done
					return false
				}
				h.Run = 7
				p := payload
				if h.Flags&udpsink.FlagEnd != 0 {
					p = binary.LittleEndian.AppendUint32(nil, 2)
				}
				sendFrame(t, c, h, p)
			}
			if late() {
				<-done
				return false
			}
			assert.Equal(t, exitFail, <-done, "%v: %s", sweep, stderr.String())
			assert.Contains(t, stderr.String(), fmt.Sprintf("the run did not end: 4 packets arrived, then no end-of-run marker of engine 1 within %v, where the other engines' arrived (the client stopped", idle), "%v", sweep)
			switch {
			case len(sweep) > 3:
				assert.Contains(t, stdout.String(), fmt.Sprintf(`"not_ended": "no end marker of engine 1 within -idle %v (the other engines' arrived)"`, idle))
			case sweep != nil:
				assert.Regexp(t, `\n 2 +4 +16 .*\n \(2 bytes: not ended, no end marker of engine 1 within -idle `+regexp.QuoteMeta(idle.String())+` \(the other engines' arrived\);`, stdout.String())
			}
			return true
		})
	}
}

// TestNotEndedNamesMissingMarkers: a sweep row's not-ended reason names the engines whose end
// markers are missing where another engine's arrived, for -idle and Ctrl-C as for a size the
// next one superseded; with no marker at all, the reasons are as they were.
func TestNotEndedNamesMissingMarkers(t *testing.T) {
	cfg := Config{Idle: time.Second}
	some := udpsink.Report{Engines: []udpsink.EngineReport{{Engine: 0, Ended: true}, {Engine: 1}}}
	none := udpsink.Report{Engines: []udpsink.EngineReport{{Engine: 0}, {Engine: 1}}}
	for _, c := range []struct {
		rep            udpsink.Report
		idle, endsLost bool
		want           string
	}{
		{some, true, false, "no end marker of engine 1 within -idle 1s (the other engines' arrived)"},
		{some, false, false, "interrupted before the end marker of engine 1 (the other engines' arrived)"},
		{some, false, true, "end markers of engine 1 lost (the other engines' arrived): the sweep's next size began"},
		{none, true, false, "no end marker within -idle 1s"},
		{none, false, false, "interrupted before its end marker"},
		{none, false, true, "end markers all lost: the sweep's next size began"},
	} {
		c.rep.IdleTimeout = c.idle
		assert.Equal(t, c.want, notEnded(cfg, &c.rep, c.endsLost))
	}
	ended := udpsink.Report{Ended: true}
	assert.Equal(t, "", notEnded(cfg, &ended, false))
}
