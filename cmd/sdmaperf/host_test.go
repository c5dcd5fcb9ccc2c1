package main

import (
	"runtime"
	"testing"

	"github.com/klauspost/cpuid/v2"
)

// TestHostInfoCores: -json's host.cores is the physical core count cpuid reports, as its doc
// says. It is never set, so every run's JSON says "cores": 0. Filling it is a design call: on the
// 2-vCPU KVM guest of the README's figures cpuid reports 254 physical cores (the guest's CPUID
// topology), which would mislead more than the 0; drop the field, or fill it and say whose count
// it is.
func TestHostInfoCores(t *testing.T) {
	t.Skip("bug: Host.Cores is documented as cpuid's physical core count but never set (always 0); see the comment")
	h := hostInfo(Config{})
	if h.Cores != cpuid.CPU.PhysicalCores {
		t.Errorf("cores %d, cpuid says %d", h.Cores, cpuid.CPU.PhysicalCores)
	}
	if h.NumCPU != runtime.NumCPU() || h.Args == nil {
		t.Errorf("host %+v", h)
	}
	t.Logf("cpuid: %d physical cores, %d logical", cpuid.CPU.PhysicalCores, cpuid.CPU.LogicalCores)
}
