package pidns

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/smallinit"
	"golang.org/x/sys/unix"
)

// The small init (internal/smallinit) as the tests of Fork do not see it: what it is, what it refuses,
// how it treats signals and orphans, and the fall-back to this program where it cannot run.

// TestSmallInit: the small init is pid 1 of its namespace with its /proc mounted, named as the Go init
// is (its command line, and the name ps shows), holding only the descriptors it was given; it refuses
// to spawn, and lives on.
func TestSmallInit(t *testing.T) {
	in, e := enterable(t, "small", 0)
	if ok, note := in.Proc(); !ok {
		t.Errorf("the small init did not mount /proc: %s", note)
	}
	pid := strconv.Itoa(in.Pid())
	if b, _ := os.ReadFile("/proc/" + pid + "/cmdline"); string(b) != "reaper-init\x00"+InitArg+"\x00plain\x00" {
		t.Errorf("its command line is %q", b)
	}
	if b, _ := os.ReadFile("/proc/" + pid + "/comm"); string(b) != "reaper-init\n" {
		t.Errorf("its name is %q, want reaper-init", b)
	}
	fds, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fd := range fds {
		names = append(names, fd.Name())
	}
	if !slices.Equal(names, []string{"0", "1", "2", "3"}) {
		t.Errorf("it holds descriptors %v, want 0 to 3 (its program's among them?)", names)
	}
	if _, err := in.Spawn(Request{Argv: []string{"/bin/true"}, FDs: fdsOf(devNull(t))}); !errors.Is(err, ErrNoSpawn) {
		t.Errorf("Spawn of the small init: %v, want ErrNoSpawn", err)
	}
	if err := in.Err(); err != nil {
		t.Fatalf("the init ended after a refused spawn: %v", err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	_, exited, err := forkSh(t, in, e, "ps -e -o pid=,args=", out)
	if err != nil {
		t.Fatal(err)
	}
	waitExit(t, exited)
	b, _ := os.ReadFile(out.Name())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || strings.TrimSpace(lines[0]) != "1 reaper-init "+InitArg+" plain" {
		t.Errorf("ps in the namespace lists %q, want the init as 1, the shell and ps", lines)
	}
}

// TestSmallOrphans: orphans the small init adopts, setsid ones and those that exit at once
// included, leave no zombie: the kernel reaps them.
func TestSmallOrphans(t *testing.T) {
	in, e := enterable(t, "small", 0)
	pid, exited, err := forkSh(t, in, e, `for i in $(seq 20); do (sh -c 'exit 0' &); (setsid sh -c 'sleep 0.1' &); done; exec sleep 1000`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := nsOf(in.Pid())
	eventually(t, "no zombie and no process but the task and its init in the namespace", func() bool {
		procs, _ := proc.NewWalker().Snapshot(nil)
		n := 0
		for _, p := range procs {
			if nsOf(p.Pid) == ns && (p.State == 'Z' || p.Pid != pid && p.Pid != in.Pid()) {
				n++
			}
		}
		return n == 0
	})
	unix.Kill(pid, unix.SIGKILL)
	waitExit(t, exited)
	eventually(t, "the namespace to be empty", in.Empty)
}

// TestSmallSignals: no signal a task sends its init ends or stops it, 32 and 34 included (which end
// the Go init now and then: see the package documentation), nor one sent from outside the namespace
// but SIGKILL.
func TestSmallSignals(t *testing.T) {
	in, e := enterable(t, "small", 0)
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	_, exited, err := forkSh(t, in, e, "for s in $(seq 64); do kill -$s 1 || echo failed $s; done; echo sent", out)
	if err != nil {
		t.Fatal(err)
	}
	if st := waitExit(t, exited); st.Code() != 0 {
		t.Fatalf("the task exited with %v", st)
	}
	if b, _ := os.ReadFile(out.Name()); string(b) != "sent\n" {
		t.Errorf("the task printed %q", b)
	}
	for s := 1; s <= 64; s++ {
		if sig := unix.Signal(s); sig != unix.SIGKILL && sig != unix.SIGSTOP {
			if err := unix.Kill(in.Pid(), sig); err != nil {
				t.Fatalf("kill %d %d: %v", in.Pid(), s, err)
			}
		}
	}
	_, exited, err = forkSh(t, in, e, "true", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitExit(t, exited)
	if st, ok := proc.NewWalker().Stat(in.Pid()); !ok || st.State == 'T' || st.State == 'Z' {
		t.Errorf("the init %d is stopped or gone (state %q)", in.Pid(), st.State)
	}
	if err := in.Err(); err != nil {
		t.Fatalf("the init ended: %v", err)
	}
}

// TestSmallSignal: the small init answers a signal request: every process of its namespace gets the
// signals, a stopped setsid one included, and an empty namespace is no failure.
func TestSmallSignal(t *testing.T) {
	in, e := enterable(t, "small", 0)
	dir := t.TempDir()
	pid, exited, err := forkSh(t, in, e, `setsid sh -c 'trap "echo term > `+dir+`/setsid; exit 0" TERM; kill -STOP $$; while :; do sleep 0.01; done' &
trap "echo term > `+dir+`/main; exit 0" TERM; while :; do sleep 0.01; done`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := nsOf(in.Pid())
	eventually(t, "the setsid child, stopped", func() bool {
		procs, _ := proc.NewWalker().Snapshot(nil)
		return slices.ContainsFunc(procs, func(p proc.Stat) bool { return p.State == 'T' && p.Pid != pid && nsOf(p.Pid) == ns })
	})
	if err := in.Signal(t.Context(), time.Now().Add(30*time.Second), unix.SIGTERM, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if st := waitExit(t, exited); st.Code() != 0 {
		t.Errorf("the task exited with %v, want 0 (its TERM trap)", st)
	}
	for _, f := range []string{"main", "setsid"} {
		eventually(t, "the "+f+" process to say it got SIGTERM", func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			return string(b) == "term\n"
		})
	}
	eventually(t, "the namespace to be empty", in.Empty)
	if err := in.Signal(t.Context(), time.Now().Add(30*time.Second), unix.SIGTERM); err != nil {
		t.Errorf("Signal to an empty namespace: %v", err)
	}
	if err := in.Err(); err != nil {
		t.Fatalf("the init ended: %v", err)
	}
}

// TestSmallNotInUserNS: where the namespaces are made through a user namespace, the Go init serves
// (the server cannot enter them, so the init must start the tasks), whatever Options.Small says.
func TestSmallNotInUserNS(t *testing.T) {
	opts := testOptions(t)
	withInit(t, &opts, "small")
	opts.UserNS = true
	in, err := Start(opts)
	if err != nil {
		t.Skipf("skipped: no PID namespace through a user namespace here: %v", err)
	}
	t.Cleanup(func() {
		in.Kill()
		in.Wait(t.Context(), time.Now().Add(30*time.Second))
		in.Close()
	})
	if in.Small() {
		t.Error("the small init was started in a user namespace")
	}
	task, _ := spawnSh(t, in, "exit 3", nil)
	if code := exitCode(t, task); code != 3 {
		t.Errorf("the task exited %d", code)
	}
}

// TestSmallFallBack: where the small init cannot run (here a program the kernel cannot execute),
// Start starts this program instead, the Program says why, and later Starts go to this program.
func TestSmallFallBack(t *testing.T) {
	bad, err := smallinit.LoadImage([]byte("#!/nonexistent\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	opts := testOptions(t)
	if m, err := Probe(opts); err != nil || m.UserNS {
		t.Skipf("skipped: this host gives no PID namespaces without a user namespace (%v)", err)
	}
	opts.Small = bad
	for i := range 2 {
		in, err := Start(opts)
		if err != nil {
			t.Fatal(err)
		}
		if in.Small() {
			t.Errorf("start %d: the small init started from a program that cannot run", i)
		}
		task, _ := spawnSh(t, in, "exit 3", nil)
		if code := exitCode(t, task); code != 3 {
			t.Errorf("the task exited %d", code)
		}
		in.Kill()
		in.Wait(t.Context(), time.Now().Add(30*time.Second))
		in.Close()
		if err := bad.Err(); !errors.Is(err, unix.ENOENT) {
			t.Errorf("the program's failure: %v, want ENOENT (its interpreter is missing)", err)
		}
	}
}
