package reaper

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/testutil"
)

// modes are the containment modes every lifecycle test runs in.
var modes = []Containment{ContainCgroup, ContainProcess}

// newTestReaper creates a Reaper for one test. In cgroup containment it uses a uniquely named root
// below the cgroup2 mountpoint, removed at cleanup; the Reaper is closed at cleanup, which kills
// everything it started even when the test failed.
func newTestReaper(t testing.TB, mode Containment, opts Options) *Reaper {
	t.Helper()
	opts.Containment = mode
	if opts.Grace == nil {
		opts.Grace = new(300 * time.Millisecond)
	}
	if mode == ContainCgroup {
		opts.Cgroup.Root = testutil.CgroupRoot(t)
	}
	if opts.StateDir == "" {
		// Never the host's: a sweep there would end what a real instance left, which no test started.
		opts.StateDir = t.TempDir()
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Containment().Mode; got != mode {
		t.Fatalf("containment %v, want %v", r.Containment(), mode)
	}
	// Registered after the root's removal, so it runs before it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("closing the Reaper: %v", err)
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

// offset returns an output offset for OutputOptions.
func offset(n int64) *int64 { return &n }

// assertNoZombies polls until no child of this process is a zombie, failing after a deadline: the
// child reaper must reap orphans too.
func assertNoZombies(t testing.TB) {
	t.Helper()
	testutil.Eventually(t, "no zombie children", func() bool {
		procs, _ := proc.NewWalker().Snapshot(nil)
		for _, p := range procs {
			if p.PPid == os.Getpid() && p.State == 'Z' {
				return false
			}
		}
		return true
	})
}

// descendants returns this process's live descendants but the inits of sessions' PID namespaces,
// which live as long as their sessions, and the ready shells of sessions, which wait for their next
// commands (once each session has started the one it was starting, if any).
func descendants(t testing.TB, sessions ...*Session) []proc.Stat {
	t.Helper()
	ready := map[int]bool{}
	for _, s := range sessions {
		testutil.Eventually(t, "the session's ready shell started", func() bool {
			p, preparing := s.readyNow()
			if p != nil {
				ready[p.t.pid] = true
			}
			return !preparing
		})
	}
	d, err := proc.NewWalker().Descendants(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	out := d[:0]
	for _, p := range d {
		if !testutil.IsInit(p.Pid) && !ready[p.Pid] {
			out = append(out, p)
		}
	}
	return out
}

// taskPids waits until a task has printed n lines and returns the pids among them.
func taskPids(t testing.TB, s *Session, id string, n int) []testutil.Proc {
	t.Helper()
	var text string
	testutil.Eventually(t, "the task's pids", func() bool {
		_, c, err := s.Output(context.Background(), id, OutputOptions{Offset: offset(0)})
		text = c.Text
		return err == nil && strings.Count(text, "\n") >= n
	})
	return s.pidsIn(t, text)
}

// mustTask returns the session's task id, failing the test if there is none.
func (s *Session) mustTask(t testing.TB, id string) *task {
	t.Helper()
	tk, err := s.lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// pidsIn identifies the pids a task of the session printed (see testutil.PidsIn), which it printed as
// its PID namespace numbers them where the session has one.
func (s *Session) pidsIn(t testing.TB, output string) []testutil.Proc {
	t.Helper()
	_, _, in := s.walkRoot()
	if in == nil {
		return testutil.PidsIn(t, output)
	}
	return testutil.PidsInNS(t, testutil.NSOf(in.Pid()), output)
}

// jsonish prices characters roughly as JSON escapes them: control characters six bytes.
func jsonish(r rune) int {
	if r < 0x20 {
		return 6
	}
	return utf8.RuneLen(r)
}
