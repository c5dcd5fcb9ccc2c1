//go:build race

package dma

// raceEnabled: the race detector makes sync.Pool drop items at random, so allocation counts are
// not asserted under -race.
const raceEnabled = true
