package main

import (
	"strings"
	"testing"
)

// TestRegisteredTwins: the suite runs BenchmarkPayload and BenchmarkLatency on registered memory
// too (impl=sdma/mem=registered), as BenchmarkPacketPath; the report printed the packet path's
// twins and silently left out the payload's and the latency's (neither a row nor a "left out"
// count), against "every gosdma figure beside the baseline of the same run".
func TestRegisteredTwins(t *testing.T) {
	const in = `goos: linux
goarch: amd64
cpu: AMD EPYC
BenchmarkPayload/impl=sdma/size=256-2        	  646857	       190.2 ns/op	1000 MB/s
BenchmarkPayload/impl=sdma/mem=registered/size=256-2        	  646857	       190.2 ns/op	1250 MB/s
BenchmarkPayload/impl=copy/size=256-2        	  646857	       19.2 ns/op	10000 MB/s
BenchmarkLatency/impl=sdma-2                 	   10000	     14073 ns/op	      1500 p50-ns	      3000 p99-ns
BenchmarkLatency/impl=sdma/mem=registered-2  	   10000	     14073 ns/op	      1200 p50-ns	      2400 p99-ns
BenchmarkLatency/impl=pingpong-2             	  157554	      1214 ns/op	       200.0 p50-ns	       600.0 p99-ns
`
	s, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	n, err := write(&b, s, meta{command: "x", count: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| Payload bandwidth, 256 B | sdma: 1000 MB/s | copy: 10000 MB/s | 10.0× |",
		"| Payload bandwidth, 256 B | sdma, registered: 1250 MB/s | copy: 10000 MB/s | 8.00× |",
		"| Latency, p50 | sdma: 1500 ns | ping-pong: 200 ns | 7.50× |",
		"| Latency, p50 | sdma, registered: 1200 ns | ping-pong: 200 ns | 6.00× |",
		"| Latency, p99 | sdma, registered: 2400 ns | ping-pong: 600 ns | 4.00× |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if n != 6 {
		t.Errorf("%d rows, want 6:\n%s", n, out)
	}
}
