package reaper

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/testutil"
)

// Helper processes: some tests re-run this test binary under a seccomp filter or in another mount
// namespace (testutil.Helper). The helper prints a JSON helperResult.
func TestMain(m *testing.M) { testutil.Main(m, helpers) }

type helperResult struct {
	Containment string
	Mode        string
	NoClone3    bool
	Cgroup      string // the task's /proc/self/cgroup line
	Report      string
	Survivors   []int
	Outputs     map[string]string // outputs of commands, by name
	Err         string
}

// reply prints res, with err in it, as the helper's result.
func reply(res helperResult, err error) int {
	if err != nil {
		res.Err = err.Error()
	}
	return testutil.Reply(res)
}

var helpers = map[string]func() int{
	// seccomp: clone3 answers ENOSYS, as under Docker's default profile; tasks must still be born
	// into their leaf (by joining it before exec).
	"seccomp": func() int {
		if err := testutil.DenyClone3(unix.ENOSYS); err != nil {
			return reply(helperResult{}, err)
		}
		return reply(runZoo(Options{Containment: ContainCgroup, Cgroup: cgroup.Options{Root: os.Getenv("RTEST_ROOT")}}))
	},
	// auto: whatever New(auto) picks in this namespace (a read-only cgroupfs: process containment).
	"auto": func() int {
		return reply(runZoo(Options{Cgroup: cgroup.Options{Root: os.Getenv("RTEST_ROOT")}}))
	},
	"threadfork": threadFork,
	"leaderexit": leaderExit,
}

func init() {
	// The leaderexit helper ends its main thread alone: its main goroutine must be on that thread,
	// which only a lock taken during initialisation guarantees.
	if os.Getenv(testutil.HelperVar) == "leaderexit" {
		runtime.LockOSThread()
	}
}

// leaderExit is a helper run as a task: it leaves the slice for the cgroup.procs file named by
// RTEST_PROCS (if set), starts a sleeper with an empty environment from another thread, prints the
// sleeper's pid, and ends its main thread alone (exit, not exit_group). Its stat then shows a zombie,
// with an empty environ, while its other threads run on and are the sleeper's parent.
func leaderExit() int {
	if unix.Gettid() != unix.Getpid() {
		fmt.Println("not on the main thread")
		return 1
	}
	if procs := os.Getenv("RTEST_PROCS"); procs != "" {
		if err := os.WriteFile(procs, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			fmt.Println("leave the slice:", err)
			return 1
		}
	}
	started := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread stays, and the sleeper's parent
		cmd := exec.Command("/bin/sleep", "1000")
		cmd.Env = []string{}
		if err := cmd.Start(); err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		close(started)
		select {}
	}()
	<-started
	unix.RawSyscall(unix.SYS_EXIT, 0, 0, 0)
	return 1 // not reached
}

// threadFork is a helper run as a task: from a thread other than its main thread it starts a shell
// that leaves the slice for the cgroup.procs file named by RTEST_PROCS and clears its environment,
// prints that shell's pid, and then blocks until killed. The shell is the child of that thread only:
// /proc/<pid>/task/<pid>/children does not list it.
func threadFork() int {
	found := make(chan int)
	var try func()
	try = func() {
		runtime.LockOSThread() // never unlocked: the thread stays ours, and the shell's parent
		if unix.Gettid() == unix.Getpid() {
			go try()
			select {}
		}
		cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$RTEST_PROCS" && exec env -i sleep 1000`)
		if err := cmd.Start(); err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		found <- cmd.Process.Pid
		select {}
	}
	go try()
	fmt.Println(<-found)
	select {}
}

