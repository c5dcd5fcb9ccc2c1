package udpsink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
)

// Frame header constants (see the package documentation for the layout).
const (
	HeaderLen  = 24     // bytes of frame header before the payload
	FrameMagic = 0x5344 // first two bytes of every frame, little-endian

	// FlagEnd marks an end-of-run frame: Seq is the number of packets the engine sent.
	FlagEnd uint8 = 0x01
	// FlagRunGiven marks every frame (end markers too) of a run whose ID the sender gave
	// (Config.Run), which may have a form of the sender's own; a run ID drawn at random has it
	// clear, and so has every frame of a sender older than the flag. Report.RunGiven.
	FlagRunGiven uint8 = 0x02

	// MaxEngines is the number of engines the one-byte engine field can name.
	MaxEngines = 256

	// MaxPayload is the largest payload one frame can carry: the IPv4 UDP limit less the header.
	MaxPayload = 65507 - HeaderLen
)

// Sentinel errors of package udpsink.
var (
	ErrLinuxOnly    = errors.New("udpsink: linux only")
	ErrNotLoopback  = errors.New("udpsink: not a loopback address")
	ErrClosed       = errors.New("udpsink: sink closed")
	ErrEngine       = errors.New("udpsink: engine number out of range")
	ErrTooLarge     = errors.New("udpsink: packet larger than one UDP datagram")
	ErrBadFrame     = errors.New("udpsink: malformed frame")
	ErrReceiverIdle = errors.New("udpsink: receiver idle timeout")
	ErrInvalid      = errors.New("udpsink: invalid configuration") // a bad Config or ReceiverConfig field, a Deliver while a batch is held, a nil context, the zero Sink or Receiver
)

// castagnoli is the CRC-32C table (hardware-accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a decoded frame header.
type Header struct {
	Flags  uint8  // FlagEnd for an end-of-run marker (clear for a packet), FlagRunGiven for a run ID the sender gave; other bits 0
	Engine uint8  // the index of the engine that sent the frame (one sink serves up to MaxEngines)
	Seq    uint64 // packets the engine sent before this one; with FlagEnd, the packets it sent in all
	CRC    uint32 // CRC-32C of the payload
	// Run names the sender's run: every frame of one Sink carries the same (Config.Run, or one
	// the sink drew), so that a receiver tells a run's frames from an earlier run's.
	Run uint64
}

// PutHeader writes h into b[:HeaderLen]. It panics if b is shorter than HeaderLen.
func PutHeader(b []byte, h Header) {
	_ = b[HeaderLen-1]
	binary.LittleEndian.PutUint16(b[0:], FrameMagic)
	b[2] = h.Flags
	b[3] = h.Engine
	binary.LittleEndian.PutUint64(b[4:], h.Seq)
	binary.LittleEndian.PutUint32(b[12:], h.CRC)
	binary.LittleEndian.PutUint64(b[16:], h.Run)
}

// ParseHeader decodes the header of frame. It returns an error matching ErrBadFrame if frame is
// shorter than a header or its magic is wrong; it does not check the checksum (see Checksum).
func ParseHeader(frame []byte) (Header, error) {
	if len(frame) < HeaderLen {
		return Header{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrBadFrame, len(frame), HeaderLen)
	}
	if m := binary.LittleEndian.Uint16(frame); m != FrameMagic {
		return Header{}, fmt.Errorf("%w: magic %#04x, want %#04x", ErrBadFrame, m, FrameMagic)
	}
	return Header{
		Flags:  frame[2],
		Engine: frame[3],
		Seq:    binary.LittleEndian.Uint64(frame[4:]),
		CRC:    binary.LittleEndian.Uint32(frame[12:]),
		Run:    binary.LittleEndian.Uint64(frame[16:]),
	}, nil
}

// Checksum returns the CRC-32C of the concatenation of segs, as the frame header carries it.
// It does not allocate.
func Checksum(segs [][]byte) uint32 {
	var c uint32
	for _, s := range segs {
		c = crc32.Update(c, castagnoli, s)
	}
	return c
}

// ResolveLoopback resolves a UDP address and checks that it is a loopback address. An empty
// host means 127.0.0.1. The error names the address and matches ErrNotLoopback when it resolves
// elsewhere, ErrInvalid when it does not parse or resolve.
func ResolveLoopback(addr string) (*net.UDPAddr, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %w", ErrInvalid, addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ua, err := net.ResolveUDPAddr("udp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %w", ErrInvalid, addr, err)
	}
	if !ua.IP.IsLoopback() {
		return nil, fmt.Errorf("%w: %q resolves to %s; only 127.0.0.0/8 and ::1 are allowed", ErrNotLoopback, addr, ua.IP)
	}
	return ua, nil
}
