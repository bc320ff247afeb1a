package pidns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"golang.org/x/sys/unix"
)

var testEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}

// spawnSh runs a shell script in the init's namespace with stdout and stderr to out (a fresh file if
// nil).
func spawnSh(t testing.TB, in *Init, script string, out *os.File) (Task, *os.File) {
	t.Helper()
	if out == nil {
		var err error
		if out, err = os.Create(filepath.Join(t.TempDir(), "out")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { out.Close() })
	}
	task, err := in.Spawn(Request{Argv: []string{"/bin/sh", "-c", script}, Env: testEnv, FDs: fdsOf(devNull(t), out, out), Setpgid: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if task.PidFD >= 0 {
			unix.Close(task.PidFD)
		}
	})
	return task, out
}

func devNull(t testing.TB) *os.File {
	t.Helper()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// exitCode waits for a task's exit.
func exitCode(t testing.TB, task Task) int {
	t.Helper()
	select {
	case st := <-task.Exited:
		if st.Pid != task.Pid {
			t.Errorf("the exit names pid %d, the task is %d", st.Pid, task.Pid)
		}
		return st.Code()
	case <-time.After(30 * time.Second):
		t.Fatalf("task %d did not exit within 30 s", task.Pid)
		return 0
	}
}

// nsOf returns the PID namespace of pid as its link reads ("pid:[4026…]").
func nsOf(pid int) string {
	s, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	return s
}

// TestSpawn: what a task is given reaches it (argv, environment, directory, descriptors, its own
// process group), its pid is the host's with the namespace's beside it, and its exit status comes
// back, including a death by signal.
func TestSpawn(t *testing.T) {
	in := startInit(t)
	dir := t.TempDir()
	extra, err := os.Create(filepath.Join(dir, "extra"))
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	out, _ := os.Create(filepath.Join(dir, "out"))
	defer out.Close()
	task, err := in.Spawn(Request{
		Argv: []string{"/bin/sh", "-c", `echo "$1 $V $(pwd) $$"; echo extra >&3; ps -o pgid= -p $$; sleep 1000`, "sh", "arg"},
		Env:  append(testEnv, "V=env"), Dir: dir, FDs: fdsOf(devNull(t), out, out, extra), Setpgid: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(task.PidFD)
	st, ok := proc.NewWalker().Stat(task.Pid)
	if !ok || st.Start != task.Start {
		t.Fatalf("task %+v: /proc says %+v", task, st)
	}
	if got, want := nsOf(task.Pid), nsOf(in.Pid()); got != want || got == nsOf(os.Getpid()) {
		t.Errorf("the task's PID namespace is %s, its init's %s, ours %s", got, want, nsOf(os.Getpid()))
	}
	status, _ := os.ReadFile("/proc/" + strconv.Itoa(task.Pid) + "/status")
	if want := fmt.Sprintf("NSpid:\t%d\t%d\n", task.Pid, task.NSPid); !bytes.Contains(status, []byte(want)) {
		t.Errorf("status of %d lacks %q:\n%s", task.Pid, want, status)
	}
	var text string
	eventually(t, "the task's output", func() bool {
		b, _ := os.ReadFile(out.Name())
		text = string(b)
		return strings.Count(text, "\n") >= 2
	})
	lines := strings.Fields(text)
	if want := []string{"arg", "env", dir, strconv.Itoa(task.NSPid), strconv.Itoa(task.NSPid)}; strings.Join(lines, " ") != strings.Join(want, " ") {
		t.Errorf("the task printed %q, want %q", lines, want)
	}
	if b, _ := os.ReadFile(extra.Name()); string(b) != "extra\n" {
		t.Errorf("descriptor 3 got %q", b)
	}
	unix.PidfdSendSignal(task.PidFD, unix.SIGTERM, nil, 0)
	if code := exitCode(t, task); code != 128+int(unix.SIGTERM) {
		t.Errorf("exit code %d after SIGTERM, want %d", code, 128+int(unix.SIGTERM))
	}
	for _, c := range []int{0, 3} {
		task, _ := spawnSh(t, in, "exit "+strconv.Itoa(c), nil)
		if code := exitCode(t, task); code != c {
			t.Errorf("exit %d reported as %d", c, code)
		}
	}
	if _, err := in.Spawn(Request{Argv: []string{"/nonexistent"}, FDs: fdsOf(devNull(t))}); !errors.Is(err, unix.ENOENT) {
		t.Errorf("spawning a missing program: %v, want ENOENT", err)
	}
}

// TestExitsFollowAnswers: many tasks that exit at once, started concurrently: every spawn is
// answered with the task's pid (read before it could be reaped), every exit comes after its answer,
// whatever the interleaving of answers and exits on the socket.
func TestExitsFollowAnswers(t *testing.T) {
	in := startInit(t)
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task, err := in.Spawn(Request{Argv: []string{"/bin/true"}, FDs: fdsOf(devNull(t), devNull(t), devNull(t)), Setpgid: true})
			if err != nil {
				errs <- err
				return
			}
			unix.Close(task.PidFD)
			if task.Pid <= 0 || task.Start == 0 {
				errs <- fmt.Errorf("task answered without its pid or start time: %+v", task)
			}
			select {
			case st := <-task.Exited:
				if st.Code() != 0 {
					errs <- fmt.Errorf("/bin/true exited %d", st.Code())
				}
			case <-time.After(30 * time.Second):
				errs <- fmt.Errorf("no exit for %d", task.Pid)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if r := in.Registered(); len(r) != 0 {
		t.Errorf("tasks still registered after their exits: %v", r)
	}
}

// TestOrphansReaped: orphans inside the namespace go to its init, which reaps them: no zombie is
// left, and none goes to the host's PID 1.
func TestOrphansReaped(t *testing.T) {
	in := startInit(t)
	task, _ := spawnSh(t, in, `for i in $(seq 20); do (sh -c 'exit 0' &); (setsid sh -c 'sleep 0.1' &); done; exec sleep 1000`, nil)
	ns := nsOf(in.Pid())
	eventually(t, "no zombie and no process but the task and its init in the namespace", func() bool {
		procs, _ := proc.NewWalker().Snapshot(nil)
		n := 0
		for _, p := range procs {
			if nsOf(p.Pid) != ns {
				continue
			}
			if p.State == 'Z' || p.Pid != task.Pid && p.Pid != in.Pid() {
				n++
			}
		}
		return n == 0
	})
	unix.PidfdSendSignal(task.PidFD, unix.SIGKILL, nil, 0)
	exitCode(t, task)
}

// TestInitDeath: when the init dies, every process of its namespace dies with it (a setsid one that
// ignores SIGTERM included), each task's exit comes as SIGKILL, and spawns fail from then on.
func TestInitDeath(t *testing.T) {
	in := startInit(t)
	file := filepath.Join(t.TempDir(), "pids")
	task, _ := spawnSh(t, in, `setsid sh -c 'trap "" TERM; echo $$ >> `+file+`; exec sleep 1000' & echo $$ >> `+file+`; exec sleep 1000`, nil)
	eventually(t, "both processes", func() bool {
		b, _ := os.ReadFile(file)
		return bytes.Count(b, []byte{'\n'}) == 2
	})
	all, _ := proc.NewWalker().Descendants(in.Pid())
	if len(all) != 2 {
		t.Fatalf("the namespace holds %v, want the task and its setsid child", all)
	}
	if err := in.Kill(); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, task); code != 128+int(unix.SIGKILL) {
		t.Errorf("the task's exit is %d, want %d", code, 128+int(unix.SIGKILL))
	}
	if !in.Wait(t.Context(), time.Now().Add(30*time.Second)) {
		t.Fatal("the init did not end")
	}
	assertDead(t, all)
	if _, err := in.Spawn(Request{Argv: []string{"/bin/true"}, FDs: fdsOf(devNull(t))}); !errors.Is(err, ErrEnded) {
		t.Errorf("a spawn after the init's death: %v, want ErrEnded", err)
	}
}

// TestSignalsToInitFromOutside: signals sent to the init from outside its namespace, as to the
// server's process group, neither end nor stop it (a stopped init would start no task): the job
// control stops, which the init leaves at their default action (the kernel ignores those for the init
// of a namespace, from inside or out), some Go drops unasked, and every signal the init asks for.
func TestSignalsToInitFromOutside(t *testing.T) {
	in := startInit(t)
	// The first answer comes once the init is serving, and it serves once it has asked for its signals.
	task, _ := spawnSh(t, in, "true", nil)
	exitCode(t, task)
	for _, sig := range []unix.Signal{unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGUSR1, unix.SIGPIPE,
		unix.SIGALRM, unix.SIGHUP, unix.SIGINT, unix.SIGTERM, unix.SIGQUIT, unix.SIGABRT, unix.SIGSTKFLT,
		unix.SIGSYS, unix.SIGTRAP, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGSEGV} {
		if err := unix.Kill(in.Pid(), sig); err != nil {
			t.Fatalf("kill %d %v: %v", in.Pid(), sig, err)
		}
	}
	task, out := spawnSh(t, in, "echo ok", nil)
	if code := exitCode(t, task); code != 0 {
		t.Fatalf("the task exited %d", code)
	}
	if b, _ := os.ReadFile(out.Name()); string(b) != "ok\n" {
		t.Errorf("the task printed %q", b)
	}
	if st, ok := proc.NewWalker().Stat(in.Pid()); !ok || st.State == 'T' {
		t.Errorf("the init %d is stopped or gone (state %q)", in.Pid(), st.State)
	}
	if err := in.Err(); err != nil {
		t.Fatalf("the init ended: %v", err)
	}
}

// TestSignalsToInit: a task cannot end (or stop) its namespace by signalling its init with any
// signal, SIGKILL and SIGSTOP included, whether initSignals names it, Go's runtime handles it
// unasked or it is left at its default (TSTP, TTIN, TTOU), and the init's handling of signals is not
// inherited: a task dies of SIGTERM as usual.
// Signals 32 and 34 are left out: see the package documentation.
func TestSignalsToInit(t *testing.T) {
	in := startInit(t)
	var sigs []string
	for s := 1; s <= 64; s++ {
		if s != 32 && s != 34 {
			sigs = append(sigs, strconv.Itoa(s))
		}
	}
	task, out := spawnSh(t, in, "for s in "+strings.Join(sigs, " ")+"; do kill -$s 1 || echo failed $s; done; echo sent", nil)
	if code := exitCode(t, task); code != 0 {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("the task exited %d: %s", code, b)
	}
	if b, _ := os.ReadFile(out.Name()); string(b) != "sent\n" {
		t.Errorf("the task printed %q", b)
	}
	if err := in.Err(); err != nil {
		t.Fatalf("the init ended: %v", err)
	}
	task, _ = spawnSh(t, in, "kill -TERM $$; sleep 1000", nil)
	if code := exitCode(t, task); code != 128+int(unix.SIGTERM) {
		t.Errorf("a task that sent itself SIGTERM exited %d", code)
	}
}

// TestPsInside: a task's ps lists the namespace's processes only, the init as 1.
func TestPsInside(t *testing.T) {
	in := startInit(t)
	if ok, note := in.Proc(); !ok {
		t.Skipf("skipped: the init could not mount /proc here: %s", note)
	}
	task, out := spawnSh(t, in, "ps -e -o pid=,args=", nil)
	exitCode(t, task)
	b, _ := os.ReadFile(out.Name())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(strings.TrimSpace(lines[0]), "1 reaper-init "+InitArg) {
		t.Errorf("ps in the namespace lists %q, want the init as 1, the shell and ps", lines)
	}
}

// TestCloseWhileSpawning: closing the init while spawns are in flight ends every one of them, either
// started or failed with ErrEnded, and everything started dies with the namespace.
func TestCloseWhileSpawning(t *testing.T) {
	in := startInit(t)
	var mu sync.Mutex
	var started []proc.Stat
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				task, err := in.Spawn(Request{Argv: []string{"/bin/sleep", "1000"}, FDs: fdsOf(devNull(t), devNull(t), devNull(t)), Setpgid: true})
				if err != nil {
					if !errors.Is(err, ErrEnded) {
						t.Errorf("spawn: %v", err)
					}
					return
				}
				unix.Close(task.PidFD)
				mu.Lock()
				started = append(started, proc.Stat{Pid: task.Pid, Start: task.Start})
				mu.Unlock()
			}
		}()
	}
	eventually(t, "some tasks", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(started) >= 8
	})
	in.Close()
	wg.Wait()
	eventually(t, "every task to die with the namespace", func() bool { return len(alive(started)) == 0 })
}

