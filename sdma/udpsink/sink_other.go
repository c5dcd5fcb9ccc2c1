//go:build !linux

package udpsink

import "net"

// Config configures a Sink (see the Linux documentation; the sender is Linux only).
type Config struct {
	Addr        string
	Engines     int
	WriteBuffer int
}

// Sink is the UDP sink; on this system every method fails with ErrLinuxOnly.
type Sink struct{}

// Stats are the sink's counters.
type Stats struct {
	Packets uint64
	Bytes   uint64
	Errors  uint64
}

// New returns ErrLinuxOnly: the gather-I/O sender needs Linux's sendmsg.
func New(cfg Config) (*Sink, error) { return nil, ErrLinuxOnly }

// LocalAddr returns nil.
func (s *Sink) LocalAddr() net.Addr { return nil }

// RemoteAddr returns nil.
func (s *Sink) RemoteAddr() net.Addr { return nil }

// Deliver returns ErrLinuxOnly.
func (s *Sink) Deliver(engine int, segs [][]byte) error { return ErrLinuxOnly }

// Stats returns zero counters.
func (s *Sink) Stats() Stats { return Stats{} }

// Close returns ErrLinuxOnly.
func (s *Sink) Close() error { return ErrLinuxOnly }
