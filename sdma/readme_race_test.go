//go:build race

package sdma_test

// readmeRace: the race detector makes sync.Pool drop items on purpose (SendWait's waiter pool,
// the mappers' record recycling), so allocation counts are not asserted under -race.
const readmeRace = true