// TestLargeRequest: a request larger than one message goes in chunks; one over the bound is refused
// before anything is sent.
func TestLargeRequest(t *testing.T) {
	in := startInit(t)
	env := append([]string(nil), testEnv...)
	for i := 0; i < 10; i++ {
		env = append(env, fmt.Sprintf("BIG%d=%s", i, strings.Repeat("x", 100<<10)))
	}
	out, _ := os.Create(filepath.Join(t.TempDir(), "out"))
	defer out.Close()
	task, err := in.Spawn(Request{Argv: []string{"/bin/sh", "-c", "echo ${#BIG9}"}, Env: env, FDs: fdsOf(devNull(t), out, out)})
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(task.PidFD)
	exitCode(t, task)
	if b, _ := os.ReadFile(out.Name()); string(b) != "102400\n" {
		t.Errorf("the task saw %q", b)
	}
	huge := append(env, "HUGE="+strings.Repeat("y", maxRequest))
	if _, err := in.Spawn(Request{Argv: []string{"/bin/true"}, Env: huge, FDs: fdsOf(devNull(t))}); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Errorf("a request over the bound: %v", err)
	}
	if _, err := in.Spawn(Request{Argv: []string{"/bin/true"}, Env: []string{"A=\x00"}, FDs: fdsOf(devNull(t))}); err == nil {
		t.Error("a NUL byte in the environment was accepted")
	}
	if err := in.Err(); err != nil {
		t.Errorf("the init ended: %v", err)
	}
}

