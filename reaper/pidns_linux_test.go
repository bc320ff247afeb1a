package reaper

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// nsReaper is a test Reaper whose sessions have PID namespaces, or a skip where this host gives none.
func nsReaper(t *testing.T, mode Containment, opts Options) *Reaper {
	t.Helper()
	r := newTestReaper(t, mode, opts)
	if ns := r.Containment().PIDNamespace; !ns.On {
		t.Skipf("skipped: no PID namespaces here: %s", ns)
	}
	return r
}

// TestSessionsSeeThemselves: a session's tasks see their own processes only, and cannot signal
// another session's, even as the same user; the pids they see are their namespace's, small; the
// Reaper still knows every task by the pid it sees.
func TestSessionsSeeThemselves(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := nsReaper(t, mode, Options{})
			a, b := newTestSession(t, r, SessionOptions{}), newTestSession(t, r, SessionOptions{})
			if ok, note := a.mustInit(t).Proc(); !ok {
				t.Skipf("skipped: /proc is not remounted here: %s", note)
			}
			ti, err := b.Start("echo $$; "+testutil.ShowNS+"; exec sleep 1000", "")
			if err != nil {
				t.Fatal(err)
			}
			other := taskPids(t, b, ti.ID, 2)[0]
			// No pipeline: ps could list a process of it that is yet to be forked, or not.
			res := run(t, a, fmt.Sprintf("echo $$; ps -e -o comm=; kill -0 %d 2>/dev/null && echo reached", other.Pid))
			f := strings.Fields(res.Output)
			if len(f) == 0 || slices.Contains(f, "reached") {
				t.Fatalf("the task printed %q", res.Output)
			}
			if pid, _ := strconv.Atoi(f[0]); pid > 100 {
				t.Errorf("the shell's pid in its namespace is %d: not the namespace's", pid)
			}
			// The init, the shell and ps: the other session's sleep is not there.
			if len(f[1:]) != 3 || !slices.Contains(f, "ps") || slices.Contains(f, "sleep") {
				t.Errorf("ps in a session lists %q, want 3 processes (init, sh, ps): %q", f[1:], res.Output)
			}
			if !testutil.Running(other) {
				t.Error("the other session's sleep is gone")
			}
			if tk := b.mustTask(t, ti.ID); tk.pid != other.Pid {
				t.Errorf("the Reaper knows the task as pid %d, it is %d", tk.pid, other.Pid)
			}
		})
	}
}

// mustInit returns the session's init, failing the test if it has none.
func (s *Session) mustInit(t testing.TB) *pidns.Init {
	t.Helper()
	run(t, s, "true") // the first command starts it
	_, _, in := s.walkRoot()
	if in == nil {
		t.Fatal("the session has no init")
	}
	return in
}

// TestZombiesReapedInside: orphans that exit inside a session's namespace are reaped by its init:
// no zombie is left in it, and no process of it is ever the host's to reap.
func TestZombiesReapedInside(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := nsReaper(t, mode, Options{})
			s := newTestSession(t, r, SessionOptions{})
			run(t, s, `for i in $(seq 30); do (sh -c 'exit 0' &); (setsid true &); done`)
			_, _, in := s.walkRoot()
			ns := testutil.NSOf(in.Pid())
			testutil.Eventually(t, "no zombie in the session's namespace", func() bool {
				procs, _ := proc.NewWalker().Snapshot(nil)
				for _, p := range procs {
					if testutil.NSOf(p.Pid) == ns && p.State == 'Z' {
						return false
					}
				}
				return true
			})
			if n := r.kids.Reaped(); n != 0 {
				t.Errorf("the Reaper reaped %d orphans: they should be the init's", n)
			}
		})
	}
}

