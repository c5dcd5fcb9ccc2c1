package main

import (
	"bytes"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sendSweepRun sends one size's whole run of a -sweep client: n packets of payload bytes, the
// run ID naming the sweep and the size's index as the client's sizeSink does.
func sendSweepRun(t *testing.T, addr string, sweep uint32, index, n, payload int) {
	t.Helper()
	s := newRunSink(t, addr, sweepRunID(sweep, index))
	deliver(t, s, n, payload)
	require.NoError(t, s.Close())
}

// TestServerServesClientRestartedBetweenSizes: a -sweep client killed after one size's run ended
// (its end markers sent) and before the next began, then run again, is a restarted client as
// -server's help names it ("the new run is served (a sweep starts again at its first size)"). It
// was not served: no run is superseded (a sweep's every size is a new run ID), so the restarted
// client's first size (2 bytes) was taken for the next size's row (4 bytes: both pad to 4), and
// its second (4) for the 8-byte row, where the server failed with "give -server the client's
// -sweep, -size and -frags", a cure that does not apply. The client now names its sweep and the
// size's index in each run ID, and a new sweep's first size starts the sweep again; -json holds
// the restarted sweep's rows only.
func TestServerServesClientRestartedBetweenSizes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		killed int // sizes the killed client's sweep ended before it was killed
	}{{"after the first size", 1}, {"after the second size", 2}} {
		for _, js := range []bool{false, true} {
			var stdout syncBuffer
			args := []string{"-idle", "30s", "-sweep", "-size", "8"}
			if js {
				args = append(args, "-json")
			}
			addr, stderr, done := startServer(t, &stdout, args...)
			for k := range tc.killed { // the first client's whole runs, then it was killed
				sendSweepRun(t, addr, 0xa, k, 7, max(4, 2<<k)) // padded to 4 bytes
			}
			for k := range 3 { // the restarted client: 2, 4 and 8 bytes
				sendSweepRun(t, addr, 0xb, k, 5, max(4, 2<<k))
			}
			require.Equal(t, exitOK, <-done, "%s -json %v: %s", tc.name, js, stderr.String())
			at := 2 << tc.killed
			assert.Contains(t, stderr.String(), "sdmaperf: warning: "+strconv.Itoa(at)+" bytes: the run is the first size of a new sweep (the client restarted after its "+strconv.Itoa(at/2)+"-byte run); the sweep starts again at 2 bytes\n", "%s -json %v", tc.name, js)
			if js {
				reps := serverSweepJSON(t, stdout.String())
				var got [][2]uint64
				for _, r := range reps {
					got = append(got, [2]uint64{uint64(r.Bytes), r.Report.Packets})
				}
				assert.Equal(t, [][2]uint64{{2, 5}, {4, 5}, {8, 5}}, got, "%s: the restarted sweep only", tc.name)
				continue
			}
			assert.Regexp(t, `(?s)\n \(`+strconv.Itoa(at)+` bytes: a new sweep began; it starts again at 2 bytes\)\n 2 +5 +20 .*\n 4 +5 +20 .*\n 8 +5 +40 `, stdout.String(), tc.name)
		}
	}
}

// TestServerSweepSizeOutOfOrder: a run whose size index is not the one due (a client whose
// first size's run the server never took, or a second sweep's run mid-sweep) is refused, naming
// the size it is and the one due, not taken for the due size's row.
func TestServerSweepSizeOutOfOrder(t *testing.T) {
	t.Run("first size missing", func(t *testing.T) {
		var stdout syncBuffer
		addr, stderr, done := startServer(t, &stdout, "-idle", "30s", "-sweep", "-size", "8")
		sendSweepRun(t, addr, 0xa, 1, 5, 4) // the 4-byte size, where the 2-byte one is due
		require.Equal(t, exitFail, <-done, stderr.String())
		assert.Contains(t, stderr.String(), "2 bytes: the client's run is size #2 of sweep 0000000a, where a sweep's first size was due")
	})
	t.Run("another sweep mid-sweep", func(t *testing.T) {
		var stdout syncBuffer
		addr, stderr, done := startServer(t, &stdout, "-idle", "30s", "-sweep", "-size", "8")
		sendSweepRun(t, addr, 0xa, 0, 5, 4) // 2 bytes, padded to 4
		sendSweepRun(t, addr, 0xb, 1, 5, 4) // size #2, but of another sweep
		require.Equal(t, exitFail, <-done, stderr.String())
		assert.Contains(t, stderr.String(), "4 bytes: the client's run is size #2 of sweep 0000000b, where size #2 of sweep 0000000a was due")
		assert.Regexp(t, `\n 2 +5 +20 `, stdout.String(), "the 2-byte row stands")
	})
}

// TestPerSizeUDPSinkNamesSweep: a sweep to an external receiver gives each size's sink a run ID
// naming the sweep (one ID for the whole sweep, another for another sweep) and the size's index,
// which -server needs to tell a restarted client's first size from the next size. Each size's
// run ID was random.
func TestPerSizeUDPSinkNamesSweep(t *testing.T) {
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer peer.Close()
	cfg, err := parseConfig([]string{"-sink", "udp", "-udp-addr", peer.LocalAddr().String(), "-sweep", "-size", "8"}, new(bytes.Buffer))
	require.NoError(t, err)
	var sweeps []uint32
	for range 2 { // two clients' sweeps
		cs, err := openSink(t.Context(), cfg)
		require.NoError(t, err)
		for i := range cfg.Sizes {
			_, err = cs.sizeSink(cfg)
			require.NoError(t, err)
			sw, idx, ok := parseSweepRunID(cs.udp.Run())
			require.True(t, ok, "size %d: run ID %#x", i, cs.udp.Run())
			assert.Equal(t, i, idx, "the size's index")
			if i == 0 {
				sweeps = append(sweeps, sw)
			}
			assert.Equal(t, sweeps[len(sweeps)-1], sw, "one sweep ID for the sweep's sizes")
			require.NoError(t, cs.sizeDone())
		}
	}
	assert.NotEqual(t, sweeps[0], sweeps[1], "each sweep its own ID (a 1 in 2^32 chance of a false failure)")
}
