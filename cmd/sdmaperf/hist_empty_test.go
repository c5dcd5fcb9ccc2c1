package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHistOfNothingFails: -hist of a run that recorded no latency (every mapping failed) fails
// as -plot does, and writes no file; it wrote an empty distribution (an "inf" line) and exited 0.
func TestHistOfNothingFails(t *testing.T) {
	for _, flag := range []string{"-hist", "-plot"} {
		path := filepath.Join(t.TempDir(), "out"+map[string]string{"-hist": ".hgrm", "-plot": ".png"}[flag])
		code, _, errOut := runTool(t, "-faults", "map=1", "-n", "50", "-size", "64", flag, path)
		assert.Equal(t, exitFail, code, "%s: %s", flag, errOut)
		assert.Contains(t, errOut, flag+": the run recorded no latency", flag)
		if flag == "-hist" {
			_, err := os.Stat(path)
			assert.True(t, os.IsNotExist(err), "-hist wrote a file of nothing")
		}
	}
}
