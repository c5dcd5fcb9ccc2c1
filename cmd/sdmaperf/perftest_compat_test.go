package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPathRefusesOutputFlags: -path pio and auto print their own path table (or -json), so the
// output flags of the packet run (--output, -csv, --report_gbits, -H, -hist, -plot,
// --run_infinitely, -http) would be ignored without a word; -plot then wrote no file and the run
// exited 0. Each is refused with a usage error naming the flag.
func TestPathRefusesOutputFlags(t *testing.T) {
	for _, path := range []string{"pio", "auto"} {
		for _, extra := range [][]string{
			{"--output=bandwidth"}, {"-csv"}, {"--report_gbits"}, {"-H"}, {"-hist", "x.hgrm"},
			{"-plot", "x.svg"}, {"--run_infinitely"}, {"-http", "localhost:0"},
		} {
			args := append([]string{"-path", path, "-size", "64"}, extra...)
			_, err := parseConfig(args, new(bytes.Buffer))
			var ue *usageError
			if assert.ErrorAs(t, err, &ue, "%v", args) {
				name := strings.TrimLeft(strings.SplitN(extra[0], "=", 2)[0], "-")
				assert.Contains(t, ue.Error(), "-"+name, "%v: the error names the flag", args)
			}
		}
	}
	_, err := parseConfig([]string{"-path", "pio", "-size", "64", "-json"}, new(bytes.Buffer))
	assert.NoError(t, err, "-json has a -path report")
}

// TestPathIterationsOverAllProducers: -n is "packets per size, over all producers" with -path pio
// and auto too. The path producers each sent -n / producers, so -n 7 over 2 producers sent 6.
func TestPathIterationsOverAllProducers(t *testing.T) {
	for _, path := range []string{"pio", "auto"} {
		code, out, errOut := runTool(t, "-path", path, "-json", "-n", "7", "-producers", "2", "-size", "64", "-warmup", "0")
		if !assert.Equal(t, exitOK, code, errOut) {
			continue
		}
		var rep pathReport
		if assert.NoError(t, json.Unmarshal([]byte(out), &rep)) && assert.Len(t, rep.Results, 1) {
			assert.EqualValues(t, 7, rep.Results[0].Packets, "-path %s -n 7 -producers 2", path)
		}
	}
}

// ctrlCDelays are the times after which the interrupt tests press Ctrl-C, in turn. A Ctrl-C
// before the measurement (setup and warm-up take longer under -race or on a loaded machine) cuts
// no measured run: the run then rightly prints no row (runSize, runPath: nothing measured yet;
// TestInterruptBeforeMeasurementPrintsNoRow); the test tries again with a later Ctrl-C, so that
// what it checks is the cut of a measured run, not the machine's speed.
var ctrlCDelays = []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second, 8 * time.Second}

// untilMeasuredCut calls try with each of ctrlCDelays until try reports that its Ctrl-C cut a
// measured run (it checked that run), and fails the test if none did.
func untilMeasuredCut(t *testing.T, try func(after time.Duration) bool) {
	t.Helper()
	for _, after := range ctrlCDelays {
		if try(after) {
			return
		}
		t.Logf("Ctrl-C after %v came before the measurement: nothing measured; trying later", after)
	}
	t.Fatal("no Ctrl-C reached a measured run")
}

// TestPathInterruptPrintsResultsSoFar: Ctrl-C in a -path run prints the results so far, the cut
// size's row marked (interrupted), and exits 130, as the packet run does. It used to exit 0 with
// the cut size's row looking like a whole run's, or 130 with nothing when the drain saw it.
func TestPathInterruptPrintsResultsSoFar(t *testing.T) {
	for _, tc := range []struct{ path, size string }{{"pio", "64"}, {"auto", "64"}, {"auto", "4096"}} { // 4096: by SDMA, packets in flight at Ctrl-C
		untilMeasuredCut(t, func(after time.Duration) bool {
			ctx, cancel := context.WithCancel(t.Context())
			var stdout, stderr bytes.Buffer
			defer time.AfterFunc(after, cancel).Stop()
			code := run(ctx, []string{"-path", tc.path, "-D", "60", "-warmup", "0", "-size", tc.size}, &stdout, &stderr)
			cancel()
			assert.Equal(t, exitInterrupted, code, "%v: %s", tc, stderr.String())
			if !regexp.MustCompile(`(?m)^ ` + tc.path + ` +` + tc.size + ` +[1-9]`).MatchString(stdout.String()) {
				return false // no row of packets sent: cut before the measurement
			}
			assert.Regexp(t, `(?m)^ `+tc.path+` +`+tc.size+` +[1-9][0-9]* .* \(interrupted\)$`, stdout.String(), "%v: the partial row", tc)
			assert.Contains(t, stdout.String(), "interrupted: the results so far")
			return true
		})
	}
}

// TestMsgModeRefusesSinkFail: -faults sinkfail fails packet deliveries, while a -mode msg row
// counts messages: the accepted count was the messages less the failed packets (-n 2000 of
// 8-packet messages at sinkfail=0.1 reported 393 iterations and 1607 #failed, at 0.5 none), units
// mixed. The combination is refused until failures are counted per message.
func TestMsgModeRefusesSinkFail(t *testing.T) {
	_, err := parseConfig([]string{"-mode", "msg", "-size", "65536", "-faults", "sinkfail=0.1"}, new(bytes.Buffer))
	var ue *usageError
	if assert.ErrorAs(t, err, &ue) {
		assert.Contains(t, ue.Error(), "sinkfail")
	}
	_, err = parseConfig([]string{"-mode", "msg", "-size", "65536", "-faults", "sinkstall=0.1,halt=0.01"}, new(bytes.Buffer))
	assert.NoError(t, err, "stalls and halts are counted per message")
}

