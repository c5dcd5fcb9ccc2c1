package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestIcountScriptExitStatus runs bench/icount.sh, as the README shows it, with stand-ins for
// valgrind (runs the benchmark binary as given) and callgrind_annotate (prints thousands of
// function lines, as a real profile of a benchmark with its setup does): the script prints its
// 60 lines and exits 0. It cut its listing with `| head -60` under pipefail, so once the listing
// was longer the awk before head died of SIGPIPE and the script exited 141, every run of the
// README's command.
func TestIcountScriptExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bench test binary")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := t.TempDir()
	fakes := map[string]string{
		// Drop valgrind's options, run the program with its arguments.
		"valgrind": "#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in --*) shift ;; *) break ;; esac; done\nexec \"$@\"\n",
		// callgrind_annotate's lines: "Ir (percent)  file:function [object]".
		"callgrind_annotate": "#!/bin/sh\necho '1,000,000 (100.0%)  PROGRAM TOTALS'\ni=0\nwhile [ $i -lt 5000 ]; do echo \"1,000 ( 0.1%)  x.go:github.com/gosdma/gosdma/sdma.f$i [bench.test]\"; i=$((i+1)); done\n",
	}
	for name, body := range fakes {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bash, "icount.sh", "Payload/impl=sdma/size=256", "1")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash bench/icount.sh: %v\nstderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 60 || !strings.Contains(lines[0], "TOTALS") || !strings.HasSuffix(lines[59], fmt.Sprintf("sdma.f%d", 58)) {
		t.Fatalf("got %d lines, first %q, last %q; want 60: the totals, then f0..f58", len(lines), lines[0], lines[len(lines)-1])
	}
}
