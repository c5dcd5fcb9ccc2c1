package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