// runZoo starts a Reaper, runs the escapee zoo in a session, closes it, and reports what is left.
func runZoo(opts Options) (helperResult, error) {
	var res helperResult
	opts.Grace = new(300 * time.Millisecond)
	state, err := os.MkdirTemp("", "reaper-zoo-state-") // never the host's state directory
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(state) // after the Close below
	opts.StateDir = state
	r, err := New(opts)
	if err != nil {
		return res, err
	}
	defer r.Close(context.Background())
	res.Containment, res.Mode = r.Containment().String(), r.Containment().Mode.String()
	s, err := r.NewSession("helper", SessionOptions{WorkDir: "/"})
	if err != nil {
		return res, err
	}
	out, err := s.Run(context.Background(), "grep '^0::' /proc/self/cgroup", RunOptions{Timeout: time.Minute})
	if err != nil {
		return res, err
	}
	res.Cgroup = strings.TrimSpace(out.Output)
	res.NoClone3 = r.noClone3.Load()
	dir, err := os.MkdirTemp("", "reaper-zoo-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if _, err := s.Run(context.Background(), testutil.Zoo(dir), RunOptions{Timeout: time.Minute}); err != nil {
		return res, err
	}
	rep, err := s.Close(context.Background())
	res.Report = rep.String()
	if err != nil {
		return res, err
	}
	left, _ := proc.NewWalker().Descendants(os.Getpid())
	for _, p := range left {
		res.Survivors = append(res.Survivors, p.Pid)
	}
	return res, nil
}

func runHelper(t *testing.T, name string, env []string, argv ...string) helperResult {
	t.Helper()
	cmd := testutil.Helper(name, env...)
	if len(argv) > 0 {
		cmd.Args = append(argv, os.Args[0])
		cmd.Path, _ = exec.LookPath(argv[0])
	}
	var res helperResult
	testutil.RunHelper(t, cmd, &res)
	t.Logf("helper %s: %+v", name, res)
	return res
}

func TestJoinBeforeExecWhenClone3IsRefused(t *testing.T) {
	root := testutil.CgroupRoot(t)
	res := runHelper(t, "seccomp", []string{"RTEST_ROOT=" + root})
	if res.Err != "" {
		t.Fatalf("helper: %s", res.Err)
	}
	if !res.NoClone3 {
		t.Error("clone3 was not refused: the seccomp filter did not apply")
	}
	rel := strings.TrimPrefix(root, cgroup.Detect(cgroup.Options{}).Mountpoint)
	if !strings.HasPrefix(res.Cgroup, "0::"+rel+"/r") || !strings.Contains(res.Cgroup, "/s-1/l-") {
		t.Errorf("task ran in %q, want its leaf below %s", res.Cgroup, rel)
	}
	if len(res.Survivors) != 0 {
		t.Errorf("survivors after Close: %v (%s)", res.Survivors, res.Report)
	}
}

// TestWalkFindsProcessesMovedOutOfTheSlice: two processes leave the session's slice, one of them
// with its environment cleared; the teardown finds both, counts them, and both get SIGTERM within the
// grace period (each says so from its trap). The walk comes once the slice is empty: with PID
// namespaces below the init; without, from the Reaper's children outside every slice, where the one
// whose parent ended before the close already is, and the other is once the SIGTERM to the slice
// has ended its parent (the last process of the slice: the kernel hands its children to the Reaper
// a few instructions after it leaves the cgroup, long before the teardown learns that the slice is
// empty).
func TestWalkFindsProcessesMovedOutOfTheSlice(t *testing.T) {
	for _, ns := range []PIDNamespace{PIDNamespaceOff, PIDNamespaceOn} {
		t.Run("pidns="+ns.String(), func(t *testing.T) {
			r := escapeReaper(t, ns, 5*time.Second)
			s := newTestSession(t, r, SessionOptions{})
			// Root may write cgroup.procs: these two leave the slice for the hierarchy's top. The
			// first keeps the marker; the second clears its environment but its parent is still in
			// the slice (until the teardown's SIGTERM).
			pids, terms, script := escapeeScript(t, r)
			res := run(t, s, "sh "+script+" & sh -c 'env -i /bin/sh "+script+" & wait' & "+testutil.AwaitLines(pids, 2))
			escaped := s.pidsIn(t, res.Output)
			if len(escaped) != 2 {
				t.Fatalf("want 2 pids, got %q", res.Output)
			}
			for _, p := range escaped {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.Pid)); !strings.Contains(string(b), "0::/\n") {
					t.Fatalf("pid %d did not leave the slice: %s", p.Pid, b)
				}
			}
			rep, err := s.Close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Found < 2 {
				t.Errorf("report %v: the walk should have found both escapees", rep)
			}
			if rep.Killed > 0 {
				t.Errorf("report %v: SIGTERM should have ended every process", rep)
			}
			b, _ := os.ReadFile(terms)
			if got := len(slices.Compact(slices.Sorted(slices.Values(strings.Split(strings.TrimSpace(string(b)), "\n"))))); got != 2 {
				t.Errorf("the escapees' traps wrote %q: %d of them ran, want 2", b, got)
			}
			testutil.AssertDead(t, escaped)
			if d := descendants(t); len(d) != 0 {
				t.Errorf("left: %v", d)
			}
		})
	}
}

