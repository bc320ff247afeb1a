package proc

import (
	"os"
	"os/exec"
	"testing"
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
