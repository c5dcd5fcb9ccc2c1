//go:build race

package alloc

// raceOn: under the race detector sync.Pool drops a share of Puts on purpose, so Pool makes more
// objects than it needs and its memory bound is not asserted.
const raceOn = true
