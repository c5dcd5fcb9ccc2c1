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

// TestThreshold: the bounds (0 never hits, 1 always) and a rate's share of draws.
func TestThreshold(t *testing.T) {
	var s uint64
	hits := 0
	for range 100000 {
		x := Next(&s) >> 1
		if x < Threshold(0) || x >= Threshold(1) {
			t.Fatalf("draw %#x: rate 0 hit or rate 1 missed", x)
		}
		if x < Threshold(0.25) {
			hits++
		}
	}
	if hits < 24000 || hits > 26000 {
		t.Fatalf("rate 0.25: %d hits of 100000", hits)
	}
}
