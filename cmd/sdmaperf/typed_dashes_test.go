package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErrorsNameFlagsAsTyped: an error that says a flag does not apply names each flag the user
// gave as typed, with one dash or two (perftest's long options: --report_gbits), as the value
// errors do (choice). "-path pio --report_gbits" said "-report_gbits applies to -path sdma
// only", a spelling the user did not type. Each row is one site; "~" stands for the dash or
// dashes the flags were given with.
func TestErrorsNameFlagsAsTyped(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"~shared", "~mode", "lat"}, "~shared with ~mode lat: one packet in flight per producer already reuses one payload buffer, so ~shared changes nothing; it applies to ~mode bw with -depth 2"},
		{[]string{"~shared", "~t", "1"}, "~shared with ~t 1: one packet in flight per producer already reuses one payload buffer, so ~shared changes nothing; give ~t 2 or more"},
		{[]string{"~faults", "cause=wrong-dword-count"}, "~faults: cause=wrong dword count applies to haltat=N only"},
		{[]string{"~faults", "stall=2ms"}, "~faults: stall=2ms applies to sinkstall=RATE only"},
		{[]string{"~server", "~n", "3"}, "~n does not apply to -server"},
		{[]string{"~server", "~depth", "3"}, "~depth does not apply to -server"},
		{[]string{"~idle", "5"}, "~idle applies to -server only"},
		{[]string{"~mode", "lat", "~t", "8"}, "~mode lat sends one packet at a time per producer; ~t 8 applies to ~mode bw"},
		{[]string{"~mode", "lat", "~depth", "8"}, "~depth 8 applies to ~mode bw"},
		{[]string{"~mtu", "4096"}, "~mtu applies to -mode msg"},
		{[]string{"~mode", "msg", "~mem", "page"}, "~mode msg registers the messages itself (the packet queue's pin cache); ~mem page does not apply"},
		{[]string{"~mode", "msg", "~shared"}, "~mode msg sends each slot's own message; ~shared does not apply"},
		{[]string{"~mode", "msg", "~mtu", "4096", "~frags", "2"}, "cut into ~mtu packets by the packet queue; ~frags does not apply"},
		{[]string{"~mode", "msg", "~send", "spin"}, "~mode msg: the packet queue waits for ring room itself (usdma's deferral); ~send does not apply"},
		{[]string{"~mode", "msg", "~path", "pio"}, "~mode msg applies to ~path sdma only (its messages go through a usdma packet queue); ~path pio measures packets"},
		{[]string{"~path", "pio", "~sink", "udp"}, "~sink applies to ~path sdma only (~path pio sends through verbs.Flow.Send)"},
		{[]string{"~path", "pio", "~engines", "2", "~q", "2"}, "~engines with ~path pio: every packet goes by PIO, which uses no SDMA engine and maps nothing; ~engines applies to SDMA"},
		{[]string{"~path", "auto", "~s", "64", "~wait", "park"}, "~wait with ~path auto ~s 64: every packet goes by PIO"},
		{[]string{"~path", "pio", "~report_gbits"}, "~report_gbits applies to ~path sdma only (~path pio prints its path table, or -json)"},
		{[]string{"~path", "auto", "~output=bandwidth"}, "~output applies to ~path sdma only (~path auto prints its path table, or -json)"},
	} {
		for _, dash := range []string{"-", "--"} {
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = strings.Replace(a, "~", dash, 1)
			}
			_, err := parseConfig(args, new(bytes.Buffer))
			var ue *usageError
			require.ErrorAs(t, err, &ue, "%v", args)
			assert.Contains(t, err.Error(), strings.ReplaceAll(c.want, "~", dash), "%v", args)
		}
	}
}

// TestNotApplicableNoticeNamesFlagAsTyped: the notice for a perftest flag that does not apply
// names it as typed: "--F" was announced as "-F".
func TestNotApplicableNoticeNamesFlagAsTyped(t *testing.T) {
	for _, dash := range []string{"-", "--"} {
		var stderr bytes.Buffer
		_, err := parseConfig([]string{dash + "F", dash + "d", "mlx5_0", "-server"}, &stderr)
		require.NoError(t, err, dash)
		assert.Contains(t, stderr.String(), "not applicable: "+dash+"F (", dash)
		assert.Contains(t, stderr.String(), "not applicable: "+dash+"d (", dash)
	}
}
