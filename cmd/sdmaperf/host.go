package main

import (
	"runtime"
	"runtime/debug"

	"github.com/klauspost/cpuid/v2"
)

// Host is where and with what a run was made, for -json: figures mean little without it.
type Host struct {
	GoVersion  string   `json:"go_version"`
	OS         string   `json:"os"`
	Arch       string   `json:"arch"`
	CPU        string   `json:"cpu"`     // the CPU model (klauspost/cpuid)
	Cores      int      `json:"cores"`   // physical cores as the CPUID topology reports them (cpuid); in a VM, the topology the hypervisor presents: compare num_cpu
	NumCPU     int      `json:"num_cpu"` // logical CPUs the process may use
	GOMAXPROCS int      `json:"gomaxprocs"`
	Module     string   `json:"module,omitempty"`   // the main module's version
	Revision   string   `json:"revision,omitempty"` // the VCS revision the binary was built from
	Modified   bool     `json:"modified,omitempty"` // the working tree had changes
	Args       []string `json:"args"`               // the flags as given
}

// hostInfo describes this host and build; args are the flags as given.
func hostInfo(cfg Config) *Host {
	h := &Host{
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		CPU: cpuid.CPU.BrandName, Cores: cpuid.CPU.PhysicalCores,
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Args: cfg.Args,
	}
	if h.Args == nil {
		h.Args = []string{}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		h.Module = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				h.Revision = s.Value
			case "vcs.modified":
				h.Modified = s.Value == "true"
			}
		}
	}
	if h.CPU == "" {
		h.CPU = "unknown" // cpuid knows no model (some arm64 hosts)
	}
	return h
}
