package main

// Flag combinations of a packet run that were taken and then did nothing: the flags' census.
// Each step refuses one, naming both flags, as perftest's force_dependecies does for what a test
// cannot honour (linux-rdma/perftest, src/perftest_parameters.c).

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/gosdma/gosdma/ring"
)

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
	both := fmt.Sprintf(" (-q %d sets both)", cfg.Engines)
	if set["q"] {
		both = ""
	}
	return usagef("-engines %d with %s %d: producers go round-robin over the engines, one engine each, so %[4]d of the engines would send nothing; give %[2]s %[1]d or more%[5]s",
		cfg.Engines, spellProducers(set), cfg.Producers, cfg.Engines-cfg.Producers, both)
}

// checkSharedDepth refuses -shared with one packet in flight per producer (-mode lat, or
// -depth 1): such a producer has one payload slot anyway, reused by every packet, so -shared
// (every packet in flight mapping the same memory: many overlapping live mappings) changed
// nothing.
func checkSharedDepth(cfg *Config, raw rawFlags, set flagSet) error {
	if !cfg.Shared || cfg.Depth > 1 {
		return nil
	}
	shared := raw.typed("shared")
	if cfg.Mode == ModeLat {
		return usagef("%[1]s with %[2]s lat: one packet in flight per producer already reuses one payload buffer, so %[1]s changes nothing; it applies to %[2]s bw with %[3]s 2 or more", shared, raw.typed("mode"), spell(raw, set, "depth"))
	}
	return usagef("%[1]s with %[2]s 1: one packet in flight per producer already reuses one payload buffer, so %[1]s changes nothing; give %[2]s 2 or more", shared, spell(raw, set, "depth"))
}

// descsPerPacket is the most descriptors one packet takes: a descriptor per fragment (the library
// coalesces past 63) and the pad's, as checkRing counts them.
func descsPerPacket(cfg *Config) int { return min(cfg.Frags, 63) + 1 }

// packetsPerEngine is the most packets in flight on one engine: the busiest engine's producers
// (round-robin: ceil(producers/engines)), each with -depth in flight (1 in -mode lat).
func packetsPerEngine(cfg *Config) int {
	return (cfg.Producers + cfg.Engines - 1) / cfg.Engines * cfg.Depth
}

// checkSendFills refuses -send sleep or spin where the ring can never fill: -send says what a
// producer does when the ring has no room for its packet, and a packet's descriptors are freed
// before its callback gives its slot back (sdma: completion), so an engine never holds more than
// packetsPerEngine × descsPerPacket descriptors. If the ring holds that many, every Send finds
// room and -send sleep or spin measured what the default (block) does: "-send sleep" alone (128
// packets of 3 descriptors in a ring of 2047) was taken without a word.
func checkSendFills(cfg *Config, raw rawFlags, set flagSet) error {
	if !set["send"] || cfg.Send == "block" || !sdmaPackets(cfg) {
		return nil
	}
	pkts, descs := packetsPerEngine(cfg), descsPerPacket(cfg)
	if pkts*descs > cfg.Ring-1 {
		return nil
	}
	more := "more packets in flight per engine (" + spell(raw, set, "depth") + ", or more producers per engine)"
	if cfg.Mode == ModeLat {
		more = "more packets in flight per engine (more producers per engine: -mode lat has one each)"
	}
	if r := 1 << (bits.Len(uint(pkts*descs)) - 1); r >= ring.MinSize { // r-1 < pkts*descs: it can fill
		more = fmt.Sprintf("-ring %d or less, or %s", r, more)
	}
	return usagef("-send %s with -ring %d: an engine holds at most %d descriptors (%d packets in flight × up to %d descriptors), so its ring (%d usable) never fills and -send never acts; give %s",
		cfg.Send, cfg.Ring, pkts*descs, pkts, descs, cfg.Ring-1, more)
}

// checkLoneUDP refuses -udp-batch (2 or more, or 0: the default's batching) and -udp-gso where an
// engine never has two packets in flight (-mode lat with no more producers than engines, or
// -depth 1): an engine hands a lone packet to the sink's Deliver, sent at once with sendmsg
// (sdma.BatchSink), so no batch ever formed and neither flag did anything. -udp-batch 1 (each
// packet with its own sendmsg) is what such a run does: it stands.
func checkLoneUDP(cfg *Config, raw rawFlags, set flagSet) error {
	if cfg.Sink != "udp" || !sdmaPackets(cfg) || packetsPerEngine(cfg) > 1 {
		return nil
	}
	why := "-mode lat and no more producers than engines"
	if cfg.Mode != ModeLat {
		why = spell(raw, set, "depth") + " 1 and no more producers than engines"
	}
	for _, f := range []struct {
		name string
		on   bool
	}{{"udp-gso", set["udp-gso"]}, {"udp-batch " + strconv.Itoa(cfg.UDPBatch), set["udp-batch"] && cfg.UDPBatch != 1}} {
		if f.on {
			return usagef("-%s with %s: an engine has one packet in flight at a time, which it sends alone with sendmsg, so no batch forms and -%[1]s does nothing; batching needs two or more in flight per engine (more -producers than -engines, or -mode bw with %[3]s 2 or more)",
				f.name, why, spell(raw, set, "depth"))
		}
	}
	return nil
}
