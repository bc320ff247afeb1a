package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The inventory of docs/security.md lists every call in the program that opens, creates, reads,
// writes, renames, removes, lists or inspects a path, by the function that makes it: "reaper.readCwd:
// unix.Read" is not one (a descriptor), "cgroup.writeFile: os.WriteFile" is. TestInventory finds those
// calls in the source and fails when one is not listed there, or one listed is gone: a new way of
// touching the file system gets its line in the inventory (who else can write there, how it is
// opened) or does not get in. reaper's own state goes through internal/safefs, whose calls are the
// inventory's first lines.

// fsCalls are the functions of os, syscall and golang.org/x/sys/unix that take a path.
var fsCalls = map[string][]string{
	"os": {"Open", "OpenFile", "OpenRoot", "OpenInRoot", "Create", "CreateTemp", "ReadFile", "WriteFile", "Remove", "RemoveAll",
		"Rename", "Mkdir", "MkdirAll", "MkdirTemp", "Chown", "Lchown", "Chmod", "Chtimes", "Symlink", "Link", "Truncate",
		"ReadDir", "Stat", "Lstat", "Readlink", "DirFS", "Chdir", "CopyFS"},
	"unix": {"Open", "Openat", "Openat2", "Creat", "Mkdir", "Mkdirat", "Unlink", "Unlinkat", "Rmdir", "Rename", "Renameat",
		"Renameat2", "Stat", "Lstat", "Fstatat", "Statx", "Access", "Faccessat", "Faccessat2", "Statfs", "Chown", "Fchownat",
		"Lchown", "Chmod", "Fchmodat", "Readlink", "Readlinkat", "Link", "Linkat", "Symlink", "Symlinkat", "Mknod",
		"Mknodat", "Mkfifo", "Mkfifoat", "Truncate", "Getxattr", "Lgetxattr", "Setxattr", "Lsetxattr", "Mount", "Chdir",
		"Chroot", "Utimes", "UtimesNano", "UtimesNanoAt"},
}

func init() {
	fsCalls["syscall"] = fsCalls["unix"]
}

// importPaths maps the packages of fsCalls to their import paths.
var importPaths = map[string]string{"os": "os", "unix": "golang.org/x/sys/unix", "syscall": "syscall"}

// inventoried reports whether a package's files are part of the program (the tests, benchmarks,
// deploy checks and CI tools are not, nor the packages only tests may import).
func inventoried(pkg string) bool {
	return !strings.HasPrefix(pkg, "test/") && !strings.HasPrefix(pkg, "deploy/") && !strings.HasPrefix(pkg, ".ci") &&
		!slices.Contains(testOnly, pkg)
}

// TestInventory checks the inventory of docs/security.md against the source.
func TestInventory(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	found, err := findFSCalls(root)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := listedCalls(string(doc))
	for _, c := range slices.Sorted(maps.Keys(found)) {
		if !listed[c] {
			t.Errorf("%s (%s) touches the file system and is not in the inventory of docs/security.md: add its line (what path, as whom, who else can write its directory, how it is opened) as `%s`",
				c, found[c], c)
		}
	}
	for _, c := range slices.Sorted(maps.Keys(listed)) {
		if _, ok := found[c]; !ok {
			t.Errorf("docs/security.md lists `%s`, which the source no longer has: update the inventory", c)
		}
	}
	if len(found) < 20 {
		t.Errorf("only %d calls found: the scan is broken", len(found))
	}
}

// callRef matches an inventory entry: `pkg.Func: os.Call` or `pkg.Type.Method: unix.Call`.
var callRef = regexp.MustCompile("`([a-z][a-z/]*(?:\\.[A-Za-z0-9_]+)+: (?:os|unix|syscall)\\.[A-Za-z0-9]+)`")

func listedCalls(doc string) map[string]bool {
	out := map[string]bool{}
	for _, m := range callRef.FindAllStringSubmatch(doc, -1) {
		out[m[1]] = true
	}
	return out
}

// findFSCalls returns the program's calls of fsCalls, keyed "pkg.Func: os.Call", with where each is.
func findFSCalls(root string) (map[string]string, error) {
	found := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		if !inventoried(rel) {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		names := map[string]string{} // local name -> "os", "unix", "syscall"
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			for short, full := range importPaths {
				if imp == full {
					name := short
					if spec.Name != nil {
						name = spec.Name.Name
					}
					names[name] = short
				}
			}
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			owner := rel + "." + funcName(fn)
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				if short, ok := names[x.Name]; ok && slices.Contains(fsCalls[short], sel.Sel.Name) {
					pos := fset.Position(call.Pos())
					rp, _ := filepath.Rel(root, pos.Filename)
					found[owner+": "+short+"."+sel.Sel.Name] = rp + ":" + strconv.Itoa(pos.Line)
				}
				return true
			})
		}
		return nil
	})
	return found, err
}

// funcName names a function as the inventory does: "Func", or "Type.Method".
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
