package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/cgreaper/reaper"

// allowed lists, for each package of the module, the packages of the module its non-test files may
// import. Dependencies run one way: cmd -> mcpserver -> reaper -> cgroup, and reaper alone uses
// internal/proc (process identification: only reaper's side signals or identifies processes).
// cgroup imports nothing of ours; mcpserver holds no process or cgroup logic. internal/metrics
// hears reaper and mcpserver through their Observer interfaces; internal/admin serves HTTP and knows
// none of them.
var allowed = map[string][]string{
	"cgroup":            nil,
	"internal/proc":     nil,
	"internal/testutil": {"internal/proc"},
	"reaper":            {"cgroup", "internal/proc"},
	"mcpserver":         {"reaper"},
	"internal/metrics":  {"mcpserver", "reaper"},
	"internal/admin":    nil,
	"cmd/reaper":        {"mcpserver", "reaper", "cgroup", "internal/admin", "internal/metrics"},
	".ci/summary":       nil,
	"test/bench":        nil,
	"test/bench/lean":   nil,
	"test/container":    nil,
	"test/e2e":          nil,
	"test/layout":       nil,
}

// forbiddenOutside lists packages outside the module (and their subpackages) that some of ours must
// not import: the system call layer belongs where processes and cgroups are handled, and the
// Prometheus client library in internal/metrics alone (reaper and mcpserver report through their
// Observer interfaces).
var forbiddenOutside = map[string][]string{
	"mcpserver":      {"golang.org/x/sys/unix", "syscall", "github.com/containerd/cgroups/v3", "github.com/prometheus/procfs", clientGolang},
	"reaper":         {clientGolang},
	"cgroup":         {clientGolang},
	"internal/proc":  {clientGolang},
	"internal/admin": {clientGolang},
}

const clientGolang = "github.com/prometheus/client_golang"

// testOnly are packages only tests may import.
var testOnly = []string{"internal/testutil"}

func TestImports(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") && d.Name() != ".ci" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() && path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own, with its packages
			}
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		pkgs[rel] = true
		test := strings.HasSuffix(path, "_test.go")
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			check(t, rel, filepath.Base(path), imp, test)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for pkg := range pkgs {
		if _, ok := allowed[pkg]; !ok {
			t.Errorf("package %s has no import rule: add it to allowed in %s", pkg, "test/layout/imports_test.go")
		}
	}
}

func check(t *testing.T, pkg, file, imp string, test bool) {
	t.Helper()
	if slices.ContainsFunc(forbiddenOutside[pkg], func(f string) bool { return imp == f || strings.HasPrefix(imp, f+"/") }) {
		t.Errorf("%s/%s imports %s, which it must not", pkg, file, imp)
	}
	ours, ok := strings.CutPrefix(imp, module+"/")
	if !ok {
		return
	}
	if slices.Contains(testOnly, ours) {
		if !test {
			t.Errorf("%s/%s imports %s, which only tests may import", pkg, file, ours)
		}
		return
	}
	if test {
		return // tests may import any package below or beside the one they test
	}
	if !slices.Contains(allowed[pkg], ours) {
		t.Errorf("%s/%s imports %s; %s may import only %v of this module", pkg, file, ours, pkg, allowed[pkg])
	}
}
