//go:build amd64 && gc && !purego && race

package ring

// raceEnabled: the race detector does not see stores made by assembly, so under -race the ring
// publishes and releases its indices with sync/atomic only (the assembly writers still write
// the slots, which the detector need not see: they are ordered by the atomic tail).
const raceEnabled = true
