//go:build linux

package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the master, which reads what is written to the slave,
// and the slave, a terminal as far as golang.org/x/term can tell.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil { // unlockpt
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN) // ptsname
	require.NoError(t, err)
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestProgressOnATerminal: on a terminal, a long run gets a progress line that shows the size
// and the rate; a short run, or -progress=false, gets none.
func TestProgressOnATerminal(t *testing.T) {
	master, slave := openPTY(t)
	require.True(t, isTerminal(slave))

	cfg, err := parseConfig([]string{"-D", "10s"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Nil(t, newProgress(cfg, 4096, slave, 100*time.Millisecond), "a short run gets no progress line")
	off, err := parseConfig([]string{"-D", "10s", "-progress=false"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Nil(t, newProgress(off, 4096, slave, off.Duration), "-progress=false")

	// -n of any size: a long run gets a line. The length guessed from an -n past 2^63/1000
	// overflowed to a negative one, and the longest runs got none (-n is at most 2^31-1 now,
	// the largest tried here).
	for _, n := range []string{"100000000", strconv.Itoa(maxPackets)} {
		huge, err := parseConfig([]string{"-n", n}, new(bytes.Buffer))
		require.NoError(t, err)
		assert.NotNil(t, newProgress(huge, 4096, slave, expectedLength(huge)), "-n %s", n)
	}

	p := newProgress(cfg, 4096, slave, cfg.Duration)
	require.NotNil(t, p)
	p.update(1000, 5*time.Second, 1234.5)
	p.finish()

	// Read what reached the terminal: the master end, bounded generously.
	got := make(chan string, 1)
	go func() {
		var all []byte
		buf := make([]byte, 4096)
		for !strings.Contains(string(all), "MiB/sec") {
			n, err := master.Read(buf)
			if err != nil {
				break
			}
			all = append(all, buf[:n]...)
		}
		got <- string(all)
	}()
	select {
	case out := <-got:
		assert.Contains(t, out, "4096 bytes")
		assert.Contains(t, out, "1234.50 MiB/sec")
	case <-time.After(30 * time.Second):
		t.Fatal("nothing reached the terminal")
	}
}