// TestEscapeeWarnedWhileTheSliceHoldsOut: the walk for what left the slice comes once the slice is
// empty; where a process of the slice ignores SIGTERM, it comes after half the grace period, and a
// process that left the slice (and its task's process group, which the first SIGTERM goes to) still
// gets SIGTERM before the hard kill: its trap says so.
func TestEscapeeWarnedWhileTheSliceHoldsOut(t *testing.T) {
	for _, ns := range []PIDNamespace{PIDNamespaceOff, PIDNamespaceOn} {
		t.Run("pidns="+ns.String(), func(t *testing.T) {
			r := escapeReaper(t, ns, 2*time.Second)
			s := newTestSession(t, r, SessionOptions{})
			pids, terms, script := escapeeScript(t, r)
			res := run(t, s, "setsid sh -c 'trap \"\" TERM; echo $$ >> "+pids+"; exec sleep 1000' & setsid env -i /bin/sh "+script+" & "+testutil.AwaitLines(pids, 2))
			left := s.pidsIn(t, res.Output)
			if len(left) != 2 {
				t.Fatalf("want 2 pids, got %q", res.Output)
			}
			rep, err := s.Close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(terms); !strings.HasPrefix(string(b), "term ") { // twice, if the init's SIGTERM came as it ran
				t.Errorf("the escapee's trap wrote %q: it got no SIGTERM before the hard kill (report %v)", b, rep)
			}
			if rep.Killed < 1 || rep.Found < 1 {
				t.Errorf("report %v: the process that ignores SIGTERM is killed, the escapee found", rep)
			}
			testutil.AssertDead(t, left)
			if d := descendants(t); len(d) != 0 {
				t.Errorf("left: %v", d)
			}
		})
	}
}

// escapeReaper returns a Reaper in cgroup containment with the grace period grace, and PID
// namespaces as ns says: with PIDNamespaceOn the test skips, saying why, where none can be made.
func escapeReaper(t *testing.T, ns PIDNamespace, grace time.Duration) *Reaper {
	t.Helper()
	opts := Options{PIDNamespace: ns, Grace: new(grace)}
	if ns == PIDNamespaceOn {
		return nsReaper(t, ContainCgroup, opts)
	}
	return newTestReaper(t, ContainCgroup, opts)
}

// escapeeScript writes a script that moves its shell out of its slice, to the top of r's hierarchy
// (root may), appends its pid to the file pids, and loops until SIGTERM, whose trap appends "term"
// and its pid to the file terms: a second SIGTERM that comes while the trap runs may run it again.
func escapeeScript(t testing.TB, r *Reaper) (pids, terms, script string) {
	t.Helper()
	dir := t.TempDir()
	pids, terms, script = filepath.Join(dir, "pids"), filepath.Join(dir, "terms"), filepath.Join(dir, "escape")
	err := os.WriteFile(script, fmt.Appendf(nil, "trap 'echo term $$ >> %s; exit 0' TERM\necho $$ > %s\necho $$ >> %s\nwhile :; do /bin/sleep 0.05; done\n",
		terms, filepath.Join(r.Containment().Cgroup.Mountpoint, "cgroup.procs"), pids), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return pids, terms, script
}

// startHelper runs this test binary as helper name in the background of a command of s, with
// RTEST_PROCS set to procs, and returns it and the processes whose pids it printed (one line). The
// command's shell exits at once: the helper's parent is then the Reaper, and only the marker in its
// environment ties it to the session.
func startHelper(t *testing.T, s *Session, name, procs string) (helper, printed []testutil.Proc) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "pid")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, s, fmt.Sprintf("%s RTEST_PROCS=%s %s > %s & echo $!", testutil.HelperEnv(name), procs, bin, out))
	helper = s.pidsIn(t, res.Output)
	testutil.Eventually(t, "the helper's pid line", func() bool {
		b, _ := os.ReadFile(out)
		if !strings.HasSuffix(string(b), "\n") {
			return false
		}
		printed = s.pidsIn(t, string(b))
		return true
	})
	return helper, printed
}

