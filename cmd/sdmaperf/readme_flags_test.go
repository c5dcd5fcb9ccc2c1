package main

import (
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// readme returns the README's text.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the part of text that starts with the heading line head, up to the next
// second-level heading.
func section(t *testing.T, text, head string) string {
	t.Helper()
	i := strings.Index(text, "\n"+head+"\n")
	if i < 0 {
		t.Fatalf("README.md has no heading %q", head)
	}
	s := text[i+len(head)+2:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

// TestReadmeNamesEveryFlag: every flag that -h lists (perftest's spellings too, but not the
// perftest flags that only get a notice) is named in the README's section on sdmaperf, and every
// flag that section names, and every flag of a `go run ./cmd/sdmaperf` command anywhere in the
// README, exists, so that a newcomer finds each flag and runs each command as shown.
func TestReadmeNamesEveryFlag(t *testing.T) {
	text := readme(t)
	sec := section(t, text, "## sdmaperf for perftest users")
	var cfg Config
	var raw rawFlags
	fs := newFlagSet(&cfg, &raw, io.Discard)
	na := map[string]bool{}
	for _, f := range notApplicable {
		na[f.name] = true
	}
	fs.VisitAll(func(f *flag.Flag) {
		if na[f.Name] {
			return
		}
		named := regexp.MustCompile("[` ]-{1,2}" + regexp.QuoteMeta(f.Name) + "([ =`\n]|$)")
		if !named.MatchString(sec) {
			t.Errorf("README's sdmaperf section does not name -%s", f.Name)
		}
	})
	var names []string
	for _, m := range regexp.MustCompile("`-{1,2}([A-Za-z][A-Za-z0-9_-]*)").FindAllStringSubmatch(sec, -1) {
		names = append(names, m[1])
	}
	commands := 0
	for _, line := range strings.Split(text, "\n") {
		_, cmd, ok := strings.Cut(line, "go run ./cmd/sdmaperf")
		if !ok || strings.HasPrefix(cmd, "`") {
			continue
		}
		commands++
		cmd, _, _ = strings.Cut(cmd, "#")
		cmd, _, _ = strings.Cut(cmd, "|")
		for _, m := range regexp.MustCompile(`(?:^| )-{1,2}([A-Za-z][A-Za-z0-9_-]*)`).FindAllStringSubmatch(cmd, -1) {
			names = append(names, m[1])
		}
	}
	if commands < 20 {
		t.Errorf("found %d sdmaperf commands in the README, want 20 or more", commands)
	}
	for _, name := range names {
		if fs.Lookup(name) == nil && name != "h" {
			t.Errorf("the README names -%s, which sdmaperf does not have", name)
		}
	}
}

// TestServerIgnoresNotApplicableFlags: the README says that perftest's flags that do not apply
// (-d, -F, -R, ...) get a one-line notice and are ignored, and -server (perftest's server side,
// which takes -d too) printed that notice and then refused the flag as one it does not take.
func TestServerIgnoresNotApplicableFlags(t *testing.T) {
	for _, na := range notApplicable {
		args := []string{"-server", "-" + na.name}
		if na.isValue {
			args = append(args, "x")
		}
		var stderr strings.Builder
		cfg, err := parseConfig(args, &stderr)
		if err != nil {
			t.Errorf("%v: %v", args, err)
			continue
		}
		if !cfg.Server || !strings.Contains(stderr.String(), "not applicable: -"+na.name+" (") {
			t.Errorf("%v: server %v, stderr %q: want the notice and a server run", args, cfg.Server, stderr.String())
		}
	}
}
