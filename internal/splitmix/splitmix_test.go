package splitmix

import "testing"

// TestMixKnownOutputs: the SplitMix64 generator seeded with 0 (state += Gamma, output Mix(state))
// gives the reference implementation's first outputs.
func TestMixKnownOutputs(t *testing.T) {
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	var s uint64
	for i, w := range want {
		s += Gamma
		if got := Mix(s); got != w {
			t.Fatalf("output %d: %#x, want %#x", i, got, w)
		}
	}
}
