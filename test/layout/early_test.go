package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestEarlyInitialisation: what the program does before main initialises before the libraries that
// would delay it, as GODEBUG=inittrace=1 shows on the binary. Package nsinit (a PID namespace's init,
// which a session's first command waits for, and whose start competes with the server's for the CPU)
// initialises before reflection, encoding/gob and the system call library. An import that pulled one
// of them under it would silently put them back on the path of every session's start.
func TestEarlyInitialisation(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("package nsinit is Linux-only")
	}
	bin := filepath.Join(t.TempDir(), "reaper")
	build := exec.Command("go", "build", "-o", bin, "./cmd/reaper")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reaper --version: %v\n%s", err, out)
	}
	var order []string // packages in the order they initialised (those with work to do)
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "init" {
			order = append(order, f[1])
		}
	}
	for _, tc := range []struct {
		pkg    string
		before []string
	}{
		{module + "/cmd/reaper/internal/nsinit", []string{"reflect", "encoding/gob", "golang.org/x/sys/unix",
			"github.com/google/jsonschema-go/jsonschema", "github.com/modelcontextprotocol/go-sdk/mcp"}},
	} {
		at := slices.Index(order, tc.pkg)
		if at < 0 {
			t.Errorf("%s did not initialise:\n%s", tc.pkg, out)
			continue
		}
		for _, slow := range tc.before {
			if i := slices.Index(order, slow); i < 0 {
				t.Errorf("%s did not initialise (or has nothing to initialise any more): update this list", slow)
			} else if i < at {
				t.Errorf("%s initialises before %s", slow, tc.pkg)
			}
		}
		t.Logf("%s initialises %d of %d", tc.pkg, at+1, len(order))
	}
}

// notLinked are libraries whose package initialisation every reaper process would pay at its start,
// and a session starts three of them (guard, server, init) from this one binary: containerd's cgroups
// (0.27 ms of CPU: its stats' protobuf descriptors, cilium/ebpf). cgroup does its part itself; tests
// may still use them. (Prometheus's Go client and procfs are linked: a process's start-up time is no
// reason to hand-write what they do.)
var notLinked = []string{
	"github.com/containerd/cgroups",
	"github.com/cilium/ebpf",
}

// TestNotLinked: the reaper binary links none of notLinked, directly or through another library.
func TestNotLinked(t *testing.T) {
	list := exec.Command("go", "list", "-deps", "./cmd/reaper")
	list.Dir = "../.."
	list.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dep := range strings.Lines(string(out)) {
		dep = strings.TrimSpace(dep)
		for _, lib := range notLinked {
			if dep == lib || strings.HasPrefix(dep, lib+"/") {
				t.Errorf("reaper links %s (see notLinked)", dep)
			}
		}
	}
}
