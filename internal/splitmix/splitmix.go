// Package splitmix holds SplitMix64's output function, the cheap, well-mixed hash of a counter
// that the fault injectors of dma, sdma, sdma/sdmatest and pio draw their random decisions from
// (one definition, so that a seed means the same draws everywhere).
package splitmix

// Gamma is SplitMix64's state increment (the golden ratio in 64 bits): the generator's state
// advances by it, and Mix of the state is the next output.
const Gamma = 0x9e3779b97f4a7c15

// Mix is SplitMix64's output function (its finaliser): a bijection of z whose bits all depend on
// every bit of z.
func Mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Threshold scales a probability to the bound a draw is compared with: Next(&s)>>1 < Threshold(p)
// holds with probability p (0 for p <= 0; every draw for p >= 1).
func Threshold(p float64) uint64 {
	switch {
	case p <= 0:
		return 0
	case p >= 1:
		return 1<<63 + 1
	}
	return uint64(p * (1 << 63))
}

// Next advances the generator state *s by Gamma and returns its next output.
func Next(s *uint64) uint64 {
	*s += Gamma
	return Mix(*s)
}
