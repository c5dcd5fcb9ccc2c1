package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/pio"
)

// TestPathHaltAtCountsTheMeasuredRun: -faults haltat=N is documented (-h) as a halt "at the Nth
// descriptor it reads in the measured run (after the warm-up)", and the SDMA path arms it after
// the warm-up (sizeRun.arm). -path pio|auto set pio.FaultPlan.HaltAt, which counts packets over
// the context's life, when the contexts were created: with -warmup 100 -faults haltat=50 the
// halt happened in the warm-up, the measured run had no flushed packet, and its row still showed
// pio_halts 1 (the warm-up's). armPaths now sets it after the warm-up, and the row's halts are
// the measured run's.
func TestPathHaltAtCountsTheMeasuredRun(t *testing.T) {
	rep := runPathJSON(t, "-path", "pio", "-faults", "haltat=50", "-warmup", "100", "-n", "1000", "-size", "64")
	require.Len(t, rep.Results, 1)
	r := rep.Results[0]
	assert.EqualValues(t, 1, r.Halts)
	assert.Positive(t, r.Flushed, "the halt at the measured run's 50th packet flushed what was in flight")
}

// TestPathHaltRateIsARate: -faults halt=RATE with -path pio|auto was a halt every 1/RATE-th
// packet, truncated: halt=0.6 halted every packet (nothing delivered) and halt=0.3 every 3rd;
// the seed was ignored. It is now a probability per packet (pio.FaultPlan.HaltRate, whose
// draws TestHaltRate checks), drawn from -faults seed. In latency mode each packet is taken up
// alone, so the halts are the draws of the packets sent by PIO. (Which packets are sent
// depends on timing: a send refused while a halted context restarts still counts toward -n.)
func TestPathHaltRateIsARate(t *testing.T) {
	rep := runPathJSON(t, "-path", "pio", "-faults", "halt=0.6", "-n", "2000", "-size", "64")
	assert.Positive(t, rep.Results[0].Packets, "halt=0.6 halted every packet")

	rep = runPathJSON(t, "-path", "pio", "-mode", "lat", "-faults", "halt=0.6,seed=3", "-n", "1000", "-warmup", "0", "-size", "64")
	r := rep.Results[0]
	require.Equal(t, r.ByPIO, r.Packets+r.Flushed)
	require.EqualValues(t, 1000, r.ByPIO, "-n counts the packets sent, not the refused tries (refused %d)", r.Refused)
	assert.InDelta(t, 0.6, float64(r.Halts)/float64(r.ByPIO), 0.12, "%d halts in %d packets", r.Halts, r.ByPIO)

	cfg, err := parseConfig([]string{"-path", "auto", "-faults", "halt=0.3,seed=5"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, pio.FaultPlan{HaltRate: 0.3, Seed: 5}, cfg.Faults.pioPlan(), "the rate and the seed reach the PIO contexts")
}

// TestPathFaultsReachSDMA: with -path auto the packets above the PIO threshold go by SDMA, and
// -faults halt and haltat reach its engines as in the SDMA run (the rate from the start, haltat
// from the measured run); they reached the PIO contexts only, so a 1024-byte -path auto run
// never halted. A send refused while an engine recovers is refused, as a PIO one is.
func TestPathFaultsReachSDMA(t *testing.T) {
	rep := runPathJSON(t, "-path", "auto", "-faults", "halt=0.01", "-n", "3000", "-size", "1024")
	r := rep.Results[0]
	assert.Positive(t, r.SDMAHalts, "-faults halt reaches the SDMA engines")
	assert.Zero(t, r.Halts, "no packet went by PIO")
	assert.Equal(t, r.BySDMA, r.Packets+r.Flushed, "every packet sent was delivered or aborted by a halt")

	rep = runPathJSON(t, "-path", "auto", "-faults", "haltat=50", "-warmup", "100", "-n", "1000", "-size", "1024")
	r = rep.Results[0]
	assert.EqualValues(t, 1, r.SDMAHalts, "haltat=50 halts the engine once, in the measured run")
	assert.Positive(t, r.Flushed, "the halt aborted the packet it stopped at")
}

// TestPathFaultsCauseRefused: -faults cause= chooses an SDMA engine's haltat cause; a PIO send
// context's injected halt has none, and -path pio|auto ignored it without a word.
func TestPathFaultsCauseRefused(t *testing.T) {
	for _, path := range []string{"pio", "auto"} {
		code, _, errOut := runTool(t, "-path", path, "-size", "64", "-faults", "haltat=5,cause=memory-read-fault")
		assert.Equal(t, exitUsage, code, "%s: %s", path, errOut)
		assert.Contains(t, errOut, "-faults cause=memory-read-fault is not supported with -path pio|auto")
	}
}
