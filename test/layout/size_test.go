package layout

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoPackageOverAQuarter: no package holds more than a quarter of the program's code (the
// non-test Go lines of the module, deploy/'s own module aside), so that none grows back into the room
// of every job that package reaper once was. A package that outgrows it is split by job.
func TestNoPackageOverAQuarter(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{}
	total := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "deploy" || strings.HasPrefix(d.Name(), ".") && rel != "." && rel != ".ci" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := bytes.Count(b, []byte("\n"))
		lines[filepath.Dir(rel)] += n
		total += n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for pkg, n := range lines {
		if 4*n > total {
			t.Errorf("%s holds %d of the program's %d lines (%.1f%%), over a quarter", pkg, n, total, 100*float64(n)/float64(total))
		}
	}
	t.Logf("reaper: %d of %d lines (%.1f%%)", lines["reaper"], total, 100*float64(lines["reaper"])/float64(total))
}
