package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunMessages(t *testing.T) {
	rep := runJSON(t, "-mode", "msg", "-size", "1048576", "-mtu", "8192", "-n", "40", "-warmup", "2", "-depth", "4")
	require.Len(t, rep.Results, 1)
	r := rep.Results[0]
	assert.Equal(t, 1<<20, r.Bytes)
	assert.EqualValues(t, 40, r.Iterations, "one iteration is one message")
	assert.EqualValues(t, 40, r.Latency.Count)
	assert.Positive(t, r.BWAvg)
	assert.Zero(t, r.Aborted)
	assert.Equal(t, ModeMsg, rep.Config.Mode)
	assert.Equal(t, 8192, rep.Config.MTU)
}

func TestRunMessagesTableAndHalts(t *testing.T) {
	code, out, errOut := runTool(t, "-mode", "msg", "-size", "200000", "-mtu", "4096", "-n", "30", "-warmup", "1", "-faults", "halt=0.01,seed=3")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "through a usdma packet queue")
	assert.Contains(t, out, " 200000 ")
}

func TestMessageFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-mtu", "4096"},                                 // without -mode msg
		{"-mode", "msg", "-mtu", "100"},                  // not a multiple of 64
		{"-mode", "msg", "-mtu", "16384"},                // over 10240
		{"-mode", "msg", "-mem", "page", "-frags", "16"}, // the queue registers itself
		{"-mode", "msg", "-size", "100000000"},           // over 64 MiB
		{"-size", "20000"},                               // a packet over 16383
	} {
		code, _, errOut := runTool(t, args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, errOut)
		assert.NotEmpty(t, errOut, "%v", args)
	}
}
