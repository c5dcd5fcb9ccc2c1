package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// serverRunJSON decodes a -server -json output of one run (ServerRun), checking that it carries
// the tool and the host, and returns the receiver's report.
func serverRunJSON(t *testing.T, out string) udpsink.Report {
	t.Helper()
	var r ServerRun
	require.NoError(t, json.Unmarshal([]byte(out), &r), "one JSON object: %s", out)
	require.Equal(t, "sdmaperf", r.Tool, out)
	require.NotNil(t, r.Host, "-server -json has the host: %s", out)
	return r.Receiver
}

// serverSweepJSON decodes a -server -sweep -json output (ServerSweep), checking that it carries
// the tool and the host, and returns its rows.
func serverSweepJSON(t *testing.T, out string) []SizeReport {
	t.Helper()
	var r ServerSweep
	require.NoError(t, json.Unmarshal([]byte(out), &r), "one JSON object: %s", out)
	require.Equal(t, "sdmaperf", r.Tool, out)
	require.NotNil(t, r.Host, "-server -sweep -json has the host: %s", out)
	require.NotNil(t, r.Sizes, "sizes is [] at worst: %s", out)
	return r.Sizes
}

// TestServerJSONHasHost: -server -json, one run or a sweep, carries the host object the client's
// -json has, under the same name and in the same shape (Host: CPU, Go version, build, the
// -server's flags as given), beside the receiver's report ("receiver", as the client's in-process
// receiver's) or the sweep's rows ("sizes"). It printed the bare receiver report (one run) or the
// bare rows (a sweep), so a -server's figures said nothing of the machine that received them.
func TestServerJSONHasHost(t *testing.T) {
	for _, sweep := range []bool{false, true} {
		var stdout syncBuffer
		args := []string{"-idle", "30s", "-json"}
		if sweep {
			args = append(args, "-sweep", "-size", "8")
		}
		addr, stderr, done := startServer(t, &stdout, args...)
		if sweep {
			for k := range 3 {
				sendSweepRun(t, addr, 0xa, k, 5, max(4, 2<<k))
			}
		} else {
			sendRun(t, addr, 5, 8)
		}
		require.Equal(t, exitOK, <-done, stderr.String())
		out := stdout.String()
		var top map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(out), &top), out)
		keys := []string{"host", "receiver", "tool"}
		if sweep {
			keys = []string{"host", "sizes", "tool"}
		}
		got := make([]string, 0, len(top))
		for k := range top {
			got = append(got, k)
		}
		slices.Sort(got)
		assert.Equal(t, keys, got, "sweep %v: %s", sweep, out)
		// The host's shape is the client's: the same fields, filled the same way.
		var host, client map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(top["host"], &host))
		cl, err := json.Marshal(hostInfo(Config{Args: []string{"-json"}}))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(cl, &client))
		for k := range client {
			assert.Contains(t, host, k, "sweep %v: the client's host field %q", sweep, k)
		}
		for k := range host {
			assert.Contains(t, client, k, "sweep %v: host field %q the client's lacks", sweep, k)
		}
		var h Host
		require.NoError(t, json.Unmarshal(top["host"], &h))
		assert.Equal(t, append([]string{"-server", "-udp-addr", "127.0.0.1:0"}, args...), h.Args, "the -server's flags as given")
		assert.NotEmpty(t, h.GoVersion)
		if sweep {
			rows := serverSweepJSON(t, out)
			assert.Equal(t, []string{"2/5/", "4/5/", "8/5/"}, rowsOf(rows))
			continue
		}
		rep := serverRunJSON(t, out)
		assert.EqualValues(t, 5, rep.Packets)
		assert.True(t, rep.Ended)
	}
}
