//go:build !linux

package udpsink

import "net"

// Batch defaults (see the Linux documentation; the sender is Linux only).
const (
	DefaultBatch      = 32
	DefaultBatchBytes = 256 << 10
	MaxGSOSegments    = 64
)

// Sink is the UDP sink; on this system every method fails with ErrLinuxOnly.
type Sink struct{}

// New returns ErrLinuxOnly: the gather-I/O sender needs Linux's sendmsg.
func New(cfg Config) (*Sink, error) { return nil, ErrLinuxOnly }

// LocalAddr returns nil.
func (s *Sink) LocalAddr() net.Addr { return nil }

// RemoteAddr returns nil.
func (s *Sink) RemoteAddr() net.Addr { return nil }

// Deliver returns ErrLinuxOnly.
func (s *Sink) Deliver(engine int, segs [][]byte) error { return ErrLinuxOnly }

// Engines returns 0: the sink takes no packet.
func (s *Sink) Engines() int { return 0 }

// BatchLimit turns batching off.
func (s *Sink) BatchLimit() (packets, bytes int) { return 1, 0 }

// Queue returns ErrLinuxOnly.
func (s *Sink) Queue(engine int, segs [][]byte) error { return ErrLinuxOnly }

// Flush fails every packet with ErrLinuxOnly.
func (s *Sink) Flush(engine int, errs []error) {
	for i := range errs {
		errs[i] = ErrLinuxOnly
	}
}

// Run returns 0.
func (s *Sink) Run() uint64 { return 0 }

// Stats returns zero counters.
func (s *Sink) Stats() Stats { return Stats{} }

// Close returns ErrLinuxOnly.
func (s *Sink) Close() error { return ErrLinuxOnly }
