package desc

import "testing"

// The second bad-input census of package desc (badinput_test.go has the first: every setter and
// builder given a value that does not fit its field).

// TestCensusEditDescsMode: EditDescs of every mode a descriptor's 3-bit field holds is the
// kernel's skip (hfi1: submit_tx skips ahg_mode>>1 for a mode above SDMA_AHG_APPLY_UPDATE1, the
// mode read from qw1 15:13), so at most 3; a value above 7 is not masked, as its doc says (the
// mask would cost an AND per packet): callers mask a raw value with HeaderModeMask.
func TestCensusEditDescsMode(t *testing.T) {
	for _, c := range []struct {
		mode HeaderMode
		want int
	}{
		{AHGNoAHG, 0}, {AHGCopy, 0}, {AHGApplyUpdate1, 0}, {AHGApplyUpdate2, 1}, {AHGApplyUpdate3, 2},
		{5, 2}, {6, 3}, {7, 3}, // undefined modes: what the kernel's skip computes
		{200, 100}, {255, 127}, // not masked (documented)
	} {
		if got := EditDescs(c.mode); got != c.want {
			t.Errorf("EditDescs(%d) = %d, want %d", c.mode, got, c.want)
		}
		var d Desc
		d.Qw1 = uint64(c.mode) << HeaderModeShift & HeaderModeSMask // the field keeps 3 bits
		want := EditDescs(c.mode & HeaderMode(HeaderModeMask))
		if got := EditDescs(d.HeaderMode()); got != want || got > 3 {
			t.Errorf("EditDescs of mode %d stored in a descriptor = %d, want %d (at most 3)", c.mode, got, want)
		}
	}
}
