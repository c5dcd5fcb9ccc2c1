package main

import (
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// TestServerRunWithoutEndFails: a -server run whose packets stop before the client's end-of-run
// marker (the client killed mid-run, or quiet past -idle) fails (exit 1) naming what happened:
// it warned and exited 0, as if the run had been whole. With -sweep too.
func TestServerRunWithoutEndFails(t *testing.T) {
	for _, sweep := range [][]string{nil, {"-sweep", "-size", "8"}} {
		addr, stderr, done := startServer(t, io.Discard, append([]string{"-idle", "300ms"}, sweep...)...)
		c, err := net.Dial("udp", addr)
		require.NoError(t, err)
		payload := make([]byte, 4) // a 2-byte packet's, the sweep's first size (padded to a dword)
		for seq := range uint64(5) {
			d := make([]byte, udpsink.HeaderLen+len(payload))
			udpsink.PutHeader(d, udpsink.Header{Seq: seq, CRC: udpsink.Checksum([][]byte{payload}), Run: 7})
			copy(d[udpsink.HeaderLen:], payload)
			_, err := c.Write(d)
			require.NoError(t, err)
		}
		c.Close()
		assert.Equal(t, exitFail, <-done, "%v: %s", sweep, stderr.String())
		assert.Contains(t, stderr.String(), "the run did not end: 5 packets arrived, then no end-of-run marker within 300ms", "%v", sweep)
	}
}

// TestServerRunOfNoPacketWithoutEndFails: a run whose packets were all lost, engine 0's end
// marker arrived (it sent 3) and engine 1's did not, then nothing within -idle: the server said
// "no packets arrived in 300ms", as if no client had sent, where the run's marker arrived and
// counts its loss. It fails as a run without its end does, after the report (lost 3; a sweep's
// row, not ended).
func TestServerRunOfNoPacketWithoutEndFails(t *testing.T) {
	for _, sweep := range [][]string{nil, {"-sweep", "-size", "8"}} {
		var stdout syncBuffer
		addr, stderr, done := startServer(t, &stdout, append([]string{"-idle", "300ms"}, sweep...)...)
		// Engine 0 sent 3 packets, of a run of two engines.
		sendFrame(t, dialUDP(t, addr), udpsink.Header{Flags: udpsink.FlagEnd, Engine: 0, Seq: 3, Run: 7}, binary.LittleEndian.AppendUint32(nil, 2))
		assert.Equal(t, exitFail, <-done, "%v: %s", sweep, stderr.String())
		assert.NotContains(t, stderr.String(), "no packets arrived", "%v", sweep)
		assert.Contains(t, stderr.String(), "the run did not end: 0 packets arrived, then no end-of-run marker within 300ms", "%v", sweep)
		if sweep != nil {
			assert.Regexp(t, `\n 2 +0 +0 +3 +0 +0 .*\n \(2 bytes: not ended, no end marker within -idle 300ms;`, stdout.String())
		} else {
			assert.Contains(t, stdout.String(), "lost 3")
		}
	}
}
