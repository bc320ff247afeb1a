package cgroup

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// randName returns prefix followed by random hex, so that concurrent test runs never share a cgroup.
func randName(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// testRoot opens a uniquely named root directly below the cgroup2 mountpoint. Cleanup kills whatever
// is left in it and removes it, also when the test fails.
func testRoot(t testing.TB) *Root {
	t.Helper()
	info := requireCgroup2(t)
	path := filepath.Join(info.Mountpoint, randName("reaper-test-"))
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
	s := &Slice{path: dir, kill: KillFile}
	if _, err := s.Kill(context.Background(), KillOptions{Timeout: 10 * time.Second}); err != nil {
		t.Errorf("cleanup: kill %s: %v", dir, err)
	}
	if err := s.Remove(); err != nil {
		t.Errorf("cleanup: remove %s: %v", dir, err)
	}
}

// started is a shell script running in a slice, and the pids it reported.
type started struct {
	cmd  *exec.Cmd
	out  *bufio.Reader
	pids []proc
	// first is the first line the shell printed: its own /proc/self/cgroup entry, read before it ran
	// anything else.
	first string
}

// proc identifies a process by pid and start time, so that a recycled pid is never mistaken for it.
type proc struct {
	pid   int
	start uint64
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
	pr.SetReadDeadline(time.Now().Add(30 * time.Second))
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
			pid, err := strconv.Atoi(line)
			if err != nil {
				t.Fatalf("script printed %q, want a pid", line)
			}
			st.pids = append(st.pids, proc{pid: pid, start: startTime(pid)})
		}
	}
	return st
}

// startTime returns field 22 of /proc/<pid>/stat, or 0 if the process is gone.
func startTime(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+2:]))
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// running reports whether p still runs: it exists with the same start time and is not a zombie
// (orphans are reaped lazily by PID 1; a zombie is dead).
func running(p proc) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+2:]))
	v, _ := strconv.ParseUint(f[19], 10, 64)
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	return v == p.start && f[0] != "Z" && flags&pfExiting == 0
}

// pfExiting is PF_EXITING in field 9 of /proc/<pid>/stat. A killed process leaves its cgroup in
// do_exit, after its memory and files are released but before it becomes a zombie, so a slice can
// report "populated 0" while one of its processes still shows state R for a moment. Such a process
// never runs user code again: for these tests it is dead.
const pfExiting = 0x4

// waitPids polls until s holds exactly n processes, failing after a generous deadline.
func waitPids(t testing.TB, s *Slice, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		pids, err := s.Pids()
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d processes, want %d", s.Path(), len(pids), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// assertDead fails for every process in ps that still runs.
func assertDead(t testing.TB, ps []proc) {
	t.Helper()
	for _, p := range ps {
		if running(p) {
			t.Errorf("pid %d still runs: %s", p.pid, statLine(p.pid))
		}
	}
}

func statLine(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return strings.TrimSpace(string(b))
}

// inSlice reports whether pid's cgroup is s.
func inSlice(t testing.TB, s *Slice, pid int) bool {
	t.Helper()
	self, err := ownCgroup(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	return strings.HasSuffix(s.Path(), self)
}
