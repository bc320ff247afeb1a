package kill

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"github.com/cgreaper/reaper/internal/testutil"
)

// kids reaps what the tests start, and the orphans they leave: this process is their subreaper, as a
// Reaper or a guard is.
var kids *reap.Children

func TestMain(m *testing.M) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "become child subreaper:", err)
		os.Exit(1)
	}
	kids = reap.NewChildren()
	code := m.Run()
	kids.Close([]string{"/bin/sh", "-c", ":"})
	os.Exit(code)
}

// testSlice returns a slice below a unique root, with the strongest kill this kernel offers. Cleanup
// kills what is left in the root's slices and removes them and the root, also when the test failed.
func testSlice(t testing.TB) (*cgroup.Root, *cgroup.Slice, cgroup.KillMethod) {
	t.Helper()
	root, err := cgroup.OpenRoot(cgroup.Options{Root: testutil.CgroupRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	return root, create(t, root, "slice"), root.Info().Kill
}

// create makes a slice below root, killed and removed at cleanup.
func create(t testing.TB, root *cgroup.Root, name string) *cgroup.Slice {
	t.Helper()
	s, err := root.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		Policy{}.Slice(context.Background(), s, time.Now().Add(time.Minute))
		if err := s.Remove(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return s
}

// start runs script with sh in s, in a process group of its own, its output to a file that the test
// does not read (its background processes keep it open); it returns the shell's pid.
func start(t testing.TB, s *cgroup.Slice, script string) int {
	t.Helper()
	fd, err := s.OpenFD()
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	attr := &syscall.ProcAttr{
		Files: []uintptr{^uintptr(0), out.Fd(), out.Fd()},
		Sys:   &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd()), Setpgid: true},
	}
	pid, _, err := kids.Start(func() (int, error) { return syscall.ForkExec("/bin/sh", []string{"sh", "-c", script}, attr) })
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// startAwait runs script in s (see start), waits until file holds n lines of pids, and returns them.
func startAwait(t testing.TB, s *cgroup.Slice, script, file string, n int) []testutil.Proc {
	t.Helper()
	_, procs := startAwaitShell(t, s, script, file, n)
	return procs
}

// startAwaitShell is startAwait that also returns the shell's pid.
func startAwaitShell(t testing.TB, s *cgroup.Slice, script, file string, n int) (int, []testutil.Proc) {
	t.Helper()
	shell := start(t, s, script)
	var text string
	testutil.Eventually(t, fmt.Sprintf("%d pids in %s", n, file), func() bool {
		b, _ := os.ReadFile(file)
		text = string(b)
		return lines(text) >= n
	})
	return shell, testutil.PidsIn(t, text)
}

func lines(s string) int {
	n := 0
	for _, c := range s {
		if c == '\n' {
			n++
		}
	}
	return n
}

// TestSliceMethods kills a slice with each hard kill the kernel may offer (forced here where this
// kernel has a stronger one): whatever the method, nothing in it survives, setsid, stopped,
// SIGTERM-ignoring and forking processes included.
func TestSliceMethods(t *testing.T) {
	for _, method := range []cgroup.KillMethod{cgroup.KillFile, cgroup.KillFreeze, cgroup.KillSignal} {
		t.Run(method.String(), func(t *testing.T) {
			_, s, strongest := testSlice(t)
			if method < strongest { // a smaller method is a stronger one
				t.Skipf("skipped: this kernel offers %v, not %v", strongest, method)
			}
			dir := t.TempDir()
			left := startAwait(t, s, testutil.Zoo(dir), filepath.Join(dir, "pids"), 6)
			remaining, err := Policy{Method: method}.Slice(context.Background(), s, time.Now().Add(time.Minute))
			if err != nil || len(remaining) > 0 {
				t.Fatalf("Slice = %v, %v; want nothing left", remaining, err)
			}
			testutil.AssertDead(t, left)
		})
	}
}

// TestZeroPolicyKillsWithCgroupKill: a Policy that names no method (the sweep's, the guard's
// cleanup's) asks for cgroup.kill, which also kills what forks while it runs, as its doc says; it
// once meant the SIGKILL sweep, the weakest.
func TestZeroPolicyKillsWithCgroupKill(t *testing.T) {
	if m := (Policy{}).Method; m != cgroup.KillFile {
		t.Fatalf("the zero Policy kills with %v, want %v", m, cgroup.KillFile)
	}
}

// TestFrozenSliceDies: a slice frozen (by someone else) when it is killed still dies.
func TestFrozenSliceDies(t *testing.T) {
	_, s, strongest := testSlice(t)
	if strongest > cgroup.KillFreeze {
		t.Skip("skipped: no cgroup v2 freezer here")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "pids")
	left := startAwait(t, s, `sh -c 'trap "" TERM; echo $$ >> `+f+`; exec sleep 1000' & exec sleep 1000`, f, 1)
	if frozen, err := s.Freeze(time.Now().Add(10 * time.Second)); !frozen || err != nil {
		t.Fatalf("Freeze = %v, %v", frozen, err)
	}
	if remaining, err := (Policy{}).Slice(context.Background(), s, time.Now().Add(time.Minute)); err != nil || len(remaining) > 0 {
		t.Fatalf("Slice = %v, %v; want nothing left", remaining, err)
	}
	testutil.AssertDead(t, left)
}

// TestTerminatePhases ends a scope with a grace period: a process that honours SIGTERM ends in the
// polite phase, one that ignores it is killed with the slice, and one that moved itself out of the
// slice (a child of the slice's shell) is found by the first walk, by its parent, and ends too. The
// report counts each where it belongs.
func TestTerminatePhases(t *testing.T) {
	root, s, _ := testSlice(t)
	outside := create(t, root, "outside")
	dir := t.TempDir()
	f := filepath.Join(dir, "pids")
	script := fmt.Sprintf(`sh -c 'trap "" TERM; echo $$ >> %[1]s; exec sleep 1000' &
sh -c 'echo $$ > %[2]s/cgroup.procs && echo $$ >> %[1]s && exec sleep 1000' &
sleep 1000 & echo $! >> %[1]s
exec sleep 1000`, f, outside.Path())
	left := startAwait(t, s, script, f, 3)
	testutil.Eventually(t, "the escapee outside the slice", func() bool {
		pids, _ := outside.Pids()
		return len(pids) == 1
	})
	p := Policy{Grace: 300 * time.Millisecond}
	rep, err := p.Terminate(context.Background(), Scope{Name: "test", Slice: s, Self: os.Getpid()})
	if err != nil {
		t.Fatalf("Terminate: %v (report %v)", err, rep)
	}
	// In the slice: the shell (exec'd sleep), the sleeper and the stubborn one; outside: the escapee.
	if rep.Terminated != 3 || rep.Killed != 1 || rep.Found != 1 || rep.Walked != 0 || len(rep.Remaining) != 0 {
		t.Errorf("report %+v: want 3 ended by SIGTERM (one of them found outside), 1 killed with the slice", rep)
	}
	testutil.AssertDead(t, left)
}

// TestTerminateContextCutsGrace: cancelling Terminate's context ends the grace period at once, and
// the hard kill follows.
func TestTerminateContextCutsGrace(t *testing.T) {
	_, s, _ := testSlice(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "pids")
	left := startAwait(t, s, `sh -c 'trap "" TERM; echo $$ >> `+f+`; exec sleep 1000' & exec sleep 1000`, f, 1)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	rep, err := Policy{Grace: time.Hour}.Terminate(ctx, Scope{Name: "test", Slice: s, Self: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Killed != 1 || rep.Duration > time.Minute {
		t.Errorf("report %v: cancelling the context should end the grace period and hard-kill", rep)
	}
	testutil.AssertDead(t, left)
}

// TestTerminateStrangerInTheSlice: a scope whose walks look below this process, which has no child,
// has nothing alive outside its slice; but a process that is not this one's descendant may still sit
// in the slice (moved there by someone else), and it dies with the slice all the same. Here it is
// the orphan of a shell started while this process was no subreaper, so that init adopted it.
func TestTerminateStrangerInTheSlice(t *testing.T) {
	if os.Getpid() == 1 {
		t.Skip("this test runs as the init of its PID namespace: every orphan comes back to it")
	}
	_, s, _ := testSlice(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "pids")
	subreaper := func(on uintptr) {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, on, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	subreaper(0)
	t.Cleanup(func() { subreaper(1) })
	shell, left := startAwaitShell(t, s, `sleep 1000 & echo $! >> `+f, f, 1)
	// Adopted once the shell has exited: while it lives it is the sleeper's parent, and a sleeper it
	// left after this process became a subreaper again would be this process's.
	testutil.Eventually(t, "the sleeper adopted by another process", func() bool {
		st, ok := proc.NewWalker().Stat(left[0].Pid)
		return ok && st.PPid != os.Getpid() && st.PPid != shell
	})
	subreaper(1)
	testutil.Eventually(t, "the shell reaped", func() bool { return !reap.HasChildren() })
	rep, err := Policy{}.Terminate(context.Background(), Scope{Name: "test", Slice: s, Self: os.Getpid()})
	if err != nil {
		t.Fatalf("Terminate: %v (report %v)", err, rep)
	}
	if rep.Killed != 1 {
		t.Errorf("report %+v: want the stranger killed with the slice", rep)
	}
	testutil.AssertDead(t, left)
}

// TestDescendants: what a subreaper was left with (every process that escapes a process group or its
// parent, orphaned to this process) dies; once nothing is left below this process, a second call finds
// nothing to kill.
func TestDescendants(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pids")
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	attr := &syscall.ProcAttr{Files: []uintptr{^uintptr(0), out.Fd(), out.Fd()}, Sys: &syscall.SysProcAttr{Setpgid: true}}
	_, exited, err := kids.Start(func() (int, error) {
		return syscall.ForkExec("/bin/sh", []string{"sh", "-c", testutil.Zoo(dir)}, attr)
	})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	testutil.Eventually(t, "6 pids in "+f, func() bool {
		b, _ := os.ReadFile(f)
		text = string(b)
		return lines(text) >= 6
	})
	left := testutil.PidsIn(t, text)
	descendants := func() []proc.Proc {
		killed, _, _ := Policy{}.Everything(context.Background(), Everything{Self: os.Getpid()})
		return killed
	}
	t.Cleanup(func() { descendants() })
	select {
	case <-exited: // the shell returns once every process has written its pid: they are orphans now
	case <-time.After(time.Minute):
		t.Fatal("the zoo's shell has not returned")
	}
	killed := descendants()
	if len(killed) < len(left) {
		t.Errorf("killed %d processes (%v), want at least the %d of the zoo", len(killed), killed, len(left))
	}
	testutil.AssertDead(t, left)
	testutil.Eventually(t, "the killed processes reaped", func() bool { return !reap.HasChildren() })
	if again := descendants(); len(again) != 0 {
		t.Errorf("a second call killed %v: nothing was left", again)
	}
}

// TestEscapeesByData: the check for escapees, given what tells a live session's process (here as in
// process containment: a marker of the instance's other than the ending session's), kills the orphans
// of this process (the adopter) that no session owns, and spares a live session's orphan, a process
// remembered by pid and start time, and the adopter's own tasks.
func TestEscapeesByData(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pids")
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	const prefix = "TEST_SESSION=r1/"
	orphan := func(env string) testutil.Proc {
		t.Helper()
		before := 0
		if b, err := os.ReadFile(f); err == nil {
			before = lines(string(b))
		}
		attr := &syscall.ProcAttr{Env: []string{env}, Files: []uintptr{^uintptr(0), out.Fd(), out.Fd()}}
		_, exited, err := kids.Start(func() (int, error) {
			return syscall.ForkExec("/bin/sh", []string{"sh", "-c", "sleep 1000 & echo $! >> " + f}, attr)
		})
		if err != nil {
			t.Fatal(err)
		}
		<-exited // the shell is gone: its sleep is this process's now
		var text string
		testutil.Eventually(t, "the orphan's pid", func() bool {
			b, _ := os.ReadFile(f)
			text = string(b)
			return lines(text) > before
		})
		ps := testutil.PidsIn(t, text)
		return ps[len(ps)-1]
	}
	ended := orphan(prefix + "s-1")
	live := orphan(prefix + "s-2")
	bare := orphan("X=1")
	known := orphan("X=2")
	task, _, err := kids.Start(func() (int, error) {
		return syscall.ForkExec("/bin/sleep", []string{"sleep", "1000"}, &syscall.ProcAttr{Files: []uintptr{^uintptr(0), out.Fd(), out.Fd()}})
	})
	if err != nil {
		t.Fatal(err)
	}
	taskProc, _ := testutil.ProcOf(task)
	t.Cleanup(func() { Policy{}.Everything(context.Background(), Everything{Self: os.Getpid()}) })
	rep := Policy{}.Escapees(context.Background(), Escapees{
		Adopters: []Adopter{{Pid: os.Getpid(), Started: map[int]bool{task: true}}},
		Prefix:   prefix, Ended: prefix + "s-1",
		Known: map[int]uint64{known.Pid: known.Start},
		When:  "test",
	}, time.Now().Add(time.Minute))
	if rep.Killed != 2 {
		t.Errorf("report %+v: want the ended session's orphan and the unmarked one killed", rep)
	}
	testutil.AssertDead(t, []testutil.Proc{ended, bare})
	if alive := testutil.Alive([]testutil.Proc{live, known, taskProc}); len(alive) != 3 {
		t.Errorf("of a live session's orphan, a remembered process and a task, only %v live on", alive)
	}
}
