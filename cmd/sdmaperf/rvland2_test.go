package main

import (
	"bytes"
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
