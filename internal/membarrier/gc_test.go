//go:build !purego

package membarrier

const purego = false
