// Package soak runs the project's seeded fault-schedule soaks: one subtest per seed, named by it,
// from RVSOAK_SEED on (1 if unset), each of which must leave no goroutine behind. Test code only:
// the packages' soak tests import it.
package soak

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/gosdma/gosdma/internal/leakcheck"
)

// Seeds runs a soak over seeds seeds (short with -short), from RVSOAK_SEED on (1 if unset), each
// in a subtest named by its seed that must leave no goroutine behind; run gets the seed and arg
// (argShort with -short: the soak's length). A failing seed is rerun alone with RVSOAK_SEED set
// to it and -run naming its subtest.
func Seeds[A any](t *testing.T, seeds, short int, arg, argShort A, run func(t *testing.T, seed uint64, arg A)) {
	t.Helper()
	if testing.Short() {
		seeds, arg = short, argShort
	}
	base := uint64(1)
	if v := os.Getenv("RVSOAK_SEED"); v != "" {
		b, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("RVSOAK_SEED=%q: %v", v, err)
		}
		base = b
	}
	for s := range seeds {
		seed := base + uint64(s)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
			run(t, seed, arg)
		})
	}
}
