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