// TestCredentials: a task with credentials runs as that user with no_new_privs; one without keeps the
// init's user and can gain privileges as usual.
func TestCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: switching users needs root")
	}
	in := startInit(t)
	script := `echo $(id -u) $(grep NoNewPrivs /proc/self/status | tr -d '\t')`
	for _, c := range []struct {
		cred *syscall.Credential
		want string
	}{
		{nil, "0 NoNewPrivs:0"},
		{&syscall.Credential{Uid: 65534, Gid: 65534}, "65534 NoNewPrivs:1"},
	} {
		out, _ := os.Create(filepath.Join(t.TempDir(), "out"))
		task, err := in.Spawn(Request{Argv: []string{"/bin/sh", "-c", script}, Env: testEnv, Dir: "/", FDs: fdsOf(devNull(t), out, out), Credential: c.cred})
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(task.PidFD)
		exitCode(t, task)
		b, _ := os.ReadFile(out.Name())
		out.Close()
		if strings.TrimSpace(string(b)) != c.want {
			t.Errorf("credential %+v: the task printed %q, want %q", c.cred, b, c.want)
		}
	}
}

// TestIdleExit: an init whose namespace stays empty for its idle period says so and exits; spawns
// then fail with ErrIdle (nothing was started); while a process lives in the namespace it stays.
func TestIdleExit(t *testing.T) {
	opts := testOptions(t)
	m, err := Probe(opts)
	if err != nil {
		t.Skipf("skipped: this host gives no PID namespaces: %v", err)
	}
	opts.UserNS, opts.Idle = m.UserNS, 300*time.Millisecond
	in, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	task, _ := spawnSh(t, in, "sleep 1", nil)
	time.Sleep(700 * time.Millisecond) // not readiness: longer than the idle period, with a process in the namespace
	if err := in.Err(); err != nil {
		t.Fatalf("the init ended while its namespace held a process: %v", err)
	}
	exitCode(t, task)
	if !in.Wait(t.Context(), time.Now().Add(30*time.Second)) {
		t.Fatal("the init did not end once its namespace was empty")
	}
	_, err = in.Spawn(Request{Argv: []string{"/bin/true"}, FDs: fdsOf(devNull(t))})
	if !errors.Is(err, ErrIdle) || !errors.Is(err, ErrEnded) {
		t.Errorf("a spawn after the idle exit: %v, want ErrIdle", err)
	}
}

