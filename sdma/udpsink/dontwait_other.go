//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris)

package udpsink

// msgDontWait is 0 here: x/net's ReadBatch waits whatever the flags, so readWaiting reads nothing.
const msgDontWait = 0
