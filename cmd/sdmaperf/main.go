// Command sdmaperf measures gosdma's send-DMA path the way perftest measures verbs
// (ib_send_bw, ib_send_lat) and dpdk-test measures rings: bandwidth, message rate and latency
// percentiles over engines, producers, packet sizes, fragments, mappers, allocators and sinks.
//
//	go run ./cmd/sdmaperf            # bandwidth, software engine, a few seconds
//	go run ./cmd/sdmaperf -h         # every flag with its default
//
// When the ring is full a producer blocks in SendWait (-send block, the default), sleeps the
// kernel's way (-send sleep: Send with its IOWait, whose sleeper is ParkOrRetry, hfi1's qp.c
// iowait_sleep, and a resend from TxHead after the wakeup) or spins on Send (-send spin); the
// report counts ring-full events, sleeps and wakeups.
//
// With -sink udp each packet leaves as a loopback UDP datagram sent with sendmsg gather I/O;
// "sdmaperf -server" is the matching receiver, which checks sequence numbers and checksums and
// reports loss. Both talk to loopback addresses only and stop by themselves.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // the run failed, or the receiver saw loss or corruption
	exitUsage = 2 // bad flags
)

// run is the whole tool, callable in-process (tests do).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		if errors.Is(err, errHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "sdmaperf: %v\n", err)
		return exitUsage
	}
	if cfg.Server {
		err = runServer(ctx, cfg, stdout, stderr)
	} else {
		err = runClient(ctx, cfg, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sdmaperf: %v\n", err)
		return exitFail
	}
	return exitOK
}
