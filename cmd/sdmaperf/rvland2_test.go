package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEmptyOutputFileRefused: -hist "" and -plot "" (the flag given with an empty file name) are
// usage errors naming the flag, before the run: each ran and wrote nothing without a word.
func TestEmptyOutputFileRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-hist", "", "-n", "10"}, `-hist "": want a file name`},
		{[]string{"-hist=", "-n", "10"}, `-hist "": want a file name`},
		{[]string{"-plot", "", "-n", "10"}, `-plot "": want a file name`},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, exitUsage, run(t.Context(), c.args, &stdout, &stderr), "%q", c.args)
		assert.Contains(t, stderr.String(), c.want, "%q", c.args)
		assert.Empty(t, stdout.String(), "%q: no run", c.args)
	}
}

// TestNumberRowInterruptedMarked: --output's row of a size or --run_infinitely interval that
// Ctrl-C cut short has " (interrupted)" after its number, as the tables' row has, -csv's
// interrupted column and -json's interrupted field: it was a plain number, a part of an
// interval that a script would take for a whole one. A whole row is the number alone.
func TestNumberRowInterruptedMarked(t *testing.T) {
	for _, c := range []struct {
		output string
		r      Result
		want   string
	}{
		{outBandwidth, Result{BWAvg: 512.5}, "512.500000\n"},
		{outBandwidth, Result{BWAvg: 12.25, Interrupted: true}, "12.250000 (interrupted)\n"},
		{outMsgRate, Result{MsgRate: 1.5, Interrupted: true}, "1.500000 (interrupted)\n"},
		{outLatency, Result{Latency: Latency{P50: 3.5}, Interrupted: true}, "3.500000 (interrupted)\n"},
	} {
		var out bytes.Buffer
		rep := newReporter(Config{Output: c.output}, &out)
		rep.begin()
		rep.row(c.r)
		assert.Equal(t, c.want, out.String(), "--output=%s %+v", c.output, c.r)
	}
}

// TestChoiceErrorNamesFlagAsTyped: a bad value of a choice flag is named as the user typed the
// flag: "--output=foo" as --output (perftest's long option), "-output foo" as -output; so for
// every choice flag. The error said -output to a user who typed --output.
func TestChoiceErrorNamesFlagAsTyped(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--output=foo"}, `--output "foo": want one of`},
		{[]string{"--output", "foo"}, `--output "foo": want one of`},
		{[]string{"-output", "foo"}, `-output "foo": want one of`},
		{[]string{"-output=foo"}, `-output "foo": want one of`},
		{[]string{"--mode=x"}, `--mode "x": want one of`},
		{[]string{"-json=false", "--report_gbits", "-mode", "x"}, `-mode "x": want one of`},
		{[]string{"--hist", "--mode", "--sink=y"}, `--sink "y": want one of`}, // --mode is -hist's value
		{[]string{"--mode=bw", "-mode", "z"}, `-mode "z": want one of`},       // the last one given
	} {
		_, err := parseConfig(c.args, new(bytes.Buffer))
		if assert.Error(t, err, "%q", c.args) {
			assert.True(t, strings.HasPrefix(err.Error(), c.want), "%q: %v", c.args, err)
		}
	}
}

// TestLatencySweepPlotsLatency: -mode lat -sweep -plot draws the median and 99th percentile
// latency against size, as an ib_send_lat -a user reads its rows; it drew the bandwidth and
// message rate, which a latency run does not measure for. A bw sweep still draws the rates. A
// latency sweep with one size that recorded latency draws that size's distribution.
func TestLatencySweepPlotsLatency(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range []string{".svg", ".html", ".png"} {
		path := filepath.Join(dir, "latsweep"+ext)
		require.NoError(t, writePlot(path, goldenReport(t, "-mode", "lat")))
		decodesAs(t, path)
	}
	b, err := os.ReadFile(filepath.Join(dir, "latsweep.svg"))
	require.NoError(t, err)
	svg := string(b)
	for _, want := range []string{"Latency: sdmaperf -mode lat", "latency [us]", "packet size [bytes]", "median (t_typical)", "99th percentile", ">8K<"} {
		assert.Contains(t, svg, want)
	}
	assert.NotContains(t, svg, "Bandwidth")
	assert.NotContains(t, svg, "Message rate")

	bw := filepath.Join(dir, "bwsweep.svg")
	require.NoError(t, writePlot(bw, goldenReport(t)))
	b, err = os.ReadFile(bw)
	require.NoError(t, err)
	assert.Contains(t, string(b), "Bandwidth")
	assert.NotContains(t, string(b), "99th percentile")

	zero := goldenReport(t, "-mode", "lat") // a median of 0: the latency axis is linear then
	zero.Results[0].Latency.P50 = 0
	require.NotPanics(t, func() { require.NoError(t, writePlot(filepath.Join(dir, "zero.svg"), zero)) })

	one := goldenReport(t, "-mode", "lat")
	one.Results[1].Latency = Latency{} // the last size recorded nothing (Ctrl-C at its start)
	one.Results[1].hist = nil
	path := filepath.Join(dir, "one.svg")
	require.NoError(t, writePlot(path, one))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(b), "Latency by percentile", "one size's distribution")
}