// TestEndIdle: EndIdle does nothing while a process lives in the namespace (an orphan of a task
// that has exited included), and once it is empty ends the init at once, long before its idle period:
// requests then fail with ErrIdle.
func TestEndIdle(t *testing.T) {
	opts := testOptions(t)
	m, err := Probe(opts)
	if err != nil {
		t.Skipf("skipped: this host gives no PID namespaces: %v", err)
	}
	opts.UserNS, opts.Idle = m.UserNS, time.Hour
	in, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	file := filepath.Join(t.TempDir(), "orphan")
	task, _ := spawnSh(t, in, "(exec sleep 1000) & echo $! > "+file+"; exec sleep 1000", nil)
	if in.EndIdle() {
		t.Fatal("EndIdle ended the init while its task ran")
	}
	eventually(t, "the task's child", func() bool {
		b, _ := os.ReadFile(file)
		return strings.HasSuffix(string(b), "\n")
	})
	unix.PidfdSendSignal(task.PidFD, unix.SIGKILL, nil, 0)
	exitCode(t, task)
	if in.EndIdle() {
		t.Fatal("EndIdle ended the init while an orphan lived in its namespace")
	}
	orphans, _ := proc.NewWalker().Descendants(in.Pid())
	if len(orphans) != 1 {
		t.Fatalf("the namespace holds %v, want the orphan", orphans)
	}
	unix.Kill(orphans[0].Pid, unix.SIGKILL)
	// Until the init has reaped the orphan, its zombie is still the init's child.
	eventually(t, "EndIdle to end the init of an empty namespace", in.EndIdle)
	if !in.Wait(t.Context(), time.Now().Add(30*time.Second)) {
		t.Fatal("the init did not end")
	}
	if _, err := in.Spawn(Request{Argv: []string{"/bin/true"}, FDs: fdsOf(devNull(t))}); !errors.Is(err, ErrIdle) {
		t.Errorf("a spawn after EndIdle: %v, want ErrIdle", err)
	}
	if in.EndIdle() {
		t.Error("EndIdle ended an init that had ended")
	}
}

