package main

// Flag combinations of a packet run that were taken and then did nothing: the flags' census.
// Each step refuses one, naming both flags, as perftest's force_dependecies does for what a test
// cannot honour (linux-rdma/perftest, src/perftest_parameters.c).

// sdmaPackets reports whether the run sends packets through sdmaperf's own producers (-path sdma,
// -mode bw or lat), where the engines, -depth and -send are the tool's.
func sdmaPackets(cfg *Config) bool {
	return (cfg.Path == "" || cfg.Path == pathSDMA) && cfg.Mode != ModeMsg
}

// checkIdleEngines refuses more engines than producers: producers go round-robin over the
// engines, one engine each, so the engines past the producers' count sent nothing (-engines 4
// alone measured one engine's worth, three idle). -path pio and auto pick engines by flow (the
// verbs layer's selector), and are not checked.
func checkIdleEngines(cfg *Config, _ rawFlags, set flagSet) error {
	if (cfg.Path != "" && cfg.Path != pathSDMA) || cfg.Engines <= cfg.Producers {
		return nil
	}
	return usagef("-engines %d with %s %d: producers go round-robin over the engines, one engine each, so %d engines would send nothing; give %[2]s %[1]d or more (-q %[1]d sets both)",
		cfg.Engines, spellProducers(set), cfg.Producers, cfg.Engines-cfg.Producers)
}
