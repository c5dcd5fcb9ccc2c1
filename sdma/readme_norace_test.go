//go:build !race

package sdma_test

const readmeRace = false
