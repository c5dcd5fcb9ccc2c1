//go:build purego

package membarrier

const purego = true
