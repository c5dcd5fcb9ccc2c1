//go:build (amd64 || arm64) && gc && !purego

package goid

// G returns the address of the calling goroutine's runtime g, from where the runtime keeps it
// (g_amd64.s: thread-local storage, one MOV; g_arm64.s: the g register, R28): no system call, no
// allocation. It names the goroutine running now: no two running goroutines share it, and the
// runtime reuses it only after its goroutine has exited, so a holder of one must forget it before
// its goroutine ends. 0 where the build has none (HaveG false).
func G() uintptr

// HaveG reports whether G works on this build (amd64 or arm64, gc, not purego).
const HaveG = true
