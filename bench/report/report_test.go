package main

import (
	"os"
	"strings"
	"testing"
)

// canned is benchmark output as `go test -bench -count=2` prints it, cut down: two runs of each
// benchmark (the report takes the median), a benchmark that logged before its result, a failed
// line, and no asm ring (as on arm64).
const canned = `goos: linux
goarch: amd64
pkg: github.com/gosdma/gosdma/bench
cpu: AMD EPYC
BenchmarkRingSPSC/impl=go/mode=same/bulk=8-2          	 4664746	        25.50 ns/op	5019.96 MB/s	         3.000 ns/desc	       0 B/op	       0 allocs/op
BenchmarkRingSPSC/impl=go/mode=same/bulk=8-2          	 4664746	        25.50 ns/op	5019.96 MB/s	         5.000 ns/desc	       0 B/op	       0 allocs/op
BenchmarkRingSPSC/impl=chan/mode=same/bulk=8-2        	  594195	       232.6 ns/op	 550.23 MB/s	        40.00 ns/desc	       0 B/op	       0 allocs/op
BenchmarkRingSPSC/impl=chan/mode=same/bulk=8-2        	  594195	       232.6 ns/op	 550.23 MB/s	        40.00 ns/desc	       0 B/op	       0 allocs/op
BenchmarkPacketPath/alloc=none/mapper=none/impl=copy-2         	18080228	         5.000 ns/op	50963.45 MB/s	         5.000 ns/pkt	       0 B/op	       0 allocs/op
BenchmarkPacketPath/alloc=slab/mapper=iommu/hw=inline-2        	  238324	       460.0 ns/op	 643.52 MB/s	       460.0 ns/pkt	       0 B/op	       0 allocs/op
BenchmarkPacketPath/alloc=list/mapper=direct/hw=goroutine-2
    path_test.go:1: a log line
BenchmarkPacketPath/alloc=list/mapper=direct/hw=goroutine-2    	   37120	      2000 ns/op	 108.04 MB/s	      2000 ns/pkt	       1 B/op	       0 allocs/op
--- FAIL: BenchmarkSomething
BenchmarkPayload/impl=sdma/size=4096-2       	  391076	       256.3 ns/op	16000 MB/s	       0 B/op	       0 allocs/op
BenchmarkPayload/impl=copy/size=4096-2       	 3149275	        39.55 ns/op	100000 MB/s	       0 B/op	       0 allocs/op
BenchmarkLatency/impl=sdma-2                 	   19536	      8835 ns/op	      1500 p50-ns	      3000 p99-ns	       0 B/op	       0 allocs/op
BenchmarkLatency/impl=pingpong-2             	  135436	      1080 ns/op	       200.0 p50-ns	       600.0 p99-ns
PASS
ok  	github.com/gosdma/gosdma/bench	15.021s
`

