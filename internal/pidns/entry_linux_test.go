package pidns

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// enterable starts an init of kind (see inits) and an entry that can enter it, skipping the test where
// this host makes the namespaces only through a user namespace (which cannot be entered by a threaded
// process).
func enterable(t *testing.T, kind string, idle time.Duration) (*Init, *Entry) {
	t.Helper()
	opts := testOptions(t)
	withInit(t, &opts, kind)
	m, err := Probe(opts)
	if err != nil {
		t.Skipf("skipped: this host gives no PID namespaces: %v", err)
	}
	if m.UserNS {
		t.Skip("skipped: PID namespaces are made here only through a user namespace, which Fork cannot enter")
	}
	opts.Idle = idle
	in, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	if in.Small() != (kind == "small") {
		t.Fatalf("asked for the %s init, got one whose Small is %v (the small init's failure: %v)", kind, in.Small(), small.Err())
	}
	t.Cleanup(func() {
		in.Kill()
		if !in.Wait(context.Background(), time.Now().Add(30*time.Second)) {
			t.Errorf("cleanup: the init %d did not end within 30 s", in.Pid())
		}
		in.Close()
	})
	e, err := NewEntry(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return in, e
}

// forkSh forks sh -c script into in's namespaces, its output to out (if set), and returns its pid
// and exit channel.
func forkSh(t *testing.T, in *Init, e *Entry, script string, out *os.File) (int, <-chan reap.Exit, error) {
	t.Helper()
	null := devNull(t)
	stdout := null
	if out != nil {
		stdout = out
	}
	attr := &syscall.ProcAttr{Dir: "/", Env: testEnv, Files: []uintptr{null.Fd(), stdout.Fd(), stdout.Fd()},
		Sys: &syscall.SysProcAttr{Setpgid: true}}
	var start uint64
	pid, exited, err := in.Fork(e, kids, func() (int, error) {
		return syscall.ForkExec("/bin/sh", []string{"sh", "-c", script}, attr)
	}, func(pid int) {
		st, _ := proc.NewWalker().Stat(pid) // this process's /proc again
		start = st.Start
	})
	if err == nil && start == 0 {
		t.Errorf("the process %d could not be read in this process's /proc before it could be reaped", pid)
	}
	return pid, exited, err
}

func waitExit(t *testing.T, exited <-chan reap.Exit) reap.Exit {
	t.Helper()
	select {
	case st := <-exited:
		return st
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30 s")
		return reap.Exit{}
	}
}

// TestFork: a process Fork starts is born in the init's PID namespace (a pid there, the namespace's
// /proc, its parent outside the namespace) with this process's root and the directory asked for; it
// is this process's child, whose exit comes through the child reaper; the namespace is not empty while
// it lives, and is once it has gone.
func TestFork(t *testing.T) {
	for _, kind := range inits {
		t.Run(kind, func(t *testing.T) {
			in, e := enterable(t, kind, 0)
			out, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			pid, exited, err := forkSh(t, in, e, `echo $$ $PPID $(pwd); ls /proc | grep -c '^[0-9]'; read _ <&0`, out)
			if err != nil {
				t.Fatal(err)
			}
			if st, ok := proc.NewWalker().Stat(pid); !ok || st.PPid != os.Getpid() {
				t.Errorf("the process %d's parent is %d, want this process (%d)", pid, st.PPid, os.Getpid())
			}
			if nsOf(pid) != nsOf(in.Pid()) {
				t.Errorf("the process is in PID namespace %s, its init in %s", nsOf(pid), nsOf(in.Pid()))
			}
			if in.Empty() {
				t.Error("Empty while a forked process lives")
			}
			st := waitExit(t, exited) // stdin is /dev/null: read returns at once
			if st.Pid != pid || st.Code() != 1 {
				t.Errorf("exit %+v, want pid %d with status 1 (read at the end of /dev/null)", st, pid)
			}
			b, _ := os.ReadFile(out.Name())
			f := strings.Fields(string(b))
			if len(f) != 4 || f[0] == "1" || f[1] != "0" || f[2] != "/" {
				t.Fatalf("the process printed %q, want a pid other than 1 in the namespace, parent 0, directory /, and a count", b)
			}
			if n, _ := strconv.Atoi(f[3]); n < 2 || n > 10 {
				t.Errorf("the process saw %s processes in its /proc, want the namespace's few (itself, its init, ls)", f[3])
			}
			eventually(t, "the namespace to be empty once the process has exited", in.Empty)
		})
	}
}

// TestForkIdle: an init does not end idle while a process Fork started lives, though it is not the
// init's child; it does once that process has exited, and Fork then fails with ErrIdle.
func TestForkIdle(t *testing.T) {
	for _, kind := range inits {
		t.Run(kind, func(t *testing.T) {
			in, e := enterable(t, kind, 200*time.Millisecond)
			file := filepath.Join(t.TempDir(), "go")
			_, exited, err := forkSh(t, in, e, `while [ ! -e `+file+` ]; do sleep 0.05; done`, nil)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(600 * time.Millisecond) // not readiness: three idle periods with a process in the namespace
			if err := in.Err(); err != nil {
				t.Fatalf("the init ended while a forked process lived in its namespace: %v", err)
			}
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if st := waitExit(t, exited); st.Code() != 0 {
				t.Errorf("the process exited with %d", st.Code())
			}
			if !in.Wait(t.Context(), time.Now().Add(30*time.Second)) {
				t.Fatal("the init did not end once its namespace was empty")
			}
			_, _, err = forkSh(t, in, e, "true", nil)
			if !errors.Is(err, ErrIdle) || !errors.Is(err, ErrEnded) {
				t.Errorf("a fork after the idle exit: %v, want ErrIdle", err)
			}
		})
	}
}

// TestForkIdleOrphan: an orphan a forked process left, adopted by the init, keeps the init from ending
// idle until it has gone.
func TestForkIdleOrphan(t *testing.T) {
	for _, kind := range inits {
		t.Run(kind, func(t *testing.T) {
			in, e := enterable(t, kind, 200*time.Millisecond)
			file := filepath.Join(t.TempDir(), "go")
			_, exited, err := forkSh(t, in, e, `(while [ ! -e `+file+` ]; do sleep 0.05; done) & exit 0`, nil)
			if err != nil {
				t.Fatal(err)
			}
			waitExit(t, exited)
			eventually(t, "the orphan to be the init's", func() bool {
				childless, ok := proc.NewWalker().Childless(proc.Stat{Pid: in.Pid(), Start: in.StartTime()})
				return ok && !childless
			})
			time.Sleep(600 * time.Millisecond) // not readiness: three idle periods with an orphan in the namespace
			if err := in.Err(); err != nil {
				t.Fatalf("the init ended while an orphan lived in its namespace: %v", err)
			}
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if !in.Wait(t.Context(), time.Now().Add(30*time.Second)) {
				t.Fatal("the init did not end once the orphan had gone")
			}
			if err := in.Err(); !errors.Is(err, ErrIdle) {
				t.Errorf("the init ended with %v, want ErrIdle", err)
			}
		})
	}
}

// TestForkIntoDeadInit: once the init has been killed, Fork fails with ErrEnded and starts nothing,
// whether or not the server has seen the init's end yet; a process it started before dies with the
// namespace, and its exit (SIGKILL) comes through the child reaper.
func TestForkIntoDeadInit(t *testing.T) {
	for _, kind := range inits {
		t.Run(kind, func(t *testing.T) {
			in, e := enterable(t, kind, 0)
			pid, exited, err := forkSh(t, in, e, "sleep 100", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Kill(in.Pid(), unix.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if st := waitExit(t, exited); st.Pid != pid || !st.Status.Signaled() || st.Status.Signal() != unix.SIGKILL {
				t.Errorf("the process's exit %+v, want death by SIGKILL", st)
			}
			_, _, err = forkSh(t, in, e, "true", nil)
			if !errors.Is(err, ErrEnded) {
				t.Errorf("a fork into a dead init's namespace: %v, want ErrEnded", err)
			}
		})
	}
}
