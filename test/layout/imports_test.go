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

// The module's packages stand in floors (layers, top first), and an import only ever goes down:
//
//	cmd/reaper                    flags, environment, signals, exit; the metrics adapters
//	mcpserver, job                front ends of a Reaper: MCP clients; reaper run's job
//	reaper                        sessions and tasks
//	internal/guard,               the guard (its server's start, signals, wait and clean-up); the
//	  internal/sweep,             sweep after dead instances; `reaper ps`'s look at the machine
//	  internal/inspect
//	internal/kill,                the kill policy; what an instance leaves on the machine: its
//	  internal/instance           records, and how another process finds them
//	internal/pidns, internal/tty  a session's PID namespace: its init, the server's side of it, the
//	  internal/taskout,           protocol between them; a task's terminal or input pipe; a task's
//	  ...                         output
//	cgroup, internal/proc, ...    cgroupfs, /proc, the wait loop, reaper's own files, output as text,
//	                              the scripts commands run in, a message's measure before it is decoded,
//	                              a scope asked of systemd
//	internal/spare                descriptors in reserve for a teardown
//
// and beside them, services that know none of the above: internal/admin over internal/httpguard,
// mcpserver/internal/sdkfix (mcpserver's workarounds for the go-sdk) over internal/jsonlimit,
// internal/metrics (cmd/reaper adapts reaper's and mcpserver's Observer events to it from above), the
// only package that knows Prometheus's Go client.
// Only the packages below reaper signal, identify or wait for processes or touch cgroupfs;
// mcpserver holds no process or cgroup logic.
var layers = [][]string{
	{"cmd/reaper"},
	{"mcpserver", "job"},
	{"reaper"},
	{"internal/guard", "internal/sweep", "internal/inspect"},
	{"internal/kill", "internal/instance"},
	{"internal/pidns", "internal/tty", "internal/taskout", "internal/admin", "mcpserver/internal/sdkfix"},
	{"cgroup", "internal/proc", "internal/reap", "internal/safefs", "internal/textfit", "internal/httpguard", "internal/metrics",
		"internal/shell", "internal/jsonlimit", "internal/systemd"},
	{"internal/spare"},
}

// allowed lists, for each package of the module, the packages of the module its non-test files may
// import; every one of those is on a lower floor (TestLayers). The test packages and tools import
// what they test; internal/testutil and internal/mcptest are for tests only.
var allowed = map[string][]string{
	"cgroup":                    {"internal/spare"},
	"internal/proc":             {"internal/spare"},
	"internal/spare":            nil,
	"internal/reap":             nil,
	"internal/safefs":           nil,
	"internal/textfit":          nil,
	"internal/shell":            nil,
	"internal/httpguard":        nil,
	"internal/jsonlimit":        nil,
	"internal/metrics":          nil,
	"internal/systemd":          nil,
	"internal/pidns":            {"internal/proc", "internal/reap"},
	"internal/tty":              {"internal/proc"},
	"internal/taskout":          {"internal/safefs", "internal/textfit"},
	"internal/guard":            {"cgroup", "internal/proc", "internal/safefs", "internal/reap", "internal/kill", "internal/instance"},
	"internal/sweep":            {"cgroup", "internal/proc", "internal/safefs", "internal/kill", "internal/instance"},
	"internal/inspect":          {"cgroup", "internal/proc", "internal/safefs", "internal/instance"},
	"internal/admin":            {"internal/httpguard"},
	"mcpserver/internal/sdkfix": {"internal/jsonlimit"},
	"internal/kill":             {"cgroup", "internal/proc", "internal/reap", "internal/pidns", "internal/spare"},
	"internal/instance":         {"cgroup", "internal/proc", "internal/safefs"},
	"reaper": {"cgroup", "internal/proc", "internal/safefs", "internal/reap", "internal/pidns", "internal/tty", "internal/taskout", "internal/kill", "internal/spare",
		"internal/instance", "internal/sweep", "internal/guard", "internal/shell", "internal/systemd"},
	"mcpserver": {"reaper", "mcpserver/internal/sdkfix", "internal/httpguard", "internal/textfit", "internal/jsonlimit"},
	"job":       {"reaper", "internal/guard"},
	"cmd/reaper": {"mcpserver", "job", "reaper", "internal/guard", "internal/sweep", "internal/inspect", "internal/instance", "internal/admin",
		"cgroup", "internal/safefs", "internal/httpguard", "internal/metrics", "internal/pidns"},
	"internal/testutil":  {"internal/proc", "internal/pidns"},
	"internal/mcptest":   {"internal/testutil"},
	".ci/summary":        nil,
	"test/bench":         nil,
	"test/bench/density": nil,
	"test/bench/lean":    nil,
	"test/container":     nil,
	"test/e2e":           nil,
	"test/docs":          nil,
	"test/layout":        nil,
}

// TestLayers checks the rules themselves: every import allowed goes to a lower floor, so that none
// can run back up, and every package of the program stands on a floor.
func TestLayers(t *testing.T) {
	floor := map[string]int{}
	for i, pkgs := range layers {
		for _, p := range pkgs {
			floor[p] = i
		}
	}
	for pkg, imports := range allowed {
		from, ok := floor[pkg]
		if !ok {
			if inventoried(pkg) {
				t.Errorf("package %s stands on no floor: add it to layers", pkg)
			}
			continue
		}
		for _, imp := range imports {
			if to, ok := floor[imp]; !ok || to <= from {
				t.Errorf("%s may import %s, which is not on a lower floor", pkg, imp)
			}
		}
	}
}

// forbiddenOutside lists packages outside the module (and their subpackages) that some of ours must
// not import: the system call layer belongs where processes and cgroups are handled.
var forbiddenOutside = map[string][]string{
	"mcpserver": {"golang.org/x/sys/unix", "syscall"},
}

// onlyIn lists libraries (and their subpackages) that only the given packages of ours may import
// outside tests: one room per library, so that the rest of the program knows nothing of it.
var onlyIn = map[string][]string{
	"github.com/prometheus/client_golang": {"internal/metrics"},
	"github.com/prometheus/procfs":        {"internal/proc"},
	"github.com/containerd/cgroups":       {"cgroup"},
	"github.com/coreos/go-systemd":        {"internal/systemd"},
	"github.com/godbus/dbus":              {"internal/systemd"},
}

// testOnly are packages only tests, and other test-only packages, may import.
var testOnly = []string{"internal/testutil", "internal/mcptest"}

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
	for lib, in := range onlyIn {
		if (imp == lib || strings.HasPrefix(imp, lib+"/")) && !test && !slices.Contains(in, pkg) {
			t.Errorf("%s/%s imports %s, which only %v may", pkg, file, imp, in)
		}
	}
	ours, ok := strings.CutPrefix(imp, module+"/")
	if !ok {
		return
	}
	if slices.Contains(testOnly, ours) {
		if !test && !slices.Contains(testOnly, pkg) {
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

// TestPackageDocs: every package says what it is for, in a doc comment that opens with its name
// ("Package kill is ...", "Command reaper ...").
func TestPackageDocs(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for pkg := range allowed {
		files, _ := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		var doc, name string
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			name = af.Name.Name
			if af.Doc != nil {
				doc = af.Doc.Text()
			}
		}
		if name == "" {
			continue // test files only: their doc is the test's
		}
		want := "Package " + name + " "
		if name == "main" {
			want = "Command " + filepath.Base(pkg) + " "
		}
		if !strings.HasPrefix(doc, want) {
			t.Errorf("%s has no package doc opening with %q", pkg, want)
		}
	}
}