func TestParse(t *testing.T) {
	s, err := parse(strings.NewReader(canned))
	if err != nil {
		t.Fatal(err)
	}
	if s.goos != "linux" || s.goarch != "amd64" || s.cpu != "AMD EPYC" || s.procs != 2 {
		t.Errorf("header: goos %q goarch %q cpu %q procs %d", s.goos, s.goarch, s.cpu, s.procs)
	}
	for _, c := range []struct {
		name, unit string
		want       float64
	}{
		{"BenchmarkRingSPSC/impl=go/mode=same/bulk=8", "ns/desc", 4}, // median of 3 and 5
		{"BenchmarkRingSPSC/impl=chan/mode=same/bulk=8", "MB/s", 550.23},
		{"BenchmarkPacketPath/alloc=list/mapper=direct/hw=goroutine", "B/op", 1},
		{"BenchmarkLatency/impl=pingpong", "p99-ns", 600},
	} {
		if got, ok := s.get(c.name, c.unit); !ok || got != c.want {
			t.Errorf("%s %s = %v, %v; want %v", c.name, c.unit, got, ok, c.want)
		}
	}
	if _, ok := s.get("BenchmarkLatency/impl=pingpong", "allocs/op"); ok {
		t.Error("a unit the benchmark did not report has a value")
	}
	if len(s.order) != 9 || s.order[0] != "BenchmarkRingSPSC/impl=go/mode=same/bulk=8" {
		t.Errorf("order %q", s.order)
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := parse(strings.NewReader("PASS\nok  \tx\t0.1s\n")); err == nil {
		t.Error("no results: no error")
	}
	if _, err := parse(strings.NewReader("BenchmarkX-2 10 abc ns/op\n")); err == nil {
		t.Error("a bad value: no error")
	}
	if _, err := parse(strings.NewReader("BenchmarkX 10 1 ns/op\nBenchmarkX-4 10 1 ns/op\n")); err == nil {
		t.Error("-cpu 1,4: no error")
	}
}

func TestParseNamesAndProcs(t *testing.T) {
	for _, c := range []struct {
		in    string
		name  string
		procs int
	}{
		{"BenchmarkX/bulk=8-16 10 1 ns/op\n", "BenchmarkX/bulk=8", 16},
		{"BenchmarkX/bulk=8 10 1 ns/op\n", "BenchmarkX/bulk=8", 1},
		{"BenchmarkX/a-b 10 1 ns/op\n", "BenchmarkX/a-b", 1},
		{"BenchmarkX/a-b-2 10 1 ns/op\n", "BenchmarkX/a-b", 2},
	} {
		s, err := parse(strings.NewReader(c.in))
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if _, ok := s.values[c.name]; !ok || s.procs != c.procs {
			t.Errorf("%q: names %v, procs %d; want %q, %d", c.in, s.order, s.procs, c.name, c.procs)
		}
	}
}

func TestWrite(t *testing.T) {
	s, err := parse(strings.NewReader(canned))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	n, err := write(&b, s, meta{command: "go test -bench . ./bench", count: 2, goVer: "go1.26", numCPU: 2})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Command: `go test -bench . ./bench`",
		"Machine: AMD EPYC (2 CPUs), linux/amd64, GOMAXPROCS=2, go1.26",
		"the median of 2 runs",
		"| Benchmark | gosdma | Baseline (same run) | Ratio |",
		"| Ring SPSC, one goroutine, bulk=8 | go: 4.00 ns/desc | chan: 40.0 ns/desc | 0.10× |",
		"| Packet path, hw=inline | slab, iommu: 460 ns/pkt, 0 allocs/op | copy: 5.00 ns/pkt | 92.0× |",
		"| Packet path, hw=goroutine | list, direct: 2000 ns/pkt, 0 allocs/op | copy: 5.00 ns/pkt | 400× |",
		"| Payload bandwidth, 4096 B | sdma: 16000 MB/s | copy: 100000 MB/s | 6.25× |", // a ratio of times
		"| Latency, p50 | sdma: 1500 ns | ping-pong: 200 ns | 7.50× |",
		"| Latency, p99 | sdma: 3000 ns | ping-pong: 600 ns | 5.00× |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if n != 6 {
		t.Errorf("%d rows, want 6", n)
	}
	// 24 ring comparisons, of which one is in the run; the workiva one of go has no baseline.
	if !strings.Contains(out, "\n23 comparisons left out: not in this run.\n") {
		t.Errorf("left-out count missing in\n%s", out)
	}
}

// TestWholeRun reads a whole suite's output (-benchtime 100ms, 2 shared cores) and checks every
// comparison of the table is there.
func TestWholeRun(t *testing.T) {
	f, err := os.Open("testdata/amd64-2cpu.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	n, err := write(&b, s, meta{command: "go test -run '^$' -bench . -benchtime=100ms ./bench", count: 1})
	if err != nil {
		t.Fatal(err)
	}
	// 24 ring, 7+6 packet path, 3 payload, 2 latency.
	if want := 24 + 13 + 3 + 2; n != want || strings.Contains(b.String(), "left out") {
		t.Errorf("%d rows, want %d:\n%s", n, want, b.String())
	}
	if got := strings.Count(b.String(), "\n| "); got != n+1 {
		t.Errorf("%d table lines for %d rows", got, n)
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"go", "test", "-run", "^$", "-bench", ".", "-benchtime=100ms", "it's", ""})
	want := `go test -run '^$' -bench . -benchtime=100ms 'it'\''s' ''`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestCheckFlags(t *testing.T) {
	if err := checkFlags(1, "100ms", nil); err != nil {
		t.Errorf("good flags: %v", err)
	}
	for _, c := range []struct {
		count     int
		benchtime string
		args      []string
		want      string
	}{
		{1, "100ms", []string{"extra", "-in", "x"}, `unexpected argument "extra"`},
		{0, "100ms", nil, "-count 0"},
		{-2, "100ms", nil, "-count -2"},
		{1, "", nil, "-benchtime"},
	} {
		err := checkFlags(c.count, c.benchtime, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkFlags(%d, %q, %q) = %v, want an error with %q", c.count, c.benchtime, c.args, err, c.want)
		}
	}
}
