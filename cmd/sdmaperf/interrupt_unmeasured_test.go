package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInterruptBeforeMeasurementPrintsNoRow: a Ctrl-C before a size's measured run began (before
// the run, or in the warm-up) prints the results so far, which have no row of that size, and
// exits 130: a row is a measurement, and there was none (perftest prints a row only for a
// measured run; the README says a Ctrl-C marks the row it cut short). The packet run, -mode msg
// too, did so (runSize: nothing measured yet, no row), while a -path run printed a row of 0
// packets, 0 Mpps, marked (interrupted), as if the size had been measured at no rate (its
// warm-up returns nil at the Ctrl-C, and the measured run then began on the ended context). The
// Ctrl-C lands in the warm-up whatever the machine's speed: 2*10^9 warm-up packets take minutes.
func TestInterruptBeforeMeasurementPrintsNoRow(t *testing.T) {
	runs := [][]string{{"-size", "64"}, {"-mode", "msg", "-size", "65536"}, {"-path", "pio", "-size", "64"}, {"-path", "auto", "-size", "4096"}}
	row := regexp.MustCompile(`(?m)^ +((pio|sdma|auto) +)?(64|4096) `)
	for _, args := range runs {
		for _, when := range []string{"before the run", "in the warm-up"} {
			for _, jsonOut := range []bool{false, true} {
				name := fmt.Sprintf("%v %s json=%v", args, when, jsonOut)
				ctx, cancel := context.WithCancel(t.Context())
				a := append([]string{"-D", "60"}, args...)
				if when == "before the run" {
					cancel()
				} else {
					a = append(a, "-warmup", "2000000000")
					time.AfterFunc(100*time.Millisecond, cancel)
				}
				if jsonOut {
					a = append(a, "-json")
				}
				var stdout, stderr syncBuffer
				code := run(ctx, a, &stdout, &stderr)
				cancel()
				out := stdout.String()
				require.Equal(t, exitInterrupted, code, "%s: %s", name, stderr.String())
				if !jsonOut {
					assert.Contains(t, out, "interrupted: the results so far", name)
					assert.NotContains(t, out, "(interrupted)", "%s: no row cut short", name)
					assert.False(t, row.MatchString(out), "%s: no row of the size:\n%s", name, out)
					continue
				}
				var rep struct {
					Results     []json.RawMessage `json:"results"`
					Interrupted bool              `json:"interrupted"`
				}
				require.NoError(t, json.Unmarshal([]byte(out), &rep), "%s: %s", name, out)
				assert.True(t, rep.Interrupted, name)
				assert.Empty(t, rep.Results, "%s: no result", name)
			}
		}
	}
}
