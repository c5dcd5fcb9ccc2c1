package sdma

import (
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/internal/leakcheck"
)

// Every test and example in the package must leave no goroutine behind: each device a test
// opens is closed, and Close stops every goroutine the device started.
func TestMain(m *testing.M) {
	goidCalls = new(atomic.Int64) // before any goroutine of the package's runs
	leakcheck.VerifyTestMain(m)
}
