package usdma

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/gosdma/gosdma/sdma"
)

// TestStaticRateControlAsKernel: process_request zeroes the template's PBC.StaticRateControl
// (pbc[2]) only "if (!HFI1_CAP_IS_USET(STATIC_RATE_CTRL))", and the kernel's default cap_mask
// (HFI1_CAP_MASK_DEFAULT) has HFI1_CAP_STATIC_RATE_CTRL in the user capabilities: by default
// every packet of a request carries the template's delay count, the AHG ones too (the entry holds
// packet 0's header; the update words patch PBC dword 0's length only). Submit zeroed it always,
// which the zero Config, documented as the kernel's defaults, did not claim; it does so now only
// with Config.DisableStaticRate.
func TestStaticRateControlAsKernel(t *testing.T) {
	for _, tc := range []struct {
		ahg, disable bool
		want         uint16
	}{{true, false, 0xbeef}, {false, false, 0xbeef}, {true, true, 0}, {false, true, 0}} {
		t.Run(fmt.Sprintf("ahg=%v/disable=%v", tc.ahg, tc.disable), func(t *testing.T) {
			sink := &recSink{}
			dev := testDevice(t, sdma.Config{Sink: sink})
			pq := testQueue(t, Config{Device: dev, DisableAHG: !tc.ahg, DisableStaticRate: tc.disable})
			data := pattern(3*4096+100, 4)
			info, hdr := Message(0, 4096, testTemplate, data)
			hdr.setPBC(2, 0xbeef)
			if err := pq.Submit(context.Background(), info, &hdr, data); err != nil {
				t.Fatal(err)
			}
			if err := waitSlot(t, pq, 0); err != nil {
				t.Fatal(err)
			}
			pkts, _ := sink.packets()
			if len(pkts) != 4 {
				t.Fatalf("%d packets", len(pkts))
			}
			for k, p := range pkts {
				if got := binary.LittleEndian.Uint16(p[4:]); got != tc.want {
					t.Errorf("packet %d: pbc[2] %#x, want %#x", k, got, tc.want)
				}
			}
			if st := pq.Stats(); tc.ahg && st.AHGPackets != 3 {
				t.Fatalf("AHG packets %d, want 3", st.AHGPackets)
			}
		})
	}
}
