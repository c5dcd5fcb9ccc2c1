// Command report runs gosdma's benchmark suite (package bench) and prints the README's
// performance table: every gosdma figure beside the baseline measured in the same run, and their
// ratio, under a caption naming the command and the machine.
//
//	go run ./bench/report                        # runs the suite: -benchtime 100ms, -count 1
//	go run ./bench/report -benchtime 1s -count 5 # longer, medians of 5
//	go test -run '^$' -bench . ./bench | go run ./bench/report -in -
//
// The suite's output goes to stderr as it runs; the Markdown goes to stdout.
package main

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

func main() {
	benchtime := flag.String("benchtime", "100ms", "go test -benchtime")
	count := flag.Int("count", 1, "go test -count: each figure is the median of this many runs")
	bench := flag.String("bench", ".", "go test -bench")
	in := flag.String("in", "", "read `go test -bench` output from this file (- for stdin) instead of running the suite")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := cmp.Or(checkFlags(*count, *benchtime, flag.Args()), checkInFlags(*in, set)); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(2)
	}
	if err := run(*in, *bench, *benchtime, *count); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// checkFlags refuses what go test would misread or the flag package would silently ignore: a
// count below one, an empty benchtime, and arguments (flag parsing stops at the first, so the
// flags after it would be dropped).
func checkFlags(count int, benchtime string, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q: report takes flags only (-benchtime, -count, -bench, -in)", args[0])
	}
	if count < 1 {
		return fmt.Errorf("-count %d: want 1 or more runs", count)
	}
	if benchtime == "" {
		return fmt.Errorf(`-benchtime "": want a duration (100ms) or an iteration count (1000x)`)
	}
	return nil
}

// checkInFlags refuses the flags of a suite run (-benchtime, -count, -bench) beside -in, which
// reads a run's output instead: they would be ignored.
func checkInFlags(in string, set map[string]bool) error {
	if in == "" {
		return nil
	}
	for _, f := range []string{"benchtime", "count", "bench"} {
		if set[f] {
			return fmt.Errorf("-%s with -in: -in reads a run's output, it runs nothing (give -%s to the go test that made it)", f, f)
		}
	}
	return nil
}

func run(in, bench, benchtime string, count int) error {
	var (
		out io.Reader
		m   meta
	)
	switch in {
	case "":
		args := []string{"test", "-run", "^$", "-bench", bench, "-benchtime=" + benchtime, fmt.Sprintf("-count=%d", count), "./bench"}
		dir, err := moduleRoot()
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Stdout = io.MultiWriter(&buf, os.Stderr)
		cmd.Stderr = os.Stderr
		command := shellJoin(append([]string{"go"}, args...))
		fmt.Fprintf(os.Stderr, "report: running %s in %s\n", command, dir)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("the benchmark run failed: %w", err)
		}
		out = &buf
		m = meta{command: command, count: count, goVer: runtime.Version(), numCPU: runtime.NumCPU()}
	case "-":
		out = os.Stdin
		m = meta{command: "benchmark output read from stdin"}
	default:
		f, err := os.Open(in)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
		m = meta{command: "benchmark output read from " + in}
	}
	s, err := parse(out)
	if err != nil {
		return err
	}
	n, err := write(os.Stdout, s, m)
	if err == nil && n == 0 {
		err = fmt.Errorf("none of the table's benchmarks are in the run")
	}
	return err
}

// moduleRoot is the directory of the go.mod of the module report is run in.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the gosdma module: run from its checkout")
	}
	return filepath.Dir(gomod), nil
}

// shellJoin quotes args for a POSIX shell where they need it.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=./,:", r))
		}) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
