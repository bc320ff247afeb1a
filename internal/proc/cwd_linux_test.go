package proc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCwdRemoved: a process's working directory reads as removed once it is, and not before.
func TestCwdRemoved(t *testing.T) {
	dir := t.TempDir() + "/cwd"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "1000")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if CwdRemoved(cmd.Process.Pid) {
		t.Fatal("the working directory reads as removed while it is there")
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if !CwdRemoved(cmd.Process.Pid) {
		t.Error("the working directory does not read as removed once it is")
	}
	if CwdRemoved(1 << 30) {
		t.Error("a process that does not exist reads as having a removed directory")
	}
}

// TestCwdRemovedTooLong: a working directory whose path is too long to read whole reads as removed
// (the safe side: the caller drops the shell), though it is there.
func TestCwdRemovedTooLong(t *testing.T) {
	root := t.TempDir()
	part := strings.Repeat("d", 200)
	// 25 levels of 201 bytes each: past PATH_MAX (4096), made and entered by relative steps (-P: the
	// shell keeps no path of its own, which would be too long).
	script := "set -e"
	for range 25 {
		script += "; mkdir " + part + "; cd -P " + part
	}
	cmd := exec.Command("sh", "-c", script+"; exec sleep 1000")
	cmd.Dir = root
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm"); string(comm) == "sleep\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell did not reach its long directory in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !CwdRemoved(cmd.Process.Pid) {
		t.Error("a working directory too long to read does not read as removed")
	}
}