// TestClosedAndNonBlockingDescriptors: a descriptor the request leaves out is closed in the child,
// and one passed keeps its open file's flags (reaper's working-directory pipe must stay non-blocking).
func TestClosedAndNonBlockingDescriptors(t *testing.T) {
	in := startInit(t)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	out, _ := os.Create(filepath.Join(t.TempDir(), "out"))
	defer out.Close()
	fds := append(fdsOf(devNull(t), out, out), -1, p[1])
	task, err := in.Spawn(Request{Argv: []string{"/bin/sh", "-c", `(true >&3) 2>/dev/null || echo closed; grep '^flags' /proc/self/fdinfo/4`},
		Env: testEnv, FDs: fds})
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(task.PidFD)
	exitCode(t, task)
	b, _ := os.ReadFile(out.Name())
	lines := strings.Fields(string(b))
	if len(lines) != 3 || lines[0] != "closed" {
		t.Fatalf("the child printed %q", b)
	}
	flags, _ := strconv.ParseInt(lines[2], 8, 64)
	if flags&unix.O_NONBLOCK == 0 {
		t.Errorf("descriptor 4 lost O_NONBLOCK: flags %o", flags)
	}
}

// TestEmpty: an init is alone in its namespace until it starts a task, and again only once the task
// and what it left (an orphan the init adopted) are gone and reaped; an init that has ended is empty.
func TestEmpty(t *testing.T) {
	in := startInit(t)
	if !in.Empty() {
		t.Error("a new init's namespace is not empty")
	}
	file := filepath.Join(t.TempDir(), "pid")
	task, _ := spawnSh(t, in, `setsid sh -c 'echo $$ > `+file+`.tmp; mv `+file+`.tmp `+file+`; exec sleep 1000' & exec sleep 1000`, nil)
	eventually(t, "the orphan's pid", func() bool { _, err := os.Stat(file); return err == nil })
	if in.Empty() {
		t.Error("the namespace of a running task is empty")
	}
	unix.PidfdSendSignal(task.PidFD, unix.SIGKILL, nil, 0)
	exitCode(t, task)
	// The task is gone; the setsid child, its orphan, is the init's child now.
	if in.Empty() {
		t.Error("the namespace holding an orphan is empty")
	}
	b, _ := os.ReadFile(file)
	nspid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	w := proc.NewWalker()
	self, _ := w.Stat(in.Pid())
	orphans := w.Children(self)
	if len(orphans) != 1 || nspid <= 0 {
		t.Fatalf("the init's children are %v (the orphan is %d in the namespace), want the orphan alone", orphans, nspid)
	}
	h := proc.NewWalker().Verify([]proc.Stat{{Pid: orphans[0], Start: mustStart(t, orphans[0])}})
	if err := proc.SignalAll(h, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proc.CloseAll(h)
	eventually(t, "the namespace empty once the orphan is reaped", in.Empty)
	in.Kill()
	if !in.Wait(t.Context(), time.Now().Add(30*time.Second)) {
		t.Fatal("the init did not end")
	}
	if !in.Empty() {
		t.Error("an init that has ended is not empty")
	}
}

// TestEmptyTold: the init tells with each exit whether it has a child left, so that Empty, once every
// task has exited, need not read /proc: told empty after a task that left nothing, not after one that
// left an orphan.
func TestEmptyTold(t *testing.T) {
	in := startInit(t)
	told := func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.empty
	}
	task, _ := spawnSh(t, in, "exit 0", nil)
	exitCode(t, task)
	if !told() || !in.Empty() {
		t.Errorf("after a task that left nothing: told empty %v, Empty %v", told(), in.Empty())
	}
	task, _ = spawnSh(t, in, `setsid sleep 1000 &`, nil) // forked before the shell exits: the init's orphan
	exitCode(t, task)
	if told() || in.Empty() {
		t.Errorf("after a task that left an orphan: told empty %v, Empty %v", told(), in.Empty())
	}
}

