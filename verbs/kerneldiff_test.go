package verbs

import (
	"testing"

	"github.com/gosdma/gosdma/sdma"
)

// pio_select_send_context_vl picks map[vl & mask]->ksc[selector & e->mask], where pio_map_init
// fills each VL's power-of-two table round-robin from that VL's contexts (ksc[j] is context
// j % n): with 3 kernel contexts on one VL, selectors 0..7 go to contexts 0 1 2 0 0 1 2 0.
// NewFlow took selector % n (0 1 2 0 1 2 0 1), so a differential model of the kernel saw flows
// on other contexts than the kernel puts them (and so other credit and ordering interactions).
func TestPIOContextSelectionAsKernel(t *testing.T) {
	sd, err := sdma.NewDevice(sdma.Config{Sink: newOrderSink(), Engines: 1, NumVLs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	d, err := New(Config{SDMA: sd, Contexts: 3, ManualPIO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want := []int{0, 1, 2, 0, 0, 1, 2, 0}
	for sel, w := range want {
		if got := d.NewFlow(uint32(sel), 0).sc; got != d.Context(w) {
			t.Errorf("selector %d: context %d, kernel's %d", sel, got.Index(), w)
		}
	}
}

// The VL half of pio_select_send_context_vl: the kernel gives each VL its own contexts
// (pio_map_init: num_kernel_send_contexts / num_vls each, extras from the last VL down) and picks
// map[vl & mask] first. NewFlow used to let every VL share all the contexts. With 4 contexts on
// 2 VLs the kernel puts VL 0 on contexts 0 and 1 and VL 1 on 2 and 3; so does NewFlow now.
func TestPIOContextPerVLAsKernel(t *testing.T) {
	sd, err := sdma.NewDevice(sdma.Config{Sink: newOrderSink(), Engines: 2, NumVLs: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	d, err := New(Config{SDMA: sd, Contexts: 4, ManualPIO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for vl, want := range [][]int{{0, 1, 0, 1}, {2, 3, 2, 3}} {
		for sel, w := range want {
			if got := d.NewFlow(uint32(sel), uint8(vl)).sc; got != d.Context(w) {
				t.Errorf("vl %d selector %d: context %d, kernel's %d", vl, sel, got.Index(), w)
			}
		}
	}
}

// TestPIOMapLayout: pio_map_init's layout without vl_scontexts, and pio_select_send_context_vl
// on it: n / numVLs contexts a VL, the extras from the last VL down, each VL's table a power of
// two filled round robin over its own run; a VL past the actual ones takes the repeated slot
// vl & mask; one at or past num_vls (8), or with no context, gets context 0 (vld[0].sc).
func TestPIOMapLayout(t *testing.T) {
	for _, c := range []struct {
		n, vls int
		want   [][]int // per VL: the context of selectors 0..7
	}{
		{1, 1, [][]int{{0, 0, 0, 0, 0, 0, 0, 0}}},
		{3, 1, [][]int{{0, 1, 2, 0, 0, 1, 2, 0}}},
		{4, 2, [][]int{{0, 1, 0, 1, 0, 1, 0, 1}, {2, 3, 2, 3, 2, 3, 2, 3}}},
		{5, 2, [][]int{{0, 1, 0, 1, 0, 1, 0, 1}, {2, 3, 4, 2, 2, 3, 4, 2}}},
		{4, 3, [][]int{{0, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1, 1, 1}, {2, 3, 2, 3, 2, 3, 2, 3}}},
		{1, 2, [][]int{{0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}}}, // VL 0 has none: context 0
	} {
		m := buildPIOMap(c.n, c.vls)
		for vl, want := range c.want {
			for sel, w := range want {
				if got := m.index(uint32(sel), uint8(vl)); got != w {
					t.Errorf("%d contexts on %d VLs: vl %d selector %d: context %d, kernel's %d", c.n, c.vls, vl, sel, got, w)
				}
			}
		}
		// A vl from the actual VLs up to num_vls (8) takes slot vl & mask, which repeats VL
		// (vl & mask) % vls (pio_map_init's map[i % num_vls]); from 8 on, context 0.
		mask := 1
		for mask < c.vls {
			mask <<= 1
		}
		for vl := c.vls; vl < 8; vl++ {
			for sel := range 8 {
				if got, w := m.index(uint32(sel), uint8(vl)), c.want[(vl&(mask-1))%c.vls][sel]; got != w {
					t.Errorf("%d contexts on %d VLs: vl %d selector %d: context %d, kernel's %d", c.n, c.vls, vl, sel, got, w)
				}
			}
		}
		for _, vl := range []uint8{8, 9, 255} {
			if got := m.index(5, vl); got != 0 {
				t.Errorf("%d contexts on %d VLs: vl %d (past num_vls) got context %d, want 0", c.n, c.vls, vl, got)
			}
		}
	}
}
