// Package census runs one call of a bad-input census (the tests that call every exported entry
// point with zero values, nil pointers, sizes out of range, closed or never-initialised
// objects): the call runs on its own goroutine under a deadline, so a call that hangs fails its
// test instead of blocking the run, and a panic is caught and returned instead of ending the
// test binary. For tests only; nothing outside _test.go files imports it.
package census

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Timeout bounds one call. A call that is not back by then is reported as a hang; its goroutine
// is left running (there is no way to stop it), so the census goes on with the next call.
const Timeout = 10 * time.Second

// Result is what one call did: it returned (Err is the error it returned, if any), panicked
// (Panicked, with the value in Panic), did not come back within Timeout (Hung), or, run by
// Isolated, ended its process (Crashed: a fatal error no recover catches, such as a fault outside
// the nil page; Output holds what the process printed).
type Result struct {
	Err      error
	Panicked bool
	Panic    any
	Hung     bool
	Crashed  bool
	Output   string
}

// String describes the result for a test's failure message.
func (r Result) String() string {
	switch {
	case r.Crashed:
		return "crashed the process: " + r.Output
	case r.Hung:
		return fmt.Sprintf("hung (no return within %v)", Timeout)
	case r.Panicked:
		return fmt.Sprintf("panicked: %v", r.Panic)
	case r.Err != nil:
		return fmt.Sprintf("error: %v", r.Err)
	}
	return "returned nil"
}

// PanicError returns the panic value as an error if it is one, else nil.
func (r Result) PanicError() error {
	if e, ok := r.Panic.(error); ok {
		return e
	}
	return nil
}

// Call runs f on a new goroutine and waits at most Timeout for it to return or panic.
func Call(f func() error) Result {
	done := make(chan Result, 1)
	go func() {
		var r Result
		finished := false
		defer func() {
			if !finished {
				r.Panicked = true
				r.Panic = recover()
			}
			done <- r
		}()
		r.Err = f()
		finished = true
	}()
	t := time.NewTimer(Timeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r
	case <-t.C:
		return Result{Hung: true}
	}
}

// childEnv names the case an Isolated child runs.
const childEnv = "GOSDMA_CENSUS_CASE"

// resultMark starts the line on which an Isolated child reports its Result.
const resultMark = "census-result: "

// Isolated runs f as Call does, but in a child process (this test binary, running only t's test
// with the case named in its environment), so that a call that ends the process (a fatal fault,
// which no recover catches) fails the case instead of the whole run. t must be a top-level test
// whose every Isolated case runs in the same order in the child: the child runs the test, skips
// every other case, runs this one and exits. The child's Err, Panic and Hung come back as text
// (Err and Panic as errors whose messages are the originals').
func Isolated(t *testing.T, name string, f func() error) Result {
	t.Helper()
	if c, ok := os.LookupEnv(childEnv); ok {
		if c != name {
			return Result{}
		}
		r := Call(f)
		fmt.Printf("\n%s%d %s\n", resultMark, kind(r), strings.ReplaceAll(r.String(), "\n", " "))
		os.Exit(0)
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	cmd := exec.Command(os.Args[0], "-test.run=^"+top+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		// The test binary cannot run itself again: it runs under an emulator (go test -exec
		// qemu-aarch64: another architecture's binary is an exec format error here), so there is
		// no child to isolate the call in, and calling it here could end the whole run.
		t.Skipf("census: %s: the test binary cannot start itself again (%v), as under go test -exec", name, err)
	}
	err := cmd.Wait()
	text := out.String()
	i := strings.LastIndex(text, resultMark)
	if err != nil || i < 0 {
		lines := strings.Split(strings.TrimSpace(text), "\n")
		if len(lines) > 4 {
			lines = lines[:4]
		}
		return Result{Crashed: true, Output: fmt.Sprintf("%v: %s", err, strings.Join(lines, " | "))}
	}
	line, _, _ := strings.Cut(text[i+len(resultMark):], "\n")
	k, msg, _ := strings.Cut(line, " ")
	switch k {
	case "1":
		return Result{Hung: true}
	case "2":
		return Result{Panicked: true, Panic: errors.New(strings.TrimPrefix(msg, "panicked: "))}
	case "3":
		return Result{Err: errors.New(strings.TrimPrefix(msg, "error: "))}
	}
	return Result{}
}

// kind codes a Result's outcome for the child's report line.
func kind(r Result) int {
	switch {
	case r.Hung:
		return 1
	case r.Panicked:
		return 2
	case r.Err != nil:
		return 3
	}
	return 0
}

// Case is one row of a census table: F is the call, Check says whether its Result is the
// documented answer. An alias of an unnamed struct type, so that the tables' rows may be written
// without field names ({"name", f, check}) and go vet's composites check stays quiet.
type Case = struct {
	Name  string
	F     func() error
	Check func(Result) bool
}

// Run runs each case as a subtest, its call through Call, and fails the subtest, showing the
// Result, when Check refuses it.
func Run(t *testing.T, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if r := Call(c.F); !c.Check(r) {
				t.Errorf("%v", r)
			}
		})
	}
}

// OK is a Check: the call returned nil.
func OK(r Result) bool { return !r.Hung && !r.Panicked && r.Err == nil }

// Is returns a Check: the call returned an error matching want (errors.Is).
func Is(want error) func(Result) bool {
	return func(r Result) bool { return !r.Hung && !r.Panicked && errors.Is(r.Err, want) }
}
