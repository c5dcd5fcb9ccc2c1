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
// With -sink udp each packet leaves as a loopback UDP datagram sent with gather I/O, batched
// with sendmmsg (-udp-batch, -udp-gso; the table adds the send syscalls per packet);
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
	"syscall"
)

func main() {
	ctx, stop := interruptContext()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interruptContext is done at Ctrl-C (SIGINT) or SIGTERM: the run stops, prints the results so
// far and exits with exitInterrupted. The first signal also gives the signals back their default
// action, so that a second Ctrl-C kills a run whose wind-down takes long (the packets in flight
// drain first: with -faults sinkstall=1,stall=1s, a second each).
func interruptContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// Exit statuses.
const (
	exitOK          = 0
	exitFail        = 1   // the run failed, or the receiver saw duplicates, corruption or frames past the count (loss is a warning)
	exitUsage       = 2   // bad flags
	exitInterrupted = 130 // Ctrl-C, as a shell reports 128+SIGINT
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
	switch {
	case errors.Is(err, errInterrupted) || (err != nil && ctx.Err() != nil && !errors.Is(err, errStalled)):
		fmt.Fprintln(stderr, "sdmaperf: interrupted")
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "sdmaperf: %v\n", err)
		return exitFail
	}
	return exitOK
}
