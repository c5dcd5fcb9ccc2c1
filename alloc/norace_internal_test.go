//go:build !race

package alloc

const raceOn = false