// TestLatencyTableCountsItsSamples: the latency table's #iterations is Result.Iterations, the
// packets the sink accepted, while its percentiles are over every completion, the deliveries the
// sink refused included (-faults sinkfail=0.5: #iterations ~1000 beside percentiles of 2000
// samples). The column now shows Latency.Count, the samples the percentiles are of.
func TestLatencyTableCountsItsSamples(t *testing.T) {
	rep := runJSON(t, "-n", "2000", "-warmup", "0", "-faults", "sinkfail=0.5,seed=1", "-size", "1024")
	var out bytes.Buffer
	latencyTable.row(&out, rep.Config, rep.Results[0])
	f := strings.Fields(out.String())
	assert.Equal(t, strconv.FormatInt(rep.Results[0].Latency.Count, 10), f[1], "the samples the percentiles are of")
}

// TestMsgModeStopsAtInterrupt: Ctrl-C stops a -mode msg run at once, as the packet run. A Submit
// cut by the cancel fails with a *ReqError matching ErrFault, which sendMsg took for an injected
// fault and went on: the run went to the end of -D, every message after the Ctrl-C counted as
// aborted (-D 5 cut at 1 s: 5 s, 188238 aborted). A Ctrl-C before the measurement is tried again
// later (untilMeasuredCut).
func TestMsgModeStopsAtInterrupt(t *testing.T) {
	untilMeasuredCut(t, func(after time.Duration) bool {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var stdout, stderr syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"-mode", "msg", "-size", "65536", "-D", "60", "-warmup", "0", "-json"}, &stdout, &stderr)
		}()
		time.Sleep(after)
		cancel()
		select {
		case code := <-done:
			require.Equal(t, exitInterrupted, code, stderr.String())
		case <-time.After(20 * time.Second):
			t.Fatal("-mode msg did not stop at Ctrl-C")
		}
		var rep Report
		require.NoError(t, json.Unmarshal([]byte(stdout.String()), &rep))
		if len(rep.Results) == 0 {
			return false
		}
		require.Len(t, rep.Results, 1)
		assert.True(t, rep.Results[0].Interrupted)
		assert.LessOrEqual(t, rep.Results[0].Aborted, uint64(1), "only the message the Ctrl-C cut, per producer")
		return true
	})
}

// TestUDPInterruptKeepsTheReceiver: Ctrl-C in a -sink udp run with the in-process receiver ends
// the sending, and the receiver takes what was sent up to the end markers. The receiver stopped
// at the Ctrl-C itself, before the drain: the deliveries of the drain were refused by the tool's
// own closed socket and reported as #failed (3 in each run, 1 s into -D 5), and the receiver's
// count fell short of the packets reported sent, with "no end marker". A Ctrl-C before the
// measurement is tried again later (untilMeasuredCut).
//
// It holds that every packet reported sent was received or counted lost (as TestRunUDPInProcess
// does), not that every one was received: loopback UDP drops a datagram that finds the receive
// buffer full, a loss the tool warns of (checkReceiver), and a receiver starved on a loaded
// machine while the sender ran lets it fill (the receiver's 32 MiB, some 28000 of these
// datagrams, is 0.1 to 0.3 s of this run's sending; without CAP_NET_ADMIN the kernel caps it at
// net.core.rmem_max). The end markers come after the drops and count every packet sent, so the
// dropped ones are Lost and the sum is exact.
func TestUDPInterruptKeepsTheReceiver(t *testing.T) {
	untilMeasuredCut(t, func(after time.Duration) bool {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var stdout, stderr syncBuffer
		defer time.AfterFunc(after, cancel).Stop()
		code := run(ctx, []string{"-sink", "udp", "-size", "1024", "-D", "60", "-warmup", "0", "-json"}, &stdout, &stderr)
		assert.Equal(t, exitInterrupted, code, stderr.String())
		var rep Report
		require.NoError(t, json.Unmarshal([]byte(stdout.String()), &rep))
		if len(rep.Results) == 0 {
			return false
		}
		if assert.Len(t, rep.Results, 1) && assert.NotNil(t, rep.Receiver) {
			r := rep.Results[0]
			assert.Zero(t, r.SinkErrors, "no delivery refused: %s", r.SinkError)
			assert.True(t, rep.Receiver.Ended, "the end markers arrived")
			assert.Equal(t, r.Iterations, rep.Receiver.Packets+rep.Receiver.Lost, "every packet reported sent is received or counted lost: %s", rep.Receiver)
		}
		return true
	})
}

// TestPerftestItersPerQP: perftest's -n is per queue pair (send_bw: tot_iters = iters *
// num_of_qps), so ib_send_bw -q 2 -n 100 sends 200; sdmaperf's -n is over all producers (its -h
// says so) and -q 2 -n 100 sends 100, while the README offers -n and -q as perftest's spellings
// and TestPerftestSpellings says they mean what they mean there. With -q, -n now counts per queue
// pair, as perftest's; with -producers (sdmaperf's own spelling) it is the total.
func TestPerftestItersPerQP(t *testing.T) {
	rep := runJSON(t, "-q", "2", "-n", "100", "-warmup", "0", "-size", "64")
	assert.EqualValues(t, 200, rep.Results[0].Iterations)
	rep = runJSON(t, "-producers", "2", "-n", "100", "-warmup", "0", "-size", "64")
	assert.EqualValues(t, 100, rep.Results[0].Iterations, "-producers: -n is the total")
}
