package prefetch_test

import (
	"bytes"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gosdma/gosdma/internal/prefetch"
)

// TestPrefetchChangesNothing runs every prefetch, with every line count WriteLines takes
// specially (none, negative, the unrolled four, others), over a buffer, and checks that the
// buffer is unchanged: a prefetch is a hint.
func TestPrefetchChangesNothing(t *testing.T) {
	buf := make([]byte, 16*prefetch.LineSize)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	want := bytes.Clone(buf)
	p := unsafe.Pointer(&buf[0])
	for _, n := range []int{-1, 0, 1, 2, 3, 4, 5, 16} {
		prefetch.WriteLines(p, n)
	}
	prefetch.WriteLines(unsafe.Pointer(&buf[3]), 4) // not line-aligned: the lines it touches
	prefetch.Write(p)
	prefetch.Write(unsafe.Pointer(&buf[len(buf)-1]))
	prefetch.Read(p)
	prefetch.Read(unsafe.Pointer(&buf[len(buf)-1]))
	if !bytes.Equal(buf, want) {
		t.Fatal("a prefetch changed memory")
	}
}

// TestEnabled checks that the instructions are issued exactly where the package says: amd64
// with the gc toolchain, outside the purego tag.
func TestEnabled(t *testing.T) {
	want := runtime.GOARCH == "amd64" && runtime.Compiler == "gc" && !purego
	if prefetch.Enabled != want {
		t.Fatalf("Enabled = %v on %s/%s (purego %v), want %v", prefetch.Enabled, runtime.GOARCH, runtime.Compiler, purego, want)
	}
}

// BenchmarkWriteLines4 is the cost of the common call (popCur's touch, sdma's touchTx) on lines
// the caller's core holds already.
func BenchmarkWriteLines4(b *testing.B) {
	buf := make([]byte, 4*prefetch.LineSize)
	p := unsafe.Pointer(&buf[0])
	for b.Loop() {
		prefetch.WriteLines(p, 4)
	}
}
