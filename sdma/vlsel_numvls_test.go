package sdma_test

import (
	"testing"

	"github.com/gosdma/gosdma/sdma"
)

// TestSelectEngineVLPastOperational: hfi1's sdma_select_engine_vl refuses (engine 0) only a vl
// at or past the module parameter num_vls (default HFI1_MAX_VLS_SUPPORTED, 8); the map itself is
// built for the operational VLs (sdma_map_init(dd, port, ppd->vls_operational, NULL)) and a vl
// between the two indexes map[vl & mask], one of the repeated slots past the actual VLs. Here a
// vl at or past Config.NumVLs got engine 0, so those repeated slots (internal/vlmap builds them)
// were never reached: with 16 engines on 3 VLs, vl 5 takes VL 1's engines in the kernel and took
// engine 0 here. A vl at or past MaxVLs (num_vls' default) gets engine 0.
func TestSelectEngineVLPastOperational(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 16, NumVLs: 3, Manual: true, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for sel := uint32(0); sel < 8; sel++ {
		// VLs 0..2 have 5, 5 and 6 engines (tables of 8); slot 3 repeats VL 0; vl 5 & 3 = VL 1.
		if got, want := dev.SelectEngine(sel, 5), dev.SelectEngine(sel, 1); got != want {
			t.Errorf("selector %d, vl 5: engine %d, the kernel's (map[5 & 3] = VL 1's) %d", sel, got.Index(), want.Index())
		}
	}
}

// TestSelectEngineVLAtMaxVLs: a vl at or past MaxVLs (the kernel's num_vls default) gets engine
// 0 whatever the selector, on a map of any number of VLs.
func TestSelectEngineVLAtMaxVLs(t *testing.T) {
	for _, vls := range []int{1, 3, 8} {
		dev, err := sdma.NewDevice(sdma.Config{Engines: 16, NumVLs: vls, Manual: true, RingSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		for sel := uint32(0); sel < 16; sel++ {
			for _, vl := range []uint8{sdma.MaxVLs, sdma.MaxVLs + 1, 255} {
				if got := dev.SelectEngine(sel, vl).Index(); got != 0 {
					t.Errorf("%d VLs, selector %d, vl %d: engine %d, want 0", vls, sel, vl, got)
				}
			}
		}
		_ = dev.Close()
	}
}
