package sdma_test

import (
	"os"
	"strings"
	"testing"
)

// exampleSource returns the text of file from the line that starts with from up to (not
// including) the line that starts with to.
func exampleSource(t *testing.T, file, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+from)
	if i < 0 {
		t.Fatalf("%s has no line starting %q", file, from)
	}
	s = s[i+1:]
	j := strings.Index(s, "\n"+to)
	if j < 0 {
		t.Fatalf("%s has no line starting %q after %q", file, to, from)
	}
	return s[:j+1]
}

// TestReadmeShowsTheExamples: the README's "Send one packet" program, API sketch and 1 MiB
// message are the tested examples, word for word, so the README compiles as written. When an
// example changes, copy it into the README.
func TestReadmeShowsTheExamples(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, c := range []struct{ file, from, to string }{
		// The body of Example_sendOnePacket is the body of the README's main.
		{"example_sendone_test.go", "\twire := sdma.SinkFunc", "\t// Output:"},
		// The API sketch is the example file from the packet type to the end of Example_readme.
		{"example_readme_test.go", "// packet is a caller's txreq type", "// TestReadmeSendAllocs"},
	} {
		src := strings.TrimRight(exampleSource(t, c.file, c.from, c.to), "\n") + "\n"
		if !strings.Contains(readme, src) {
			t.Errorf("README.md does not show %s as it is: copy this into it:\n%s", c.file, src)
		}
	}
	// The Messages section's 1 MiB message is the body of usdma's Example, one tab less.
	body := exampleSource(t, "../usdma/example_test.go", "\tsink := &sdmatest.DiscardSink{}", "}")
	src := strings.ReplaceAll("\n"+body, "\n\t", "\n")[1:]
	if !strings.Contains(readme, "```go\n"+src+"```\n") {
		t.Errorf("README.md does not show usdma/example_test.go's Example as it is: copy this into it:\n%s", src)
	}
}