// TestWalkFindsChildOfAnotherThread: a process in the slice forks from a thread other than its main
// thread; the child leaves the slice and clears its environment. Only its parent link, which is to
// that thread, ties it to the session; the teardown's walk must follow every thread's children.
func TestWalkFindsChildOfAnotherThread(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	s := newTestSession(t, r, SessionOptions{})
	helper, escapee := startHelper(t, s, "threadfork", filepath.Join(r.Containment().Cgroup.Mountpoint, "cgroup.procs"))
	testutil.Eventually(t, "the escapee to leave the slice and clear its environment", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", escapee[0].Pid))
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", escapee[0].Pid))
		return strings.Contains(string(b), "0::/\n") && len(env) == 0
	})
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", helper[0].Pid, helper[0].Pid)); strings.Contains(" "+string(b), fmt.Sprintf(" %d ", escapee[0].Pid)) {
		t.Fatalf("the escapee %d is a child of the helper's main thread: the test does not test what it should", escapee[0].Pid)
	}
	closeFinding(t, s, 1, append(helper, escapee...))
}

// closeFinding closes s and fails the test unless its teardown's walk found at least found processes,
// every process of ps is dead, and nothing is left below this process.
func closeFinding(t *testing.T, s *Session, found int, ps []testutil.Proc) {
	t.Helper()
	rep, err := s.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Found < found {
		t.Errorf("report %v: the walk should have found %d processes outside the slice", rep, found)
	}
	testutil.AssertDead(t, ps)
	if d := descendants(t); len(d) != 0 {
		t.Errorf("left: %v", d)
	}
}

// TestWalkFindsProcessWhoseMainThreadExited: a task's process outside the slice ends its main
// thread alone, after another thread started a sleeper with no environment. The process shows as a
// zombie with an empty environment, but lives, and is the sleeper's parent: the teardown's walk must
// neither pass over it nor stop at it.
func TestWalkFindsProcessWhoseMainThreadExited(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{})
			s := newTestSession(t, r, SessionOptions{})
			procs := ""
			if mode == ContainCgroup {
				procs = filepath.Join(r.Containment().Cgroup.Mountpoint, "cgroup.procs")
			}
			helper, sleeper := startHelper(t, s, "leaderexit", procs)
			w := proc.NewWalker()
			testutil.Eventually(t, "the helper's main thread to exit alone", func() bool {
				st, ok := w.Stat(helper[0].Pid)
				return ok && st.State == 'Z' && st.Threads > 1
			})
			if env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", helper[0].Pid)); len(env) != 0 {
				t.Fatalf("the helper's environ shows %d bytes: the test does not test what it should", len(env))
			}
			closeFinding(t, s, 2, append(helper, sleeper...)) // the helper and its sleeper
		})
	}
}

// TestEscapeeDiesBeforeItsSessionEnds: in cgroup containment a process that cleared its environment,
// double-forked, called setsid and moved itself out of the slice is adopted by the Reaper outside
// every slice: the periodic check kills it while its session goes on, and leaves the session's own
// leftover alone.
func TestEscapeeDiesBeforeItsSessionEnds(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	s := newTestSession(t, r, SessionOptions{})
	procs := filepath.Join(r.Containment().Cgroup.Mountpoint, "cgroup.procs")
	pids := filepath.Join(t.TempDir(), "pids")
	res := run(t, s, fmt.Sprintf(`sleep 1000 & echo $! >> %[2]s
env -i /bin/sh -c 'setsid /bin/sh -c "echo 0 > %[1]s; /bin/sh -c \"echo \\\$\\\$ >> %[2]s; exec sleep 1000\" &" &'
`, procs, pids)+testutil.AwaitLines(pids, 2))
	ps := s.pidsIn(t, res.Output)
	leftover, escapee := ps[0], ps[1]
	testutil.AwaitDead(t, []testutil.Proc{escapee}, 3*adoptionPeriod)
	if !testutil.Running(leftover) {
		t.Error("the session's own leftover died with the escapee")
	}
	if l := s.List(); len(l.Leftovers) != 1 || len(l.Leftovers[0].Pids) != 1 {
		t.Errorf("leftovers %+v, want the one sleep", l.Leftovers)
	}
}

