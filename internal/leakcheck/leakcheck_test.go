package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// errors records what a check reports (a goleak.TestingT).
type errors struct{ got []string }

func (e *errors) Error(args ...any) { e.got = append(e.got, fmt.Sprint(args...)) }

// blocked starts a goroutine that runs until release is closed and returns that channel and one
// closed once the goroutine is about to return.
func blocked() (release, ending chan struct{}) {
	release, ending = make(chan struct{}), make(chan struct{})
	go func() {
		<-release
		close(ending)
	}()
	return release, ending
}

// TestVerifyNoneWaitsForAGoroutineEnding: a goroutine that runs until after goleak's own looks
// are over fails goleak.VerifyNone; VerifyNone looks again until it has ended, and passes.
func TestVerifyNoneWaitsForAGoroutineEnding(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	release, _ := blocked()
	var e errors
	goleak.VerifyNone(&e, opt) // the goroutine cannot end meanwhile: nothing released it
	if len(e.got) != 1 || !strings.Contains(e.got[0], "found unexpected goroutines") {
		t.Fatalf("goleak.VerifyNone with a goroutine running: %q, want its report", e.got)
	}
	const after = 500 * time.Millisecond
	start := time.Now()
	time.AfterFunc(after, func() { close(release) })
	VerifyNone(t, opt)
	if d := time.Since(start); d < after {
		t.Errorf("VerifyNone passed after %v, before the goroutine could end (%v)", d, after)
	}
}

// TestVerifyNoneReportsALeak: a goroutine still running once the patience has passed is
// reported with goleak's report (its stack).
func TestVerifyNoneReportsALeak(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	release, ending := blocked()
	var e errors
	verifyNone(&e, 10*time.Millisecond, opt)
	close(release)
	<-ending
	VerifyNone(t, opt)
	if len(e.got) != 1 || !strings.Contains(e.got[0], "found unexpected goroutines") || !strings.Contains(e.got[0], "leakcheck.blocked") {
		t.Fatalf("verifyNone with a goroutine left: %q, want goleak's report naming it", e.got)
	}
}

// runM is a goleak.TestingM whose Run is run.
type runM func() int

func (m runM) Run() int { return m() }

// childEnv, set in a child run of this test binary, names the verifyTestMain case it runs: the
// tests' status and whether the goroutine they leave ends (after 500 ms) or is left.
const childEnv = "LEAKCHECK_TESTMAIN_CASE"

// TestMain runs this package's tests under VerifyTestMain, or, in a child run, one case of
// TestVerifyTestMain.
func TestMain(m *testing.M) {
	if c := os.Getenv(childEnv); c != "" {
		var status int
		var ends bool
		if _, err := fmt.Sscanf(c, "%d %t", &status, &ends); err != nil {
			fmt.Fprintln(os.Stderr, "bad", childEnv, c, err)
			os.Exit(3)
		}
		patience := Patience // the goroutine ending: however late it is run
		if !ends {
			patience = 10 * time.Millisecond
		}
		opt := goleak.IgnoreCurrent()
		verifyTestMain(runM(func() int {
			release, _ := blocked()
			if ends {
				time.AfterFunc(500*time.Millisecond, func() { close(release) })
			}
			return status
		}), patience, opt)
		fmt.Fprintln(os.Stderr, "verifyTestMain returned")
		os.Exit(4)
	}
	VerifyTestMain(m)
}

// TestVerifyTestMain (a child run of the test binary per case): after passing tests, a goroutine
// still ending is waited for (status 0, nothing said) and one left after the patience is
// reported (status 1, goleak's report naming it); after failing tests nothing is looked for
// (their status, nothing said).
func TestVerifyTestMain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int  // the tests' status
		ends     bool // the goroutine the tests leave ends after 500 ms
		want     int
		reported bool
	}{
		{name: "passed, a goroutine ending", status: 0, ends: true, want: 0},
		{name: "passed, a goroutine left", status: 0, want: 1, reported: true},
		{name: "failed, a goroutine left", status: 1, want: 1},
		{name: "failed (2), a goroutine left", status: 2, want: 2},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %t", childEnv, tc.status, tc.ends))
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		err := cmd.Run()
		got := 0
		if ee, ok := err.(*exec.ExitError); ok {
			got = ee.ExitCode()
		} else if err != nil { // not started: under an emulator's -exec the binary runs only through it
			t.Skipf("%s: the test binary does not run as a child: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, got, tc.want, stderr.String())
		}
		said := strings.Contains(stderr.String(), "goleak: Errors on successful test run") && strings.Contains(stderr.String(), "leakcheck.blocked")
		if said != tc.reported || (!tc.reported && stderr.Len() != 0) {
			t.Errorf("%s: said %q, want a report %v", tc.name, stderr.String(), tc.reported)
		}
	}
}

// TestCleanupOption: goleak.Cleanup works as with goleak: VerifyNone runs it with 0 once it has
// looked, and VerifyTestMain runs it with the status it would have exited with instead of
// exiting. goleak.Find refuses the option, so a check that handed it to Find as is looked, and
// failed, for the whole patience and never ran the cleanup.
func TestCleanupOption(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	const patience = 2 * time.Second // the cleanup refused: the whole of it
	var e errors
	cleaned := -1
	start := time.Now()
	verifyNone(&e, patience, opt, goleak.Cleanup(func(code int) { cleaned = code }))
	if len(e.got) != 0 || cleaned != 0 {
		t.Errorf("VerifyNone with nothing left and a Cleanup: reported %q, cleanup ran with %d; want nothing reported and 0", e.got, cleaned)
	}
	if d := time.Since(start); d >= patience {
		t.Errorf("VerifyNone with nothing left and a Cleanup looked for %v, the whole patience", d)
	}
	for _, status := range []int{0, 1} {
		cleaned = -1
		verifyTestMain(runM(func() int { return status }), patience, opt, goleak.Cleanup(func(code int) { cleaned = code }))
		if cleaned != status {
			t.Errorf("VerifyTestMain after tests with status %d, nothing left, and a Cleanup: cleanup ran with %d, want %d", status, cleaned, status)
		}
	}
	// A leak after passing tests: the cleanup gets 1 (and goleak writes its report, naming
	// leakcheck.blocked, to the test binary's stderr).
	cleaned = -1
	var release, ending chan struct{}
	verifyTestMain(runM(func() int { release, ending = blocked(); return 0 }), 10*time.Millisecond, opt, goleak.Cleanup(func(code int) { cleaned = code }))
	close(release)
	<-ending
	if cleaned != 1 {
		t.Errorf("VerifyTestMain after passing tests, a goroutine left, and a Cleanup: cleanup ran with %d, want 1", cleaned)
	}
	VerifyNone(t, opt)
}
