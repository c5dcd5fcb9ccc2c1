//go:build purego

package pcpu

// Enabled reports whether Pin pins (false under the purego tag).
const Enabled = false

// Pin returns -1 under the purego tag: no P is pinned, callers take their shared path.
func Pin() int { return -1 }

// Unpin does nothing under the purego tag.
func Unpin() {}

// Hint returns 0 under the purego tag: sharded state degrades to one shard.
func Hint() int { return 0 }
