//go:build !race

package sdma

const txTestRace = false
