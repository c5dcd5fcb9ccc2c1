//go:build race

package alloc_test

// raceEnabled: under the race detector sync.Pool drops a share of Puts on purpose, so Pool's Get
// allocates now and then and its zero-allocation test is skipped.
const raceEnabled = true
