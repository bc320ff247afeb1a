package cgroup

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/testutil"
)

// requireCgroup2 skips the test unless it runs as root on a host with a writable cgroup2 hierarchy.
func requireCgroup2(t testing.TB) Info {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create cgroups (run the tests as root)")
	}
	info := Detect(Options{})
	if info.Mode == Unavailable {
		t.Skipf("skipped: no cgroup2 hierarchy on this host: %s", info.Reason)
	}
	if !info.Writable {
		t.Skipf("skipped: cgroup2 is not writable here: %s", info.Reason)
	}
	return info
}

// testRoot opens a uniquely named root directly below the cgroup2 mountpoint. Cleanup kills whatever
// is left in it and removes it, also when the test fails.
func testRoot(t testing.TB) *Root {
	t.Helper()
	info := requireCgroup2(t)
	path := filepath.Join(info.Mountpoint, testutil.UniqueName("reaper-test-"))
	r, err := OpenRoot(Options{Root: path})
	if err != nil {
		t.Fatalf("OpenRoot(%s): %v", path, err)
	}
	t.Cleanup(func() { destroy(t, path) })
	return r
}

// destroy kills every process below dir and removes dir and its children. It is test cleanup: it
// reports failures but never stops.
func destroy(t testing.TB, dir string) {
	t.Helper()
	if !exists(dir) {
		return
	}
	s := &Slice{path: dir}
	if err := s.Kill(); err != nil {
		t.Errorf("cleanup: kill %s: %v", dir, err)
	}
	if empty, err := s.WaitEmpty(context.Background(), time.Now().Add(testutil.Slow(10*time.Second))); !empty || err != nil {
		t.Errorf("cleanup: %s did not empty: %v", dir, err)
	}
	if err := s.Remove(); err != nil {
		t.Errorf("cleanup: remove %s: %v", dir, err)
	}
}

// killAndWait kills s and waits for it to empty, failing the test otherwise.
func killAndWait(t testing.TB, s *Slice) {
	t.Helper()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if empty, err := s.WaitEmpty(context.Background(), time.Now().Add(testutil.Slow(30*time.Second))); err != nil || !empty {
		t.Fatalf("%s did not empty after cgroup.kill: %v", s.Path(), err)
	}
}

// started is a shell script running in a slice, and the pids it reported.
type started struct {
	cmd  *exec.Cmd
	out  *bufio.Reader
	pids []testutil.Proc
	// first is the first line the shell printed: its own /proc/self/cgroup entry, read before it ran
	// anything else.
	first string
}

// spawn starts sh -c script straight into s (clone3 with CLONE_INTO_CGROUP). The script's first line
// of output is its own cgroup; then it prints pids of processes to watch, one per line, in any order
// with "ready". spawn reads until it has seen "ready" and n pids (never to EOF: escaped children keep
// the pipe open).
func spawn(t testing.TB, s *Slice, script string, n int) *started {
	t.Helper()
	f, err := s.OpenFD()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "grep '^0::' /proc/self/cgroup; "+script)
	cmd.Stdout, cmd.Stderr = pw, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		t.Fatalf("start into %s: %v", s.Path(), err)
	}
	pw.Close()
	st := &started{cmd: cmd, out: bufio.NewReader(pr)}
	t.Cleanup(func() {
		// The slice is killed by the root's cleanup (registered earlier, so it runs later); make
		// sure this shell cannot outlive the test even if the slice is gone.
		cmd.Process.Kill()
		cmd.Wait()
		pr.Close()
	})
	pr.SetReadDeadline(time.Now().Add(testutil.Slow(30 * time.Second)))
	ready := false
	for !ready || len(st.pids) < n {
		line, err := st.out.ReadString('\n')
		if err != nil {
			t.Fatalf("reading from script in %s: %v (got %v so far)", s.Path(), err, st.pids)
		}
		line = strings.TrimSpace(line)
		switch {
		case st.first == "":
			st.first = line
		case line == "ready":
			ready = true
		default:
			if _, err := strconv.Atoi(line); err != nil {
				t.Fatalf("script printed %q, want a pid", line)
			}
			st.pids = append(st.pids, testutil.PidsIn(t, line)...)
		}
	}
	return st
}

// waitPids polls until s holds exactly n processes, failing after a generous deadline.
func waitPids(t testing.TB, s *Slice, n int) {
	t.Helper()
	testutil.Eventually(t, strconv.Itoa(n)+" processes in "+s.Path(), func() bool {
		pids, err := s.Pids()
		return err == nil && len(pids) == n
	})
}

func statLine(pid int) string { return proc.Describe(pid).String() }

// inSlice reports whether pid's cgroup is s.
func inSlice(t testing.TB, s *Slice, pid int) bool {
	t.Helper()
	self, err := ownCgroup("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	return strings.HasSuffix(s.Path(), self)
}
