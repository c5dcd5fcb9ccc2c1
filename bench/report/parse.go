package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// suite is the parsed output of one `go test -bench` run of ./bench.
type suite struct {
	goos, goarch, cpu string
	procs             int                             // GOMAXPROCS, from the "-N" name suffix; 1 when absent
	values            map[string]map[string][]float64 // name (no suffix) → unit → one value per -count run
	order             []string                        // names in the order of their first result
}

// parse reads `go test -bench` output (the standard format: "BenchmarkName-P  N  v unit  v unit
// ...", and the goos/goarch/cpu header lines). Lines it does not know are skipped.
func parse(r io.Reader) (*suite, error) {
	s := &suite{procs: 0, values: map[string]map[string][]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok {
			switch k {
			case "goos":
				s.goos = v
			case "goarch":
				s.goarch = v
			case "cpu":
				s.cpu = v
			}
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			continue // a name alone (the benchmark logged before its result), or not a result
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue
		}
		name, procs := splitProcs(f[0])
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
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %q of %s: %w", name, f[i], f[i+1], err)
			}
			units[f[i+1]] = append(units[f[i+1]], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(s.values) == 0 {
		return nil, fmt.Errorf("no benchmark results in the input")
	}
	return s, nil
}

// splitProcs splits the "-N" GOMAXPROCS suffix the testing package appends to a name.
func splitProcs(name string) (string, int) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name, 1
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 1 {
		return name, 1
	}
	return name[:i], n
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
