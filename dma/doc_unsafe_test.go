package dma

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestUnsafeFilesAsDocumented holds the package doc's word on where unsafe code lives: every
// non-test file that imports unsafe is named *_unsafe.go or is named in doc.go. The doc said
// "Unsafe code lives in files named *_unsafe.go" while the fast paths' files (direct_fast.go's
// index arithmetic, store_amd64.go's plain stores through atomics) used unsafe too, so a reader
// auditing the package's unsafe code by that rule missed them.
func TestUnsafeFilesAsDocumented(t *testing.T) {
	docText, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, "_unsafe.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "unsafe" && !strings.Contains(string(docText), name) {
				t.Errorf("%s imports unsafe: neither named *_unsafe.go nor named in doc.go", name)
			}
		}
	}
}
