package desc

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestFieldErrorNamesNegativeAndMin: a refused value below its field is reported as given. A
// negative count, index or dword count was shown as its two's complement ("byte count
// 0xffffffffffffffff out of range (max 0x3fff)" for SetLen(-1)), and a zero AHG field length as
// "0x0 out of range (max 0x10)", which names no bound that 0 breaks.
func TestFieldErrorNamesNegativeAndMin(t *testing.T) {
	var d Desc
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"SetLen -1", d.SetLen(-1), "desc: byte count -1 out of range (min 0x0, max 0x3fff)"},
		{"SetLen MinInt", d.SetLen(math.MinInt), "desc: byte count -9223372036854775808 out of range (min 0x0, max 0x3fff)"},
		{"SetHeaderIndex -3", d.SetHeaderIndex(-3), "desc: AHG index -3 out of range (min 0x0, max 0x1f)"},
		{"SetHeaderDWs -1", d.SetHeaderDWs(-1), "desc: header dwords -1 out of range (min 0x0, max 0x10)"},
		{"Make length -2", func() error { _, err := Make(0, -2, 0); return err }(), "desc: byte count -2 out of range (min 0x0, max 0x3fff)"},
		{"AHGUpdate 0 bits", func() error { _, err := AHGUpdate(0, 0, 0, 0); return err }(), "desc: AHG field length 0x0 out of range (min 0x1, max 0x10)"},
		// Values above the field keep the short form.
		{"SetLen 16384", d.SetLen(16384), "desc: byte count 0x4000 out of range (max 0x3fff)"},
		{"AHGUpdate 17 bits", func() error { _, err := AHGUpdate(0, 0, 0, 17); return err }(), "desc: AHG field length 0x11 out of range (max 0x10)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var fe *FieldError
			if !errors.As(c.err, &fe) || !errors.Is(c.err, ErrRange) {
				t.Fatalf("%v: want a *FieldError matching ErrRange", c.err)
			}
			if got := c.err.Error(); got != c.want {
				t.Errorf("Error() = %q, want %q", got, c.want)
			}
			if strings.Contains(c.want, "-") != fe.Negative {
				t.Errorf("Negative = %v for %q", fe.Negative, c.want)
			}
		})
	}
}
