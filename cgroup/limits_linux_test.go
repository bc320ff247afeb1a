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
	_, slice := fakeTree(t, "cpuset cpu io memory pids")
	err := setLimits(slice, Limits{MemoryMax: 64 << 20, PidsMax: 100, CPUs: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"memory.max": "67108864", "pids.max": "100", "cpu.max": "150000 100000"} {
		if got := read(t, filepath.Join(slice, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
}

func TestLimitsNeedTheirController(t *testing.T) {
	_, slice := fakeTree(t, "memory")
	err := setLimits(slice, Limits{MemoryMax: 1 << 20, PidsMax: 10, CPUs: 1})
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
	if err := setLimits(slice, Limits{PidsMax: -1}); err == nil {
		t.Error("negative limit accepted")
	}
	if err := setLimits(slice, Limits{}); err != nil {
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