// TestInitDeathMidSession: when a session's init dies (killed from outside), its tasks die with the
// namespace and end as killed by SIGKILL, and the session's next command starts a new one.
func TestInitDeathMidSession(t *testing.T) {
	r := nsReaper(t, ContainProcess, Options{})
	s := newTestSession(t, r, SessionOptions{})
	ti, err := s.Start("setsid sleep 1000 & echo $!; "+testutil.ShowNS+"; exec sleep 1000", "")
	if err != nil {
		t.Fatal(err)
	}
	left := taskPids(t, s, ti.ID, 2)
	_, _, in := s.walkRoot()
	unix.Kill(in.Pid(), unix.SIGKILL)
	ti, err = s.Wait(context.Background(), ti.ID, time.Minute)
	if err != nil || ti.Status != Failed || ti.ExitCode != 128+int(unix.SIGKILL) {
		t.Errorf("the task after its init's death: %+v, %v; want failed with 137", ti, err)
	}
	testutil.AwaitDead(t, left, 10*time.Second)
	if res := run(t, s, "echo again"); res.Output != "again\n" {
		t.Errorf("the next command printed %q", res.Output)
	}
	if _, _, again := s.walkRoot(); again == in {
		t.Error("the session kept its dead init")
	}
}

// TestSessionEndKillsNamespace: a process that cleared its environment, called setsid and (in cgroup
// containment) moved itself out of the session's slice dies with its session: the namespace dies
// with its init, and the init is gone too.
func TestSessionEndKillsNamespace(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := nsReaper(t, mode, Options{})
			s := newTestSession(t, r, SessionOptions{})
			procs := "/dev/null"
			if mode == ContainCgroup {
				procs = r.Containment().Cgroup.Mountpoint + "/cgroup.procs"
			}
			// Both sleeps are listed once both run: on a loaded machine that takes a while.
			res := run(t, s, `(env -i /bin/sh -c 'echo $$ > `+procs+`; exec /bin/sleep 1000' &) ; (setsid sh -c 'trap "" TERM; exec sleep 1000' &); `+
				`sleeps() { for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = sleep ] && echo ${p#/proc/}; done; }; `+
				`for i in $(seq 200); do [ "$(sleeps | wc -l)" -ge 2 ] && break; sleep 0.05; done; sleeps; `+testutil.ShowNS)
			left := s.pidsIn(t, res.Output)
			if len(left) != 2 {
				t.Fatalf("the command printed %q", res.Output)
			}
			_, _, in := s.walkRoot()
			init := testutil.Proc{Pid: in.Pid(), Start: in.StartTime()}
			rep, err := s.Close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			testutil.AssertDead(t, append(left, init))
			if rep.Total() < 2 {
				t.Errorf("the report counts %d processes: %s", rep.Total(), rep)
			}
			if d := descendants(t); len(d) != 0 {
				t.Errorf("left: %v", d)
			}
		})
	}
}

// TestIdleSessionEnd: a session whose commands are done, its namespace holding nothing but its init,
// ends with nothing to report, and its init is dead and reaped when Close returns, its slice gone.
func TestIdleSessionEnd(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := nsReaper(t, mode, Options{})
			s := newTestSession(t, r, SessionOptions{})
			in := s.mustInit(t)
			run(t, s, "echo done")
			init := testutil.Proc{Pid: in.Pid(), Start: in.StartTime()}
			s.mu.Lock()
			slice := ""
			if s.slice != nil {
				slice = s.slice.Path()
			}
			s.mu.Unlock()
			rep, err := s.Close(context.Background())
			if err != nil || rep.Total() != 0 || len(rep.Remaining) != 0 {
				t.Fatalf("Close = %v, %v; want nothing to report", rep, err)
			}
			if st, ok := proc.NewWalker().Stat(init.Pid); ok && st.Start == init.Start {
				t.Errorf("the init %d is still there when Close returns: state %c", init.Pid, st.State)
			}
			if slice != "" {
				if _, err := os.Stat(slice); !os.IsNotExist(err) {
					t.Errorf("slice %s left behind: %v", slice, err)
				}
			}
			if d := descendants(t); len(d) != 0 {
				t.Errorf("left: %v", d)
			}
			assertNoZombies(t)
		})
	}
}

