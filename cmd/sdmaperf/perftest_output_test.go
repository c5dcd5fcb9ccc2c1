package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutputPairsWithMode: --output takes what perftest's takes, in the kinds of test it takes
// them: bandwidth and message_rate in a bandwidth test, latency in a latency test; the other
// pairings and any other word are usage errors (perftest exits 1). perftest
// (linux-rdma/perftest, src/perftest_parameters.c), parser(): strcmp of optarg with "bandwidth",
// "message_rate", "latency", else " Invalid verbosity level output flag. Please use bandwidth,
// latency, message_rate"; force_dependecies(): `user_param->tst == BW &&
// !(user_param->output == OUTPUT_BW || user_param->output == OUTPUT_MR)` is " Output verbosity
// level for BW can be: bandwidth, message_rate", `user_param->tst == LAT &&
// !(user_param->output == OUTPUT_LAT)` " Output verbosity level for LAT can be: latency".
// sdmaperf took --output=latency in a bandwidth run (the queueing delay of -depth packets, not
// a latency test's figure) and --output=bandwidth in a latency run.
func TestOutputPairsWithMode(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string // "" for accepted
	}{
		{[]string{"--output=bandwidth"}, ""},
		{[]string{"--output=message_rate"}, ""},
		{[]string{"-mode", "bw", "--output=latency"}, "--output=latency: a bandwidth run (-mode bw) prints bandwidth or message_rate"},
		{[]string{"--output=latency"}, "--output=latency: a bandwidth run (-mode bw)"},
		{[]string{"-mode", "msg", "--output=bandwidth"}, ""},
		{[]string{"-mode", "msg", "--output=latency"}, "--output=latency: a bandwidth run (-mode msg)"},
		{[]string{"-mode", "lat", "--output=latency"}, ""},
		{[]string{"-mode", "lat", "--output=bandwidth"}, "--output=bandwidth: a latency run (-mode lat) prints latency only"},
		{[]string{"-mode", "lat", "--output=message_rate"}, "--output=message_rate: a latency run (-mode lat) prints latency only"},
		{[]string{"--output=latency_typical"}, `-output "latency_typical": want one of bandwidth, message_rate, latency`}, // perftest's -h says latency_typical; its parser takes latency
		{[]string{"--output=Bandwidth"}, `-output "Bandwidth": want one of`},                                              // strcmp: case matters
		{[]string{"--output="}, ""}, // the default: the tables
	} {
		_, err := parseConfig(c.args, new(bytes.Buffer))
		if c.err == "" {
			assert.NoError(t, err, "%v", c.args)
			continue
		}
		var ue *usageError
		if assert.ErrorAs(t, err, &ue, "%v", c.args) {
			assert.Contains(t, err.Error(), c.err, "%v", c.args)
		}
	}
	// A run: exit 2 with the message, nothing on stdout.
	code, out, errOut := runTool(t, "--output=latency", "-n", "100", "-warmup", "0")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "-mode lat")
	code, out, errOut = runTool(t, "-mode", "lat", "--output=latency", "-n", "100", "-warmup", "0", "-size", "64", "-frags", "1")
	require.Equal(t, exitOK, code, errOut)
	x, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
	require.NoError(t, err, "stdout %q is one number", out)
	assert.Positive(t, x)
}
