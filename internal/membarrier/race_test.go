//go:build race

package membarrier

const raceEnabled = true