// TestPIDNamespaceOff: with namespaces off, tasks run in the Reaper's PID namespace, as before.
func TestPIDNamespaceOff(t *testing.T) {
	r := newTestReaper(t, ContainProcess, Options{PIDNamespace: PIDNamespaceOff})
	if ns := r.Containment().PIDNamespace; ns.On || ns.Reason != "off was asked for" {
		t.Errorf("PIDNamespace %+v", ns)
	}
	s := newTestSession(t, r, SessionOptions{})
	res := run(t, s, testutil.ShowNS)
	if got := strings.TrimSpace(res.Output); got != testutil.NSOf(os.Getpid()) {
		t.Errorf("the task's PID namespace is %s, ours %s", got, testutil.NSOf(os.Getpid()))
	}
}

func init() {
	helpers["pidns-refused"] = pidnsRefusedHelper
}

// pidnsRefusedHelper makes a Reaper with RTEST_PIDNS under a seccomp filter that refuses namespaces
// as container runtimes' default profiles do, and replies with what it decided.
func pidnsRefusedHelper() int {
	var res struct {
		On      bool
		Reason  string
		Err     string
		Outputs string
	}
	if err := testutil.DenyNamespaces(testutil.AllNamespaces, unix.EPERM); err != nil {
		res.Err = err.Error()
		return testutil.Reply(res)
	}
	want, _ := ParsePIDNamespace(os.Getenv("RTEST_PIDNS"))
	dir := os.Getenv("RTEST_DIR")
	r, err := New(Options{Containment: ContainProcess, PIDNamespace: want, StateDir: dir, WorkDir: dir, NoSweep: true})
	if err != nil {
		res.Err = err.Error()
		return testutil.Reply(res)
	}
	defer r.Close(context.Background())
	res.On, res.Reason = r.Containment().PIDNamespace.On, r.Containment().PIDNamespace.Reason
	s, _ := r.NewSession("refused", SessionOptions{})
	out, err := s.Run(context.Background(), "echo ran", RunOptions{Timeout: time.Minute})
	res.Outputs = out.Output
	if err != nil {
		res.Err = err.Error()
	}
	return testutil.Reply(res)
}

// TestPIDNamespaceRefused: under a seccomp profile that refuses namespaces (as Docker's default does
// without CAP_SYS_ADMIN), auto goes without them and says why, and on refuses to start, saying why.
func TestPIDNamespaceRefused(t *testing.T) {
	for _, want := range []string{"auto", "on"} {
		t.Run(want, func(t *testing.T) {
			var res struct {
				On      bool
				Reason  string
				Err     string
				Outputs string
			}
			testutil.RunHelper(t, testutil.Helper("pidns-refused", "RTEST_PIDNS="+want, "RTEST_DIR="+t.TempDir()), &res)
			switch want {
			case "auto":
				if res.On || !strings.Contains(res.Reason, "operation not permitted") || res.Err != "" || res.Outputs != "ran\n" {
					t.Errorf("auto under the filter: %+v", res)
				}
			case "on":
				if !strings.Contains(res.Err, "PID namespaces were asked for but cannot be made here") || !strings.Contains(res.Err, "operation not permitted") {
					t.Errorf("on under the filter: %+v", res)
				}
			}
		})
	}
}

