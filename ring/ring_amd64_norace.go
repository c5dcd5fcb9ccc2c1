//go:build amd64 && gc && !purego && !race

package ring

// raceEnabled: false, so EnqueueSP and Dequeue may publish and release indices with the plain
// MOV stores of their assembly (see ring_amd64_race.go).
const raceEnabled = false
