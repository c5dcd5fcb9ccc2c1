package main

import (
	"runtime"
	"testing"

	"github.com/klauspost/cpuid/v2"
)

// TestHostInfoCores: -json's host.cores is the physical core count cpuid reports, as its doc
// says (it was never set: every run's JSON said "cores": 0). In a VM it is the topology the
// hypervisor presents (a 2-vCPU KVM guest may report 254), which the doc says, beside num_cpu.
func TestHostInfoCores(t *testing.T) {
	h := hostInfo(Config{})
	if h.Cores != cpuid.CPU.PhysicalCores {
		t.Errorf("cores %d, cpuid says %d", h.Cores, cpuid.CPU.PhysicalCores)
	}
	if h.NumCPU != runtime.NumCPU() || h.Args == nil {
		t.Errorf("host %+v", h)
	}
	t.Logf("cpuid: %d physical cores, %d logical", cpuid.CPU.PhysicalCores, cpuid.CPU.LogicalCores)
}
