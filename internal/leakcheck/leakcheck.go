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
	"time"

	"go.uber.org/goleak"
)

// Patience is how long VerifyNone and VerifyTestMain wait for goroutines to end before they
// report them: a hang guard, not a bound on how fast a goroutine ends.
const Patience = time.Minute

// VerifyNone is goleak.VerifyNone(t, opts...) with Patience: it waits up to Patience for the
// goroutines that opts do not ignore to end, then calls goleak.VerifyNone (which fails t with its
// report if some are left, and runs a goleak.Cleanup's function with 0).
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
	wait(patience, opts...)
	goleak.VerifyNone(t, opts...)
}

// VerifyTestMain is goleak.VerifyTestMain(m, opts...) with Patience: it runs the tests and, if
// they passed, waits up to Patience for the goroutines that opts do not ignore to end; then
// goleak.VerifyTestMain, handed the tests' status, has the last word: it exits 1 with its report
// if the tests passed and goroutines are left, else with the tests' status (or, given a
// goleak.Cleanup, runs its function with that status instead of exiting).
func VerifyTestMain(m goleak.TestingM, opts ...goleak.Option) {
	verifyTestMain(m, Patience, opts...)
}

func verifyTestMain(m goleak.TestingM, patience time.Duration, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		wait(patience, opts...)
	}
	goleak.VerifyTestMain(status(code), opts...)
}

// status is a goleak.TestingM whose tests have run: Run returns their status.
type status int

func (s status) Run() int { return int(s) }

// wait asks goleak.Find(opts...) again until it finds nothing or patience has passed. Each Find
// that finds goroutines looks 20 times over 0.4 s itself. A goleak.Cleanup in opts is overridden:
// Find refuses the option (it would return that refusal at once, for the whole patience), and
// it is for the goleak check that follows the wait.
func wait(patience time.Duration, opts ...goleak.Option) {
	opts = append(opts[:len(opts):len(opts)], goleak.Cleanup(nil))
	deadline := time.Now().Add(patience)
	for goleak.Find(opts...) != nil && time.Now().Before(deadline) {
	}
}
