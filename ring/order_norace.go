//go:build !race

package ring

// checkOrder: see order_race.go.
const checkOrder = false
