package layout

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

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
