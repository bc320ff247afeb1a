package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RemoveCgroup removes dir, a cgroup the test made under a name no other test uses, at the test's
// cleanup. A cgroup left below it, or a process still in it once those being killed have had 5
// seconds to leave, fails the test, and is removed all the same: its processes (the test's own) are
// killed and waited for, then the cgroups are removed, children first, so that a test leaves nothing
// behind even when it fails. A dir that does not exist is not an error.
func RemoveCgroup(t testing.TB, dir string) {
	t.Helper()
	var below []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != dir {
			below = append(below, p)
		}
		return nil
	})
	if len(below) > 0 {
		t.Errorf("cleanup: %s still holds cgroups %v: removing them", dir, below)
	}
	if !awaitEmpty(dir, time.Now().Add(Slow(5*time.Second))) {
		t.Errorf("cleanup: %s still holds processes: killing them", dir)
		killTree(dir, append([]string{dir}, below...))
		if !awaitEmpty(dir, time.Now().Add(Slow(30*time.Second))) {
			t.Errorf("cleanup: %s still holds processes after SIGKILL", dir)
		}
	}
	deadline := time.Now().Add(Slow(10 * time.Second))
	for _, p := range slices.Backward(append([]string{dir}, below...)) {
		for {
			err := os.Remove(p) // EBUSY while the kernel still lets go of exited processes
			if err == nil || os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("cleanup: %v", err)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// awaitEmpty polls dir's cgroup.events until it reads "populated 0" or the deadline passes; a dir
// that is gone is empty.
func awaitEmpty(dir string, deadline time.Time) bool {
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil || !strings.Contains(string(b), "populated 1") {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killTree kills every process in dirs: with one write to dir's cgroup.kill, or, where the kernel
// has none, SIGKILL to each pid that the cgroups list.
func killTree(dir string, dirs []string) {
	if os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for _, d := range dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}
