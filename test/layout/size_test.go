package layout

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSize: no package holds more than a quarter of the program's code, so that none grows back into
// the room of every job that package reaper once was; a package that outgrows it is split by job.
// The program is the packages of this module the reaper binary links (`go list -deps`): test
// helpers, test programs, benchmarks and CI's tools are not its code. A package's size is the lines
// of its non-test Go files, for every system. With -v it logs the program's size by package, largest
// first (docs/layout.md keeps such a table).
func TestSize(t *testing.T) {
	sizes, total := programSize(t, "../..")
	for _, p := range sizes {
		if 4*p.lines > total {
			t.Errorf("%s holds %d of the program's %d lines (%.1f%%), over a quarter", p.pkg, p.lines, total, 100*float64(p.lines)/float64(total))
		}
	}
	var b strings.Builder
	for _, p := range sizes {
		fmt.Fprintf(&b, "\n%-28s %6d  %4.1f%%", p.pkg, p.lines, 100*float64(p.lines)/float64(total))
	}
	t.Logf("the program: %d lines in %d packages%s", total, len(sizes), b.String())
}

// pkgSize is one package of the program and its lines.
type pkgSize struct {
	pkg   string // relative to the module
	lines int
}

// programSize returns the size of each package of the program in the module at root, largest first,
// and their total.
func programSize(t *testing.T, root string) ([]pkgSize, int) {
	t.Helper()
	out := goList(t, root, "-deps", "-f", "{{if .Module}}{{if eq .Module.Path \""+module+"\"}}{{.Dir}}{{end}}{{end}}", "./cmd/reaper")
	base, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []pkgSize
	total := 0
	for _, dir := range strings.Fields(string(out)) {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		n := 0
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n += bytes.Count(b, []byte("\n"))
		}
		rel, _ := filepath.Rel(base, dir)
		sizes = append(sizes, pkgSize{filepath.ToSlash(rel), n})
		total += n
	}
	slices.SortFunc(sizes, func(a, b pkgSize) int { return b.lines - a.lines })
	return sizes, total
}
