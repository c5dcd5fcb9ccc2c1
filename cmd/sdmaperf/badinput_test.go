package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadDurations: a -D of seconds that no time.Duration holds (NaN, an infinity, more than
// 292 years) is refused naming the value given. It used to wrap around: "-D NaN" and
// "-D 9999999999999" were reported as "-D -2562047h47m16.854775808s: want a positive duration",
// a value nobody typed.
func TestBadDurations(t *testing.T) {
	for _, v := range []string{"NaN", "Inf", "-Inf", "+Inf", "9999999999999", "1e300", "-1e300"} {
		t.Run(v, func(t *testing.T) {
			_, err := parseConfig([]string{"-D", v}, new(bytes.Buffer))
			var ue *usageError
			require.ErrorAs(t, err, &ue)
			assert.Contains(t, err.Error(), `invalid value "`+v+`" for flag -D`)
			assert.False(t, strings.Contains(err.Error(), "2562047h"), "error names a wrapped duration: %v", err)
		})
	}
	// The largest duration still parses, as seconds and as a Go duration.
	for _, v := range []string{"9223372036", "2562047h"} {
		cfg, err := parseConfig([]string{"-D", v}, new(bytes.Buffer))
		require.NoError(t, err, v)
		assert.Positive(t, cfg.Duration, v)
	}
}

// TestPathRefusesMsgMode: -mode msg sends whole messages through a usdma packet queue, an SDMA
// path; with -path pio or auto it used to be ignored without a word (the run measured packets
// by the path, under a header that said "mode msg"). It is a usage error now, like the other
// flags that apply to -path sdma only.
func TestPathRefusesMsgMode(t *testing.T) {
	for _, p := range []string{"pio", "auto"} {
		_, err := parseConfig([]string{"-path", p, "-mode", "msg"}, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, p)
		assert.Contains(t, err.Error(), "-mode msg applies to -path sdma only", p)
	}
	_, err := parseConfig([]string{"-path", "sdma", "-mode", "msg"}, new(bytes.Buffer))
	require.NoError(t, err)
}

// TestMsgModeRefusesPacketFlags: -frags and -send shape a packet run (Adds per packet, what a
// producer does when the ring is full); -mode msg sends each message as one vector through a
// packet queue that waits for room itself, so they used to be ignored without a word. They are
// usage errors now, as -mem and -shared already were.
func TestMsgModeRefusesPacketFlags(t *testing.T) {
	for _, args := range [][]string{{"-frags", "5"}, {"-send", "sleep"}, {"-send", "spin"}} {
		_, err := parseConfig(append([]string{"-mode", "msg"}, args...), new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, "%v", args)
		assert.Contains(t, err.Error(), args[0]+" does not apply", "%v", args)
	}
}
