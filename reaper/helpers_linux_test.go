package reaper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
)

// modes are the containment modes every lifecycle test runs in.
var modes = []Containment{ContainCgroup, ContainProcess}

// newTestReaper creates a Reaper for one test. In cgroup containment it uses a uniquely named root
// below the cgroup2 mountpoint, removed at cleanup; the Reaper is closed at cleanup, which kills
// everything it started even when the test failed.
func newTestReaper(t testing.TB, mode Containment, opts Options) *Reaper {
	t.Helper()
	opts.Containment = mode
	if opts.Grace == 0 {
		opts.Grace = 300 * time.Millisecond
	}
	var root string
	if mode == ContainCgroup {
		if os.Geteuid() != 0 {
			t.Skip("skipped: cgroup containment needs root to create cgroups (run the tests as root)")
		}
		info := cgroup.Detect(cgroup.Options{})
		if !info.Usable() {
			t.Skipf("skipped: cgroup containment needs a writable cgroup2 hierarchy: %s", info)
		}
		b := make([]byte, 6)
		rand.Read(b)
		root = filepath.Join(info.Mountpoint, "reaper-test-"+hex.EncodeToString(b))
		opts.Cgroup.Root = root
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Containment().Mode; got != mode {
		t.Fatalf("containment %v, want %v", r.Containment(), mode)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("closing the Reaper: %v", err)
		}
		if root != "" {
			if err := os.Remove(root); err != nil && !os.IsNotExist(err) {
				t.Errorf("cleanup: remove %s: %v", root, err)
			}
		}
	})
	return r
}

// newTestSession creates a session with a fresh working directory.
func newTestSession(t testing.TB, r *Reaper, opts SessionOptions) *Session {
	t.Helper()
	if opts.WorkDir == "" {
		opts.WorkDir = t.TempDir()
	}
	s, err := r.NewSession(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs a foreground command that must succeed.
func run(t testing.TB, s *Session, command string) Result {
	t.Helper()
	res, err := s.Run(context.Background(), command, RunOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Run(%q): %v", command, err)
	}
	return res
}

// proc is a process identified by pid and start time, so that a reused pid is never mistaken for it.
type proc struct {
	pid   int
	start uint64
}

// pidsIn parses every line of output that is a pid, recording start times now.
func pidsIn(t testing.TB, output string) []proc {
	t.Helper()
	var out []proc
	for _, l := range strings.Fields(output) {
		if pid, err := strconv.Atoi(l); err == nil {
			st, ok := newWalker().stat(pid)
			if !ok {
				t.Fatalf("pid %d printed by the command is already gone", pid)
			}
			out = append(out, proc{pid: pid, start: st.start})
		}
	}
	return out
}

// running reports whether p still runs: it exists with the same start time, is not a zombie, and
// is not exiting. PF_EXITING (0x4, field 9 of /proc/<pid>/stat) counts as dead because a killed
// process leaves its cgroup in do_exit, after its memory and files are released but before it
// becomes a zombie: a slice reports "populated 0" while such a process still shows state R.
func running(p proc) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return false
	}
	st, ok := parseStat(p.pid, b)
	if !ok || st.start != p.start || st.state == 'Z' {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	return flags&0x4 == 0
}

// assertDead fails for each process that still runs.
func assertDead(t testing.TB, ps []proc) {
	t.Helper()
	for _, p := range ps {
		if running(p) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
			t.Errorf("pid %d survived: %s", p.pid, b)
		}
	}
}

// assertNoZombies polls until no child of this process is a zombie, failing after a deadline: the
// child reaper must reap orphans too.
func assertNoZombies(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var zombies []int
		procs, _ := newWalker().snapshot(nil)
		for _, p := range procs {
			if p.ppid == os.Getpid() && p.state == 'Z' {
				zombies = append(zombies, p.pid)
			}
		}
		if len(zombies) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombie children left: %v", zombies)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// descendants returns this process's live descendants.
func descendants(t testing.TB) []procStat {
	t.Helper()
	d, err := newWalker().descendants(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// eventually polls cond until it holds, failing after a generous deadline.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// taskPids waits until a task has printed n lines and returns the pids among them.
func taskPids(t testing.TB, s *Session, id string, n int) []proc {
	t.Helper()
	var text string
	eventually(t, "the task's pids", func() bool {
		_, c, err := s.Output(id, OutputOptions{Offset: 0})
		text = c.Text
		return err == nil && strings.Count(text, "\n") >= n
	})
	return pidsIn(t, text)
}