// TestEscapeeWatchSparesNewTasks: the watch for escapees looks at each init's children while tasks
// are being born there, before their init's answer has registered them: a task in its leaf is the
// session's, however early it is seen (the watch once read the slices before listing some inits'
// children, and killed such tasks as escapees).
func TestEscapeeWatchSparesNewTasks(t *testing.T) {
	r := nsReaper(t, ContainCgroup, Options{})
	var sessions []*Session
	for range 6 {
		sessions = append(sessions, newTestSession(t, r, SessionOptions{}))
	}
	for _, s := range sessions {
		run(t, s, "true") // both inits exist
	}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
				r.policy.Escapees(context.Background(), r.escapees("test", nil), time.Now().Add(time.Minute))
			}
		}
	}()
	defer func() { close(stop); <-watched }()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				res, err := s.Run(context.Background(), "true", RunOptions{Timeout: time.Minute})
				if err != nil || res.ExitCode != 0 {
					t.Errorf("command %d: %+v, %v", i, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestIdleInitRestarts: a session whose namespace has stayed empty loses its init, quietly, and its
// next command starts a new one.
func TestIdleInitRestarts(t *testing.T) {
	var log testutil.Buffer
	r := nsReaper(t, ContainCgroup, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	r.pool.idle = 300 * time.Millisecond
	s := newTestSession(t, r, SessionOptions{})
	run(t, s, "true")
	_, _, first := s.walkRoot()
	if !first.Wait(context.Background(), time.Now().Add(30*time.Second)) {
		t.Fatal("the idle init did not end")
	}
	if res := run(t, s, "echo again"); res.Output != "again\n" {
		t.Errorf("the next command printed %q", res.Output)
	}
	if _, _, second := s.walkRoot(); second == first || second.Err() != nil {
		t.Errorf("the session's init after the idle one: %v", second)
	}
	if strings.Contains(log.String(), "has ended") {
		t.Errorf("an idle init's end was logged as a death:\n%s", log.String())
	}
}

// TestSessionInits: each session's first command starts an init of its own (the start-up probe's
// has ended), in cgroup containment born in the inits' leaf, where every session's init is born; a
// Reaper that no session used leaves no init behind on Close.
func TestSessionInits(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := nsReaper(t, mode, Options{})
			a := newTestSession(t, r, SessionOptions{})
			first := a.mustInit(t)
			b := newTestSession(t, r, SessionOptions{})
			second := b.mustInit(t)
			if second == first {
				t.Error("the second session got the first session's init")
			}
			if r.root != nil {
				checkInitsLeaf(t, r, first.Pid(), second.Pid())
			}
		})
	}
	t.Run("unused", func(t *testing.T) {
		r, err := New(Options{Containment: ContainProcess, WorkDir: t.TempDir(), StateDir: t.TempDir(), NoSweep: true})
		if err != nil {
			t.Fatal(err)
		}
		ns := r.Containment().PIDNamespace // waits for the probe, which New does not
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !ns.On {
			t.Skipf("skipped: PID namespaces %s", ns)
		}
		left, _ := proc.NewWalker().Descendants(os.Getpid())
		for _, p := range left {
			if d := proc.Describe(p.Pid); strings.HasPrefix(d.Comm, "reaper-init") && d.State != "Z" {
				t.Errorf("an init %d still runs after Close", p.Pid)
			}
		}
	})
}

// checkInitsLeaf fails the test unless the Reaper's inits' leaf holds exactly the inits pids.
func checkInitsLeaf(t *testing.T, r *Reaper, pids ...int) {
	t.Helper()
	leaf, err := r.pool.initsLeaf()
	if err != nil {
		t.Fatal(err)
	}
	in, err := leaf.Pids()
	slices.Sort(in)
	slices.Sort(pids)
	if err != nil || !slices.Equal(in, pids) || filepath.Base(leaf.Path()) != "inits" {
		t.Errorf("the inits' leaf %s holds %v (%v), want the inits %v", leaf.Path(), in, err, pids)
	}
}

// TestProbeAnswerRecorded: New does not wait for the probe of PID namespaces (auto), and what it
// answers reaches the instance's record on disk, as Containment and Instance report it.
func TestProbeAnswerRecorded(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{})
			on := r.Containment().PIDNamespace.On
			if got := r.Instance().PIDNamespace; got != on {
				t.Errorf("Instance says pid namespaces %v, Containment %v", got, on)
			}
			// The answer reaches the disk in the background (see pidNamespaceDecided).
			testutil.Eventually(t, fmt.Sprintf("the record to say pid namespaces %v", on), func() bool {
				b, err := os.ReadFile(filepath.Join(r.Instance().StateDir, "instance.json"))
				return err == nil && strings.Contains(string(b), `"pid_namespace":true`) == on
			})
		})
	}
}
