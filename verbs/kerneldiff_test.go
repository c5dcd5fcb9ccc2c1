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

