//go:build !race

package usdma

const raceEnabled = false
