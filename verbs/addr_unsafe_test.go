package verbs

import "unsafe"

func cpuAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
