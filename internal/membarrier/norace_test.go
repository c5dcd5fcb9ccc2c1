//go:build !race

package membarrier

const raceEnabled = false
