//go:build !amd64 || !gc || purego

package pio

// implementations on this platform: the portable Go writer only.
var implementations = []string{"go"}

func setImpl(name string) (restore func(), ok bool) { return func() {}, name == "go" }

// writeQWs writes len(src)/8 whole quadwords of src to dst (len(dst) >= that).
func writeQWs(dst, src []byte) { writeQWsGo(dst, src) }
