// Package leakcheck checks that tests leave no goroutine behind, as goleak does, but with the
// patience of a hang guard. Test code only: the packages' tests import it.
//
// A goroutine told to end (a closed channel, a cancelled context, a Close that waited for its
// WaitGroup, which the goroutine leaves before it has returned) is gone only once the scheduler
// has run it to its end. goleak's VerifyNone and VerifyTestMain look for 0.4 s (20 looks, the
// sleeps between them doubling from 1 us to 100 ms; goleak v1.3.0 has no option to change
// either), a timing assumption that a loaded machine (-race on a shared 2-core runner,
// qemu-aarch64) can break: a goroutine that was ending is then reported as a leak. VerifyNone
// and VerifyTestMain here look again until no goroutine is left or Patience has passed, and then
// report what goleak reports. A test that leaks fails a minute late; one that does not costs what
// goleak's check costs.
package leakcheck

import (
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/goleak"
)

// Patience is how long VerifyNone and VerifyTestMain wait for goroutines to end before they
// report them: a hang guard, not a bound on how fast a goroutine ends.
const Patience = time.Minute

// VerifyNone is goleak.VerifyNone(t, opts...) with Patience: it fails t (t.Error) with goleak's
// report if goroutines that opts do not ignore are still running after Patience.
func VerifyNone(t goleak.TestingT, opts ...goleak.Option) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	verifyNone(t, Patience, opts...)
}

func verifyNone(t goleak.TestingT, patience time.Duration, opts ...goleak.Option) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	if err := find(patience, opts...); err != nil {
		t.Error(err)
	}
}

// VerifyTestMain is goleak.VerifyTestMain(m, opts...) with Patience: it runs the tests and, if
// they passed, exits 1 with goleak's report if goroutines that opts do not ignore are still
// running after Patience; else it exits with the tests' status.
func VerifyTestMain(m goleak.TestingM, opts ...goleak.Option) {
	os.Exit(verifyTestMain(m, os.Stderr, Patience, opts...))
}

func verifyTestMain(m goleak.TestingM, stderr io.Writer, patience time.Duration, opts ...goleak.Option) int {
	code := m.Run()
	if code == 0 {
		if err := find(patience, opts...); err != nil {
			fmt.Fprintf(stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	return code
}

// find is goleak.Find(opts...), asked again until it finds nothing or patience has passed; it
// returns goleak's last report. Each Find that finds goroutines looks 20 times over 0.4 s itself.
func find(patience time.Duration, opts ...goleak.Option) error {
	deadline := time.Now().Add(patience)
	for {
		err := goleak.Find(opts...)
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
	}
}
