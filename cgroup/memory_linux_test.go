package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The host has no memory, pids or cpu controller in cgroup2, so what the kernel would show with them
// is checked here against plain files in a fake tree.

func TestCreatePassesControllersOn(t *testing.T) {
	mount, slice := fakeTree(t, "memory pids")
	s := &Slice{mount: mount, path: slice, controllers: []string{"memory", "pids"}}
	leaf, err := s.Create("l-1")
	if err != nil {
		t.Fatal(err)
	}
	// Each controller is written on its own, so a plain file keeps the last write.
	if got := read(t, filepath.Join(slice, "cgroup.subtree_control")); got != "+pids" {
		t.Errorf("the slice's cgroup.subtree_control = %q, want the controllers enabled before its leaf was made", got)
	}
	if !exists(leaf.Path()) || len(leaf.controllers) != 2 {
		t.Errorf("leaf %s (controllers %v) not made as a slice passing the controllers on", leaf.Path(), leaf.controllers)
	}
	if _, err := os.Stat(filepath.Join(leaf.Path(), "cgroup.subtree_control")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the leaf's own subtree_control was written (err %v): a leaf with controllers enabled cannot hold processes", err)
	}

	plain := &Slice{mount: mount, path: leaf.Path()}
	if _, err := plain.Create("l-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(leaf.Path(), "cgroup.subtree_control")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a slice without controllers wrote cgroup.subtree_control (err %v)", err)
	}
}

func TestMemoryReadings(t *testing.T) {
	mount, slice := fakeTree(t, "memory")
	s := &Slice{mount: mount, path: slice}
	if _, ok := s.Memory(); ok {
		t.Error("Memory ok without memory.current")
	}
	if _, ok := s.OOMKills(); ok {
		t.Error("OOMKills ok without memory.events")
	}
	os.WriteFile(filepath.Join(slice, "memory.current"), []byte("123456\n"), 0o644)
	os.WriteFile(filepath.Join(slice, "memory.events"), []byte("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n"), 0o644)
	if n, ok := s.Memory(); !ok || n != 123456 {
		t.Errorf("Memory = %d, %v; want 123456", n, ok)
	}
	if n, ok := s.OOMKills(); !ok || n != 2 {
		t.Errorf("OOMKills = %d, %v; want 2", n, ok)
	}
	os.WriteFile(filepath.Join(slice, "memory.events"), []byte("low 0\nhigh 0\nmax 0\noom 0\n"), 0o644)
	if _, ok := s.OOMKills(); ok {
		t.Error("OOMKills ok without an oom_kill line")
	}
}

// TestMemoryOnThisHost reads a real slice: where the memory controller is not enabled, the readings
// say so rather than report zero.
func TestMemoryOnThisHost(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("mem")
	if err != nil {
		t.Fatal(err)
	}
	offered, _ := readFields(filepath.Join(s.Path(), "cgroup.controllers"))
	has := strings.Contains(" "+strings.Join(offered, " ")+" ", " memory ")
	if _, ok := s.Memory(); ok != has {
		t.Errorf("Memory ok = %v with controllers %v", ok, offered)
	}
	if _, ok := s.OOMKills(); ok != has {
		t.Errorf("OOMKills ok = %v with controllers %v", ok, offered)
	}
}
