package verbs

import "testing"

// TestZeroFlowAndDeviceGetters: the getters of the zero Flow and Device that 2d45b31's census
// left out answer as a flow with no path and a device with no threshold; none panics.
func TestZeroFlowAndDeviceGetters(t *testing.T) {
	var f Flow
	if f.Context() != nil || f.Engine() != nil || f.Sent(PathPIO) != 0 || f.Sent(PathSDMA) != 0 {
		t.Errorf("zero Flow: Context %v, Engine %v, Sent %d, %d", f.Context(), f.Engine(), f.Sent(PathPIO), f.Sent(PathSDMA))
	}
	var d Device
	if d.PIOThreshold() != 0 {
		t.Errorf("zero Device: PIOThreshold %d", d.PIOThreshold())
	}
}
