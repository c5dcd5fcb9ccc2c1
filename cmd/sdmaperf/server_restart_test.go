package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerServesRestartedClient: a client killed mid-run and run again (a new run ID before
// the old run's end markers) is served: the -server warns, names the run it gives up on, and
// reports the new run, which decides the exit status. It stopped at the superseded run with
// exit 1, and the restarted client's run went to a closed port. A sweep starts again at its
// first size, where the restarted client starts; -json holds the run or sweep served.
func TestServerServesRestartedClient(t *testing.T) {
	t.Run("one run", func(t *testing.T) {
		for _, js := range []bool{false, true} {
			var stdout syncBuffer
			args := []string{"-idle", "30s"}
			if js {
				args = append(args, "-json")
			}
			addr, stderr, done := startServer(t, &stdout, args...)
			killed := newRunSink(t, addr, 0x1)
			deliver(t, killed, 3, 8) // no end markers: the client was killed
			restarted := newRunSink(t, addr, 0x2)
			deliver(t, restarted, 5, 8)
			require.NoError(t, restarted.Close())
			require.Equal(t, exitOK, <-done, "-json %v: %s", js, stderr.String())
			killed.Close() // never sent: nothing to check
			assert.Contains(t, stderr.String(), "sdmaperf: warning: the run did not end: 3 packets arrived, then a datagram of another run", "-json %v", js)
			assert.Contains(t, stderr.String(), "; receiving the new run\n", "-json %v", js)
			if js {
				rep := serverRunJSON(t, stdout.String()) // the run served
				assert.EqualValues(t, 5, rep.Packets)
				assert.EqualValues(t, 2, rep.Run)
				continue
			}
			out := stdout.String()
			assert.Contains(t, out, "received 3 packets, 24 bytes from 1 engine(s)")
			assert.Contains(t, out, "(superseded by a new run)")
			assert.Contains(t, out, "received 5 packets, 40 bytes from 1 engine(s)")
			assert.Less(t, strings.Index(out, "received 3 packets"), strings.Index(out, "received 5 packets"), "in the order served")
		}
	})
	t.Run("sweep", func(t *testing.T) {
		for _, js := range []bool{false, true} {
			var stdout syncBuffer
			args := []string{"-idle", "30s", "-sweep", "-size", "8"}
			if js {
				args = append(args, "-json")
			}
			addr, stderr, done := startServer(t, &stdout, args...)
			sendRun(t, addr, 7, 4) // 2 bytes: a whole run of the first client
			killed := newRunSink(t, addr, 0x1)
			deliver(t, killed, 2, 4) // 4 bytes: killed mid-run
			sendRun(t, addr, 5, 4)   // the restarted client: 2, 4 and 8 bytes
			sendRun(t, addr, 5, 4)
			sendRun(t, addr, 5, 8)
			require.Equal(t, exitOK, <-done, "-json %v: %s", js, stderr.String())
			killed.Close()
			assert.Contains(t, stderr.String(), "sdmaperf: warning: 4 bytes: the run did not end: 2 packets arrived, then a datagram of another run", "-json %v", js)
			assert.Contains(t, stderr.String(), "; the sweep starts again at 2 bytes\n", "-json %v", js)
			if js {
				reps := serverSweepJSON(t, stdout.String())
				var got [][2]uint64
				for _, r := range reps {
					got = append(got, [2]uint64{uint64(r.Bytes), r.Report.Packets})
				}
				assert.Equal(t, [][2]uint64{{2, 5}, {4, 5}, {8, 5}}, got, "the sweep served")
				continue
			}
			out := stdout.String()
			assert.Regexp(t, `(?s)^.*\n 2 +7 +28 .*\n \(4 bytes: superseded by a new run; the sweep starts again at 2 bytes\)\n 2 +5 +20 .*\n 4 +5 +20 .*\n 8 +5 +40 `, out)
		}
	})
}
