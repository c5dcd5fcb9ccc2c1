//go:build race

package ring

// raceEnabled: the race detector slows the litmus test ~50x; it checks the Go path there.
const raceEnabled = true
