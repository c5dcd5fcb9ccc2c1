package sdma

import "errors"

// Sentinel errors of package sdma, with the kernel errno each stands for. Typed errors carry
// detail and match these with errors.Is.
var (
	ErrNoData     = errors.New("sdma: zero-length txreq")                     // -ENODATA (sdma_txinit)
	ErrMsgSize    = errors.New("sdma: packet longer than 16383 bytes")        // -EMSGSIZE (sdma_txinit)
	ErrMapping    = errors.New("sdma: DMA mapping failed")                    // -ENOSPC (sdma_txadd_*)
	ErrNoDesc     = errors.New("sdma: cannot extend or coalesce descriptors") // -ENOMEM (_extend_sdma_tx_descs)
	ErrInvalid    = errors.New("sdma: invalid argument or txreq state")       // -EINVAL
	ErrBusy       = errors.New("sdma: no room in the descriptor ring")        // -EBUSY
	ErrNotRunning = errors.New("sdma: engine not running; txreq flushed")     // -ECOMM
	ErrAgain      = errors.New("sdma: progress made, retry")                  // -EAGAIN (sleep callback)
	ErrQueued     = errors.New("sdma: txreq queued to iowait")                // -EIOCBQUEUED (sleep callback)
	ErrClosed     = errors.New("sdma: device closed")                         // Device.Close or Shutdown began: new calls are refused
	ErrHalted     = errors.New("sdma: engine halted")                         // matched by a *HaltError: the hardware model halted the engine
	// ErrReset: SendListIn's epoch is over, a sw clean reset the ring since Epoch returned it;
	// returned bare, the list and the ring unchanged.
	ErrReset = errors.New("sdma: ring reset since the epoch (a sw clean came between)")
)

// errNilContext is the answer of an entry point that takes a context to a nil one: ErrInvalid,
// given before anything else is done (the call changes nothing). A nil ctx would otherwise panic,
// and only when the call had to wait.
func errNilContext(op string) error { return txErr(op, ErrInvalid, "nil context") }
