//go:build race

package bench

// raceEnabled: under the race detector sync.Pool drops a share of Puts on purpose, so allocation
// counts are not asserted.
const raceEnabled = true
