package layout

import (
	"bufio"
	"bytes"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// public are the packages a program outside this module may import: their exported identifiers
// are their API, and every type it names is one of theirs, another public package's of this module,
// or another module's; never one of an internal package, which a user cannot name (reaper/doc.go
// says why package reaper keeps its own types).
var public = []string{"reaper", "cgroup", "mcpserver", "job"}

// TestPublicTypesOwn fails when an exported identifier of a public package names a type of an
// internal package: an alias of one, a field, a parameter, a result, a method's, a constant's or a
// variable's type, at any depth (a slice of them, a field of an exported struct field's own type
// defined there). It reads the packages' compiled export data (go list -export), for Linux.
func TestPublicTypesOwn(t *testing.T) {
	var paths []string
	for _, p := range public {
		paths = append(paths, module+"/"+p)
	}
	exports := exportData(t, paths)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	for _, path := range paths {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, leak := range internalTypes(pkg) {
			t.Errorf("%s", leak)
		}
	}
}

// exportData builds the packages and returns the export data file of each and of everything they
// import, by import path.
func exportData(t *testing.T, paths []string) map[string]string {
	t.Helper()
	out := goList(t, "../..", append([]string{"-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, paths...)...)
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	return exports
}

// internalTypes lists where pkg's exported identifiers name a type of an internal package.
func internalTypes(pkg *types.Package) []string {
	v := apiVisitor{home: pkg, seen: map[types.Type]bool{}}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		where := pkg.Name() + "." + name
		switch obj := obj.(type) {
		case *types.TypeName:
			if obj.IsAlias() {
				v.typ(where, obj.Type())
				continue
			}
			v.named(where, obj.Type())
		default: // functions, variables, constants
			v.typ(where, obj.Type())
		}
	}
	return v.leaks
}

// apiVisitor walks the types an API names.
type apiVisitor struct {
	home  *types.Package
	seen  map[types.Type]bool
	leaks []string
}

// named walks a type the package defines: what its underlying type shows, and its exported methods.
func (v *apiVisitor) named(where string, t types.Type) {
	if v.seen[t] {
		return
	}
	v.seen[t] = true
	n, ok := t.(*types.Named)
	if !ok {
		return
	}
	v.typ(where, n.Underlying())
	for m := range types.NewMethodSet(types.NewPointer(n)).Methods() {
		if m.Obj().Exported() {
			v.typ(where+"."+m.Obj().Name(), m.Type())
		}
	}
}

func (v *apiVisitor) typ(where string, t types.Type) {
	switch t := t.(type) {
	case *types.Alias:
		v.typ(where, types.Unalias(t))
	case *types.Named:
		p := t.Obj().Pkg()
		switch {
		case p == nil: // error, comparable
		case internalPath(p.Path()):
			v.leaks = append(v.leaks, fmt.Sprintf("%s names %s.%s, a type of the internal package %s: give %s a type of its own",
				where, p.Name(), t.Obj().Name(), p.Path(), v.home.Name()))
		case p == v.home:
			v.named(p.Name()+"."+t.Obj().Name(), t)
		}
		if args := t.TypeArgs(); args != nil {
			for a := range args.Types() {
				v.typ(where, a)
			}
		}
	case *types.Pointer:
		v.typ(where, t.Elem())
	case *types.Slice:
		v.typ(where, t.Elem())
	case *types.Array:
		v.typ(where, t.Elem())
	case *types.Chan:
		v.typ(where, t.Elem())
	case *types.Map:
		v.typ(where, t.Key())
		v.typ(where, t.Elem())
	case *types.Signature:
		for p := range t.Params().Variables() {
			v.typ(where, p.Type())
		}
		for r := range t.Results().Variables() {
			v.typ(where, r.Type())
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() || f.Embedded() { // an embedded type's exported fields are promoted
				v.typ(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			if m.Exported() {
				v.typ(where+"."+m.Name(), m.Type())
			}
		}
	}
}

// internalPath reports whether path names an internal package, which only its parent's tree may
// import.
func internalPath(path string) bool {
	return strings.HasSuffix(path, "/internal") || strings.Contains(path, "/internal/")
}

// goList runs go list with args in the module at root, for Linux, and returns its output.
func goList(t *testing.T, root string, args ...string) []byte {
	t.Helper()
	list := exec.Command("go", append([]string{"list"}, args...)...)
	list.Dir = root
	list.Env = append(os.Environ(), "GOOS=linux")
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	return out
}
