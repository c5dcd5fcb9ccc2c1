package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"golang.org/x/perf/benchfmt"
)

// suite is the parsed output of one `go test -bench` run of ./bench.
type suite struct {
	goos, goarch, cpu string
	procs             int                             // GOMAXPROCS, from the "-N" name suffix; 1 when absent
	values            map[string]map[string][]float64 // name (no suffix) → unit → one value per -count run
	order             []string                        // names in the order of their first result
}

// parse reads `go test -bench` output in the standard Go benchmark format with benchstat's own
// reader (golang.org/x/perf/benchfmt): the goos/goarch/cpu configuration lines and the results.
// Lines that are not results (logs, PASS, test output) are skipped, as benchstat skips them; a
// result line that is malformed, or has a figure that is not a finite number (NaN, ±Inf), is an
// error naming its line.
func parse(r io.Reader) (*suite, error) {
	in, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	s := &suite{values: map[string]map[string][]float64{}}
	br := benchfmt.NewReader(bytes.NewReader(blankNonBenchmarks(in)), "bench output")
	for br.Scan() {
		var res *benchfmt.Result
		switch rec := br.Result().(type) {
		case *benchfmt.SyntaxError:
			return nil, rec
		case *benchfmt.Result:
			res = rec
		default:
			continue // unit metadata: not a result
		}
		for _, c := range res.Config {
			switch c.Key {
			case "goos":
				s.goos = string(c.Value)
			case "goarch":
				s.goarch = string(c.Value)
			case "cpu":
				s.cpu = string(c.Value)
			}
		}
		base, parts := res.Name.Parts()
		name := "Benchmark" + string(base) // benchfmt drops the prefix; "-N" is left off below
		procs := 1
		for _, p := range parts {
			if len(p) > 0 && p[0] == '-' {
				if n, err := strconv.Atoi(string(p[1:])); err == nil && n > 0 {
					procs = n
				}
				continue
			}
			name += string(p)
		}
		if s.procs != 0 && procs != s.procs {
			// Names differ only by the suffix: the runs would mix.
			return nil, fmt.Errorf("results at GOMAXPROCS %d and %d (several -cpu values): run with one", s.procs, procs)
		}
		s.procs = procs
		units := s.values[name]
		if units == nil {
			units = map[string][]float64{}
			s.values[name] = units
			s.order = append(s.order, name)
		}
		for _, v := range res.Values {
			unit := v.OrigUnit
			if unit == "" {
				unit = v.Unit
			}
			val := v.OrigValue
			if v.OrigUnit == "" {
				val = v.Value
			}
			if math.IsNaN(val) || math.IsInf(val, 0) {
				file, line := res.Pos()
				return nil, fmt.Errorf("%s:%d: %s: %v %s is not a finite figure", file, line, name, val, unit)
			}
			units[unit] = append(units[unit], val)
		}
	}
	if err := br.Err(); err != nil {
		return nil, err
	}
	if len(s.values) == 0 {
		return nil, fmt.Errorf("no benchmark results in the input")
	}
	return s, nil
}

// blankNonBenchmarks empties the lines that begin with "Benchmark" and a lower-case letter
// ("Benchmarks ran on 2 CPUs"): the testing package never names a benchmark so (its isTest), but
// benchfmt reads every line with the prefix as a result and calls it malformed. The line is
// kept, empty, so that an error names its line as counted in the input.
func blankNonBenchmarks(in []byte) []byte {
	lines := bytes.SplitAfter(in, []byte("\n"))
	for i, l := range lines {
		rest, ok := bytes.CutPrefix(l, []byte("Benchmark"))
		if r, _ := utf8.DecodeRune(rest); ok && unicode.IsLower(r) {
			lines[i] = []byte("\n")
		}
	}
	return bytes.Join(lines, nil)
}

// get returns the median of a benchmark's values in unit over the -count runs.
func (s *suite) get(name, unit string) (float64, bool) {
	vs := s.values[name][unit]
	if len(vs) == 0 {
		return 0, false
	}
	vs = slices.Sorted(slices.Values(vs))
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m], true
	}
	return (vs[m-1] + vs[m]) / 2, true
}
