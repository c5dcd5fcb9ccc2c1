//go:build !race

package alloc_test

const raceEnabled = false
