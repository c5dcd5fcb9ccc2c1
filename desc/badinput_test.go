package desc

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestBadInputs: the bad-input census of package desc. Every setter and builder given a value
// that does not fit its field returns a *FieldError matching ErrRange and naming the field, and
// leaves the descriptor as it was.
func TestBadInputs(t *testing.T) {
	base, err := Make(0x1000, 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	base.SetFirst(true)
	base.SetUpdate1(0xdeadbeef)
	for _, c := range []struct {
		name, field string
		call        func(d *Desc) error
	}{
		{"SetAddr 2^48", "address", func(d *Desc) error { return d.SetAddr(MaxAddr + 1) }},
		{"SetAddr ^0", "address", func(d *Desc) error { return d.SetAddr(math.MaxUint64) }},
		{"SetLen -1", "byte count", func(d *Desc) error { return d.SetLen(-1) }},
		{"SetLen MinInt", "byte count", func(d *Desc) error { return d.SetLen(math.MinInt) }},
		{"SetLen 16384", "byte count", func(d *Desc) error { return d.SetLen(MaxByteCount + 1) }},
		{"SetLen MaxInt", "byte count", func(d *Desc) error { return d.SetLen(math.MaxInt) }},
		{"SetHeaderMode 8", "header mode", func(d *Desc) error { return d.SetHeaderMode(8) }},
		{"SetHeaderMode 255", "header mode", func(d *Desc) error { return d.SetHeaderMode(255) }},
		{"SetHeaderIndex -1", "AHG index", func(d *Desc) error { return d.SetHeaderIndex(-1) }},
		{"SetHeaderIndex 32", "AHG index", func(d *Desc) error { return d.SetHeaderIndex(32) }},
		{"SetHeaderDWs -1", "header dwords", func(d *Desc) error { return d.SetHeaderDWs(-1) }},
		{"SetHeaderDWs 17", "header dwords", func(d *Desc) error { return d.SetHeaderDWs(17) }},
		{"SetGeneration 4", "generation", func(d *Desc) error { return d.SetGeneration(4) }},
		{"SetGeneration 255", "generation", func(d *Desc) error { return d.SetGeneration(255) }},
		{"Make address 2^48", "address", func(d *Desc) error { _, err := Make(MaxAddr+1, 8, 0); return err }},
		{"Make length -1", "byte count", func(d *Desc) error { _, err := Make(0, -1, 0); return err }},
		{"Make length 16384", "byte count", func(d *Desc) error { _, err := Make(0, MaxByteCount+1, 0); return err }},
		{"Make mapping type 4", "generation", func(d *Desc) error { _, err := Make(0, 8, 4); return err }},
		{"AHGUpdate start bit 32", "AHG start bit", func(d *Desc) error { _, err := AHGUpdate(1, 0, 32, 4); return err }},
		{"AHGUpdate 0 bits", "AHG field length", func(d *Desc) error { _, err := AHGUpdate(1, 0, 0, 0); return err }},
		{"AHGUpdate 17 bits", "AHG field length", func(d *Desc) error { _, err := AHGUpdate(1, 0, 0, 17); return err }},
		{"AHGUpdate past the dword", "AHG field end bit", func(d *Desc) error { _, err := AHGUpdate(1, 0, 20, 16); return err }},
		{"AHGUpdate dword 16", "AHG dword index", func(d *Desc) error { _, err := AHGUpdate(1, 16, 0, 4); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := base
			err := c.call(&d)
			var fe *FieldError
			if !errors.Is(err, ErrRange) || !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FieldError matching ErrRange", err)
			}
			if fe.Field != c.field || !strings.Contains(err.Error(), c.field) {
				t.Errorf("field %q (%v), want %q", fe.Field, err, c.field)
			}
			if fe.Value <= fe.Max && fe.Field != "AHG field length" {
				t.Errorf("value %#x within max %#x", fe.Value, fe.Max)
			}
			if d != base {
				t.Errorf("the refused call changed the descriptor: %+v -> %+v", base, d)
			}
		})
	}
}