// mustStart returns the start time of a live process.
func mustStart(t testing.TB, pid int) uint64 {
	t.Helper()
	st, ok := proc.NewWalker().Stat(pid)
	if !ok {
		t.Fatalf("pid %d is gone", pid)
	}
	return st.Start
}

// TestSignal: Signal reaches every process of the namespace but the init, whatever its process group
// or session (a setsid one that was stopped included: SIGCONT follows SIGTERM), and nothing outside
// it: a process of the test's, beside the namespace, lives on. A request to an init that does not
// answer ends with its context; one after Close fails with ErrEnded.
func TestSignal(t *testing.T) {
	in := startInit(t)
	outside := exec.Command("/bin/sleep", "1000")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outside.Process.Kill(); outside.Wait() })
	dir := t.TempDir()
	// The setsid child stops itself; each writes "term" to a file of its own once SIGTERM reaches it.
	task, _ := spawnSh(t, in, `setsid sh -c 'trap "echo term > `+dir+`/setsid; exit 0" TERM; kill -STOP $$; while :; do sleep 0.01; done' &
trap "echo term > `+dir+`/main; exit 0" TERM; while :; do sleep 0.01; done`, nil)
	eventually(t, "the setsid child, stopped", func() bool {
		ps, _ := proc.NewWalker().Descendants(in.Pid())
		for _, p := range ps {
			if p.Pid != task.Pid && p.State == 'T' {
				return true
			}
		}
		return false
	})
	files := []string{"main", "setsid"}
	if err := in.Signal(t.Context(), time.Now().Add(30*time.Second), unix.SIGTERM, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, task); code != 0 {
		t.Errorf("the task exited %d, want 0 (its TERM trap)", code)
	}
	for _, f := range files {
		eventually(t, "the "+f+" process to say it got SIGTERM", func() bool {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			return string(b) == "term\n"
		})
	}
	if err := in.Err(); err != nil {
		t.Fatalf("the init ended: %v", err)
	}
	if err := unix.Kill(outside.Process.Pid, 0); err != nil {
		t.Errorf("the process outside the namespace: %v", err)
	}
	if st, ok := proc.NewWalker().Stat(outside.Process.Pid); !ok || st.State == 'Z' {
		t.Errorf("the process outside the namespace was signalled (state %q)", st.State)
	}
	// An init that does not answer (stopped here from outside, as a root process could) holds a
	// request until ctx is done; its late answer, which nobody waits for, is dropped.
	// The request is sent once the init has stopped (SIGSTOP takes effect asynchronously), and ctx
	// is cancelled while it is held.
	if err := unix.Kill(in.Pid(), unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the init, stopped", func() bool {
		st, ok := proc.NewWalker().Stat(in.Pid())
		return ok && st.State == 'T'
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	defer time.AfterFunc(100*time.Millisecond, cancel).Stop()
	if err := in.Signal(ctx, time.Now().Add(30*time.Second), unix.SIGTERM); !errors.Is(err, context.Canceled) {
		t.Errorf("Signal to a stopped init with a cancelled context: %v, want context.Canceled", err)
	}
	unix.Kill(in.Pid(), unix.SIGCONT)
	if err := in.Signal(t.Context(), time.Now().Add(30*time.Second), unix.SIGTERM); err != nil || in.Err() != nil {
		t.Errorf("Signal once the init runs again: %v (the init: %v)", err, in.Err())
	}
	in.Close()
	if err := in.Signal(t.Context(), time.Now().Add(30*time.Second), unix.SIGTERM); !errors.Is(err, ErrEnded) {
		t.Errorf("Signal after Close: %v, want ErrEnded", err)
	}
}
