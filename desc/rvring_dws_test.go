package desc

import "testing"

// TestHeaderDWsSixteen: user_sdma's AHG packets use a 64-byte header (sizeof(struct
// hfi1_pkt_header)), and _sdma_txreq_ahgadd stores ahg_hlen >> 2 = 16 masked to the 4-bit
// HEADER_DWS field, i.e. 0, which the chip (and sdma's hardware model) reads as 16 dwords. desc
// refused SetHeaderDWs(16) with ErrRange, where AHGUpdate's field length, the same 16-as-0
// convention, accepts 16: a port of _sdma_txreq_ahgadd through desc's setters failed on the
// kernel's most common AHG header. Now 16 is stored as 0, and 17 is still refused.
func TestHeaderDWsSixteen(t *testing.T) {
	var d Desc
	if err := d.SetHeaderDWs(16); err != nil {
		t.Fatalf("SetHeaderDWs(16): %v", err)
	}
	if d.Qw1 != 0 || d.HeaderDWs() != 0 {
		t.Fatalf("16 dwords stored as %#x (field %d), want the field 0", d.Qw1, d.HeaderDWs())
	}
	d.Qw1 = 5 << HeaderDWsShift
	if err := d.SetHeaderDWs(16); err != nil || d.HeaderDWs() != 0 {
		t.Fatalf("SetHeaderDWs(16) over 5: err %v, field %d, want nil and 0", err, d.HeaderDWs())
	}
	before := d
	if err := d.SetHeaderDWs(17); err == nil || d != before {
		t.Fatalf("SetHeaderDWs(17): err %v, descriptor %+v -> %+v, want ErrRange and no change", err, before, d)
	}
}
