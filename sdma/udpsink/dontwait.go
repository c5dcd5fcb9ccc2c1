//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris

package udpsink

import "syscall"

// msgDontWait is the read flag of a read that does not wait (readWaiting), on the systems whose
// ReadBatch (x/net) returns at once with it.
const msgDontWait = syscall.MSG_DONTWAIT
