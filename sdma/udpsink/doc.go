// Package udpsink is a real sdma.Sink: it sends every packet the engine gathers as one UDP
// datagram over loopback, with gather I/O (sendmsg(2) whose iovec is the packet's own segments:
// the payload is never copied into one buffer), and a Receiver that checks what arrives.
//
// # Wire format
//
// The sink prepends a 16-byte frame header, taken from a per-engine scratch buffer, as the first
// iovec entry; the packet's segments follow untouched. All fields are little-endian:
//
//	offset  size  field
//	0       2     magic 0x5344 ("DS" on the wire; FrameMagic)
//	2       1     flags (FlagEnd: end-of-run marker)
//	3       1     engine number (0..255)
//	4       8     sequence number: packets sent on this engine before this one; for an end
//	              marker, the number of packets the engine sent in the run
//	12      4     CRC-32C (Castagnoli) of the payload, the bytes after the header
//
// The payload is exactly the bytes the engine handed to Deliver, pad included. An end-of-run
// marker (FlagEnd) carries a 4-byte payload: the number of engines in the run, so the receiver
// knows when it has heard from all of them. Sequence numbers are per engine because the engines deliver
// concurrently; within an engine, datagrams leave in ring order on one socket, and loopback
// keeps that order.
//
// # Batching
//
// Deliver sends one sendmsg per packet, not sendmmsg batches: the segments are valid only during
// the Deliver call (they alias mapped memory that is unmapped at completion), so batching
// across calls would mean copying the payload, which is what this sink exists not to do.
//
// # Loopback only
//
// Both ends refuse any address that is not a loopback address (127.0.0.0/8 or ::1): this is a
// measurement tool, not a transport. The Receiver stops by itself after an idle timeout or once
// it has seen the end-of-run markers, and the Sink's Close sends those markers.
//
// The sender needs Linux (sendmsg through golang.org/x/sys/unix); elsewhere New returns
// ErrLinuxOnly. The Receiver is portable.
package udpsink
