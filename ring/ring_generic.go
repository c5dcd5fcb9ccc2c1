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

// enqueueSP is EnqueueSP's worker: the Go writer and sync/atomic stores.
func enqueueSP(r *Ring, ds []desc.Desc, skip int) (uint64, error) { return enqueueSPGo(r, ds, skip) }

// dequeue is Dequeue's worker: the Go copy and sync/atomic stores.
func dequeue(r *Ring, dst []desc.Desc) int { return dequeueGo(r, dst) }
