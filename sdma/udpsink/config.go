package udpsink

// Config configures a Sink.
type Config struct {
	// Addr is the receiver's UDP address; it must be a loopback address ("127.0.0.1:18515",
	// "[::1]:18515") with a port other than 0. An empty host means 127.0.0.1.
	Addr string
	// Engines is the number of engines that will deliver (engine numbers 0..Engines-1).
	// 0 means 1; at most MaxEngines. A device of more engines refuses the sink (see
	// Sink.Engines): sdma.NewDevice's Config.Engines, plus verbs' PIO contexts.
	Engines int
	// WriteBuffer is the socket send buffer (SO_SNDBUF) in bytes; 0 means 4 MiB, a negative size is
	// ErrInvalid. The kernel may cap it (net.core.wmem_max).
	WriteBuffer int

	// Batch is the most packets an engine holds before the sink sends them with one
	// sendmmsg(2) (its BatchLimit as an sdma.BatchSink); 0 means DefaultBatch, at most
	// 1024 (sdma.MaxBatch, the kernel's UIO_MAXIOV). 1 turns batching off: the engine calls Deliver, one sendmsg(2) a packet.
	//
	// What a send error does to a batch, per message (a frame, or a GSO run of frames):
	//
	//   - partial sendmmsg (k of n sent, the error lost): the k are done, the rest resent at once;
	//   - EAGAIN: the runtime poller waits until the socket is writable and sendmmsg runs again
	//     (the engine waits meanwhile: back-pressure, nothing lost); should it reach the sink
	//     anyway it is retried as ENOBUFS is;
	//   - ENOBUFS (no memory in the stack): the message is resent after 10µs, 20µs, ... up to 10
	//     times (about 10ms), then its frames fail with ENOBUFS and the next message goes on;
	//   - ECONNREFUSED (no receiver on the port: the kernel reports the ICMP of an earlier
	//     datagram on this send, which it drops): the message's frames fail, the next goes on;
	//   - a GSO run refused as such (EIO, EINVAL, EOPNOTSUPP, ENOPROTOOPT): GSO is turned off for
	//     the sink and the frames are resent one message each;
	//   - anything else (EMSGSIZE, a closed socket): the message's frames fail, the next goes on.
	//
	// A failed frame is reported to the engine (Flush's errs: a SinkError, the txreq completes
	// OK as a packet lost on the wire), counted in Stats.Errors, and gives its sequence number
	// back, so that the receiver sees no hole for it. Every frame is sent or failed once.
	Batch int
	// BatchBytes is the payload an engine's batch holds before it is flushed (a batch reaches
	// at most that plus one packet); 0 means DefaultBatchBytes, negative means no byte bound.
	BatchBytes int
	// GSO sends each run of consecutive frames of one size in a batch as one message with a
	// UDP_SEGMENT control message (UDP generic segmentation offload, Linux 4.18+): the kernel
	// passes the run through its stack once and cuts it into one datagram per frame. Runs are
	// at most MaxGSOSegments frames and one datagram's size (65507 bytes). Needs batching: GSO
	// with Batch 1 is ErrInvalid.
	GSO bool
	// Run is the run ID every frame of the sink carries (the end markers too), which tells
	// the receiver this run's datagrams from another's: a late datagram of an earlier run, or
	// one of a sender restarted on the same port. 0 means a random one (never 0); a caller that
	// sets it gives each run its own, and its frames carry FlagRunGiven (Report.RunGiven), so
	// that a receiver may read a form of the caller's in it with no chance of a random match.
	Run uint64
}

// Stats are the sink's counters, summed over engines.
type Stats struct {
	Packets uint64 // datagrams sent (end markers excluded)
	Bytes   uint64 // payload bytes sent (frame headers excluded)
	Errors  uint64 // packets that failed (not sent)
	// Syscalls is the number of send system calls made for packets: one sendmsg per Deliver,
	// one sendmmsg per WriteBatch of a Flush (a Flush makes more than one only when the kernel
	// stops short).
	Syscalls uint64
	Batches  uint64 // Flushes that had packets to send
	GSOMsgs  uint64 // GSO messages sent (each carries 2..MaxGSOSegments frames)
	Retries  uint64 // resends after ENOBUFS or EAGAIN
	GSOOff   uint64 // times the kernel refused GSO and the sink turned it off
}
