// Package udpsink is a real sdma.Sink: it sends every packet the engine gathers as one UDP
// datagram over loopback, with gather I/O (sendmmsg(2) or sendmsg(2) whose iovecs are the
// packets' own segments: the payload is never copied into one buffer), and a Receiver that
// checks what arrives.
//
// # Wire format
//
// The sink prepends a 24-byte frame header, built in a per-engine buffer, as the first iovec
// entry; the packet's segments follow untouched. All fields are little-endian:
//
//	offset  size  field
//	0       2     magic 0x5344 ("DS" on the wire; FrameMagic)
//	2       1     flags: FlagEnd (0x01) end-of-run marker; FlagRunGiven (0x02) the run ID is
//	              the sender's Config.Run, not drawn at random; other bits 0
//	3       1     engine number (0..255)
//	4       8     sequence number: packets sent on this engine before this one; for an end
//	              marker, the number of packets the engine sent in the run
//	12      4     CRC-32C (Castagnoli) of the payload, the bytes after the header
//	16      8     run ID: the same in every frame of one Sink (Config.Run, or drawn at random,
//	              never 0), end markers included
//
// The payload is exactly the bytes the engine handed to Deliver, pad included. An end-of-run
// marker (FlagEnd) carries a 4-byte payload: the number of engines in the run, so the receiver
// knows when it has heard from all of them. Sequence numbers are per engine because the engines deliver
// concurrently; within an engine, datagrams leave in ring order on one socket, and loopback
// keeps that order. The checksum covers the payload only, not the header. The Receiver tests
// the flag bits it knows and ignores the others, so that a bit defined later (as FlagRunGiven
// was, after FlagEnd) changes nothing for a receiver older than it, and a frame of a sender
// older than a bit has it clear.
//
// The run ID tells runs apart at the receiver: a Receiver's Run reports one run, named by the
// first datagram it takes of a run no Run reported yet. It counts the datagrams of the last eight
// runs it reported (a late frame, Close's repeated end markers) as Report.Stale and nowhere else,
// and a datagram of yet another run (a sender restarted on the port without ending its run)
// ends the Run, Report.Superseded, and opens the next.
//
// # Batching
//
// The Sink is an sdma.BatchSink. By default (Config.Batch, DefaultBatch packets) an engine
// queues its packets with the sink and has it flush them: one sendmmsg(2) sends the whole batch,
// through golang.org/x/net's PacketConn.WriteBatch, whose messages take the frames as gather
// lists (the header, then the packet's own segments: no copy). This is possible because the
// engine defers its head write-back (see sdma.BatchSink): a held packet is not completed, so
// not unmapped, until the Flush that sends it returned, and sendmmsg has copied the bytes into
// socket buffers by then. The engine flushes when the batch is full (packets or
// Config.BatchBytes) and whenever it has nothing more to read; a lone packet (no batch held,
// nothing published behind it) it delivers at once, one sendmsg, as the unbatched sink would. With Config.GSO, each run of consecutive frames of one size goes as one message
// with a UDP_SEGMENT control message (UDP GSO): the kernel cuts it into one datagram per frame.
// Config.Batch 1 is the unbatched sink: Deliver, one sendmsg(2) per packet.
//
// Every packet is sent or failed exactly once; Config.Batch lists what each send error does.
//
// The Receiver reads with recvmmsg(2) (x/net's ReadBatch), up to 32 datagrams a call.
//
// # Loopback only
//
// Both ends refuse any address that is not a loopback address (127.0.0.0/8 or ::1): this is a
// measurement tool, not a transport. The Receiver stops by itself after an idle timeout or once
// it has seen the end-of-run markers, and the Sink's Close sends those markers, after the
// packets the engines hold (queued, not yet flushed): a packet the sink took is sent or failed,
// never dropped, and Close may run while engines deliver.
//
// The sender needs Linux (sendmmsg through golang.org/x/net, sendmsg and UDP_SEGMENT through
// golang.org/x/sys/unix); elsewhere New returns
// ErrLinuxOnly. The Receiver is portable, but for Receiver.Pending, which asks Linux's SIOCINQ
// and returns ErrLinuxOnly elsewhere.
package udpsink
