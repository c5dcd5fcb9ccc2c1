//go:build race

package sdma

// txTestRace: the race detector makes sync.Pool drop items, so the mappers' record recycling
// allocates; allocation counts are not asserted under -race.
const txTestRace = true
