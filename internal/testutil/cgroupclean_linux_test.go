package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// errorRecorder is a testing.TB whose Errorf records what RemoveCgroup reports, so that a test of it
// can check those reports without failing.
type errorRecorder struct {
	testing.TB
	errs []string
}

func (r *errorRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestRemoveCgroupLeavesNothing: a test root left holding a cgroup with a process in it (what a
// failing test leaves) is reported, and its process killed, its cgroups removed.
func TestRemoveCgroupLeavesNothing(t *testing.T) {
	root := CgroupRoot(t)
	child := filepath.Join(root, "left")
	if err := os.MkdirAll(child, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(child)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }() // reaped as it dies, as a test's own process is
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })

	rec := &errorRecorder{TB: t}
	RemoveCgroup(rec, root)
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", root, err)
	}
	select {
	case <-exited:
	case <-time.After(Slow(30 * time.Second)):
		t.Fatal("the process left in the cgroup was not killed") // the cleanup kills it
	}
	if waitErr == nil || !strings.Contains(waitErr.Error(), "killed") {
		t.Errorf("the process left in the cgroup: %v, want killed", waitErr)
	}
	all := strings.Join(rec.errs, "\n")
	if !strings.Contains(all, "still holds cgroups") || !strings.Contains(all, "still holds processes") {
		t.Errorf("what was left is not reported: %q", rec.errs)
	}
}