// TestAdoptersWithNamespaces: where every task ran in a PID namespace, the scans for escapees leave
// the Reaper out (nothing outside a namespace can be orphaned to it) and an init that said its
// namespace is empty; and at a session's end every init: its own is killed with its namespace, the
// others' escapees are the periodic check's.
func TestAdoptersWithNamespaces(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	if !r.Containment().PIDNamespace.On {
		t.Skipf("skipped: no PID namespaces here: %s", r.Containment().PIDNamespace.Reason)
	}
	s1, s2 := newTestSession(t, r, SessionOptions{}), newTestSession(t, r, SessionOptions{})
	quiet := newTestSession(t, r, SessionOptions{})
	run(t, s1, "sleep 1000 &") // an orphan of the session: its init's child
	run(t, s2, "sleep 1000 &")
	run(t, quiet, "true")
	in1, _, _ := s1.walkRoot()
	in2, _, _ := s2.walkRoot()
	want := []int{min(in1, in2), max(in1, in2)}
	if got := adopterPids(r.adopters(nil)); !slices.Equal(got, want) {
		t.Errorf("adopters %v, want the inits with an orphan %v", got, want)
	}
	if got := adopterPids(r.adopters(s1)); len(got) != 0 {
		t.Errorf("adopters at the end of the session of init %d: %v, want none", in1, got)
	}
}

// TestAdoptersLeaveOutEndingSessions: the init of a session whose teardown has begun is no adopter
// to look under (the teardown kills it, and the kernel what is left in its namespace): in a storm
// of DELETEs or a shutdown, each ending session's check looks only under the sessions that go on.
func TestAdoptersLeaveOutEndingSessions(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{Grace: new(time.Minute)})
	if !r.Containment().PIDNamespace.On {
		t.Skipf("skipped: no PID namespaces here: %s", r.Containment().PIDNamespace.Reason)
	}
	live, ending := newTestSession(t, r, SessionOptions{}), newTestSession(t, r, SessionOptions{})
	run(t, live, "sleep 1000 &")
	run(t, ending, "trap '' TERM; sleep 1000 &") // holds its teardown in the grace period
	in1, _, _ := live.walkRoot()
	ctx, hurry := context.WithCancel(context.Background())
	closed := make(chan error, 1)
	go func() {
		_, err := ending.Close(ctx)
		closed <- err
	}()
	testutil.Eventually(t, "the ending session's init to be left out", func() bool {
		return slices.Equal(adopterPids(r.adopters(nil)), []int{in1})
	})
	select {
	case err := <-closed:
		t.Fatalf("the teardown ended within its grace period (%v): the test proves nothing", err)
	default:
	}
	hurry()
	select {
	case err := <-closed:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(testutil.Slow(30 * time.Second)):
		t.Fatal("the teardown did not end once hurried")
	}
}

// TestAdoptersWithout: once a task ran outside a PID namespace, the Reaper is scanned for escapees.
func TestAdoptersWithout(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{PIDNamespace: PIDNamespaceOff})
	if got := adopterPids(r.adopters(nil)); len(got) != 0 {
		t.Errorf("adopters before any task: %v", got)
	}
	run(t, newTestSession(t, r, SessionOptions{}), "true")
	if got := adopterPids(r.adopters(nil)); !slices.Equal(got, []int{r.pid}) {
		t.Errorf("adopters after a task outside a namespace: %v, want the Reaper %d", got, r.pid)
	}
}

// adopterPids returns the adopters' pids in order.
func adopterPids(as []kill.Adopter) []int {
	var out []int
	for _, a := range as {
		out = append(out, a.Pid)
	}
	slices.Sort(out)
	return out
}
