package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTree builds mount/reaper/s-1 in a temporary directory, with the interface files a real cgroup
// would have, offering the given controllers. The host has no memory, pids or cpu controller in
// cgroup2, so limits are checked here against plain files.
func fakeTree(t *testing.T, controllers string) (mount, slice string) {
	t.Helper()
	mount = t.TempDir()
	slice = filepath.Join(mount, "reaper", "s-1")
	if err := os.MkdirAll(slice, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"cgroup.controllers": controllers + "\n", "memory.max": "max\n", "pids.max": "max\n", "cpu.max": "max 100000\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(slice, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return mount, slice
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestLimitsAreWritten(t *testing.T) {
	mount, slice := fakeTree(t, "cpuset cpu io memory pids")
	os.WriteFile(filepath.Join(slice, "memory.swap.max"), []byte("max\n"), 0o644)
	err := setLimits(mount, slice, Limits{MemoryMax: 64 << 20, PidsMax: 100, CPUs: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"memory.max": "67108864", "memory.swap.max": "0", "pids.max": "100", "cpu.max": "150000 100000"} {
		if got := read(t, filepath.Join(slice, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
}

// TestLimitsWithoutSwapAccounting: where the kernel accounts no swap (no memory.swap.max), the memory
// limit is memory.max alone, and no swap file is written.
func TestLimitsWithoutSwapAccounting(t *testing.T) {
	mount, slice := fakeTree(t, "memory")
	if err := setLimits(mount, slice, Limits{MemoryMax: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(slice, "memory.max")); got != "1048576" {
		t.Errorf("memory.max = %q", got)
	}
	if _, err := os.Stat(filepath.Join(slice, "memory.swap.max")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("memory.swap.max written where the kernel has none: %v", err)
	}
}

// TestLimitsNeedTheMountpoint: a slice opened without its mountpoint (OpenSlice) takes no limits,
// rather than containerd's default of /sys/fs/cgroup.
func TestLimitsNeedTheMountpoint(t *testing.T) {
	_, slice := fakeTree(t, "pids")
	if err := setLimits("", slice, Limits{PidsMax: 8}); err == nil || !strings.Contains(err.Error(), "mountpoint") {
		t.Errorf("err = %v, want one that names the missing mountpoint", err)
	}
	if err := setLimits(t.TempDir(), slice, Limits{PidsMax: 8}); err == nil || !strings.Contains(err.Error(), "not below") {
		t.Errorf("err = %v, want one that says the slice is not below the mountpoint", err)
	}
	if got := read(t, filepath.Join(slice, "pids.max")); got != "max" {
		t.Errorf("pids.max = %q after refused writes", got)
	}
}

// TestCreatePassesControllersOn: a slice made by a root with controllers enables them for its
// children before it makes a leaf, and the leaf passes them on in turn; the leaf's own subtree_control
// stays untouched (a cgroup with controllers enabled for its children cannot hold processes).
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

func TestLimitsNeedTheirController(t *testing.T) {
	mount, slice := fakeTree(t, "memory")
	err := setLimits(mount, slice, Limits{MemoryMax: 1 << 20, PidsMax: 10, CPUs: 1})
	if !errors.Is(err, ErrNoController) {
		t.Fatalf("err = %v, want ErrNoController", err)
	}
	for _, want := range []string{"pids", "cpu", slice, "offered: memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if got := read(t, filepath.Join(slice, "memory.max")); got != "max" {
		t.Errorf("memory.max = %q: limits were half-applied before the error", got)
	}
	if err := setLimits(mount, slice, Limits{PidsMax: -1}); err == nil {
		t.Error("negative limit accepted")
	}
	if err := setLimits(mount, slice, Limits{}); err != nil {
		t.Errorf("no limits: %v", err)
	}
}

func TestLimitsOnThisHost(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("limited")
	if err != nil {
		t.Fatal(err)
	}
	offered, _ := readFields(filepath.Join(s.Path(), "cgroup.controllers"))
	for _, tc := range []struct {
		controller string
		limits     Limits
	}{{"memory", Limits{MemoryMax: 1 << 30}}, {"pids", Limits{PidsMax: 64}}, {"cpu", Limits{CPUs: 1}}} {
		err := s.SetLimits(tc.limits)
		has := strings.Contains(" "+strings.Join(offered, " ")+" ", " "+tc.controller+" ")
		switch {
		case has && err != nil:
			t.Errorf("%s offered but SetLimits failed: %v", tc.controller, err)
		case !has && !errors.Is(err, ErrNoController):
			t.Errorf("%s not offered (offered: %v): err = %v, want ErrNoController", tc.controller, offered, err)
		case !has && !strings.Contains(err.Error(), tc.controller):
			t.Errorf("error %q does not name %s", err, tc.controller)
		}
	}
}
