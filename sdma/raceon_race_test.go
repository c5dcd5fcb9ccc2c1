//go:build race

package sdma

// raceOn reports a -race build (internal tests that must not run under the race detector).
const raceOn = true
