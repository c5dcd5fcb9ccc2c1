//go:build purego

package prefetch_test

const purego = true
