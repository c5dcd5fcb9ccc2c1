package leakcheck

import (
	"bytes"
	"fmt"
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

// TestVerifyTestMain: after passing tests, a goroutine still ending is waited for (status 0,
// nothing said) and one left after the patience is reported (status 1); after failing tests
// nothing is looked for (their status, nothing said).
func TestVerifyTestMain(t *testing.T) {
	opt := goleak.IgnoreCurrent()
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
	} {
		patience := Patience // the goroutine ending: however late it is run
		if !tc.ends {
			patience = 10 * time.Millisecond
		}
		var release, ending chan struct{}
		var stderr bytes.Buffer
		got := verifyTestMain(runM(func() int {
			release, ending = blocked()
			if tc.ends {
				time.AfterFunc(500*time.Millisecond, func() { close(release) })
			}
			return tc.status
		}), &stderr, patience, opt)
		if !tc.ends {
			close(release)
		}
		<-ending
		if got != tc.want {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, got, tc.want, stderr.String())
		}
		if said := strings.Contains(stderr.String(), "goleak: Errors on successful test run"); said != tc.reported || (!tc.reported && stderr.Len() != 0) {
			t.Errorf("%s: said %q, want a report %v", tc.name, stderr.String(), tc.reported)
		}
	}
	VerifyNone(t, opt)
}
