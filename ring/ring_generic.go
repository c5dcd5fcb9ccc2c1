//go:build !amd64 || !gc || purego

package ring

import "github.com/gosdma/gosdma/desc"

// implementations on this platform: the portable Go path only.
var implementations = []string{"go"}

// setImpl selects an implementation by name; only "go" exists here.
func setImpl(name string) (restore func(), ok bool) {
	return func() {}, name == "go"
}

// writeBatch is Write's worker: the portable Go path.
func writeBatch(slots []desc.Desc, mask uint64, shift uint, start uint64, ds []desc.Desc, skip int) {
	writeGo(slots, mask, shift, start, ds, skip)
}

// writePublishSP is EnqueueSP's worker: the Go writer and sync/atomic stores.
func writePublishSP(r *Ring, start uint64, ds []desc.Desc, skip int) {
	writePublishSPGo(r, start, ds, skip)
}

// dequeueBatch is Dequeue's worker: the Go copy and sync/atomic stores.
func dequeueBatch(r *Ring, h uint64, dst []desc.Desc) { dequeueGo(r, h, dst) }
