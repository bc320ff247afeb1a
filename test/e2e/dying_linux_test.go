package e2e

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/testutil"
)

// TestSweepWhileTheKilledServerIsStillDying: an instance whose guard and server were SIGKILLed is
// swept up by the next start even while the server's last thread is still on its way out. The test
// holds one of the server's threads in its exit (a tracer's stop at PTRACE_EVENT_EXIT, which the
// kernel makes before the thread releases anything), so that the server's main thread is a zombie
// with threads left, as it is for a moment after any SIGKILL on a loaded machine: a look at its stat
// alone takes it for alive. The restart must take it for dead (a SIGKILL is pending for it) and
// remove its slice and state, while the thread is still held.
func TestSweepWhileTheKilledServerIsStillDying(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: tracing reaper's server needs root")
	}
	p := place(t, "")
	args := append(p.args(), "--pid-namespace", "off")
	// Should the restart not sweep up (the test fails), the test does, once the thread is let go.
	t.Cleanup(func() { runOnce(t, nil, append([]string{"sweep"}, p.args()...)...) })
	dead := startHTTP(t, args...)
	bash(t, dead.connect(t), "sleep 1000 & echo started") // its slice holds a process
	guard := dead.cmd.Process.Pid
	server := serverOf(t, guard)

	// Every ptrace request comes from the thread that attached.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	held := 0
	tids, _ := os.ReadDir("/proc/" + strconv.Itoa(server) + "/task")
	for _, e := range tids {
		if tid, _ := strconv.Atoi(e.Name()); tid != server && tid > 0 {
			held = tid
			break
		}
	}
	if held == 0 {
		t.Fatalf("the server %d has no thread but its main one", server)
	}
	if _, _, e := unix.RawSyscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(held), 0, unix.PTRACE_O_TRACEEXIT, 0, 0); e != 0 {
		t.Skipf("skipped: PTRACE_SEIZE of the server's thread %d: %v", held, e)
	}
	released := false
	release := func() {
		if !released {
			released = true
			unix.PtraceDetach(held)
		}
	}
	defer release()

	for _, pid := range []int{guard, server} {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range []int{server, guard} {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-dead.done
	testutil.Eventually(t, "the server's thread held in its exit", func() bool {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(held, &ws, unix.WALL|unix.WNOHANG, nil)
		return err == nil && pid == held && ws.Stopped() && ws.TrapCause() == unix.PTRACE_EVENT_EXIT
	})
	// What the sweep's look at the server sees: not dead by its stat (a zombie with a thread left, or
	// a main thread not yet through its exit).
	if st, ok := proc.NewWalker().Stat(server); !ok || st.Dead() {
		t.Fatalf("the server reads dead already (%+v, %v): the test holds nothing", st, ok)
	}

	restarted := startHTTP(t, args...)
	name := "r" + strconv.Itoa(server) + "-*" // the dead instance's (instance.Name)
	testutil.Eventually(t, "the dying instance's slice and state to go while its thread is held", func() bool {
		state, _ := filepath.Glob(filepath.Join(p.stateDir, "*"+name))
		slice, _ := filepath.Glob(filepath.Join(p.root, name))
		return len(state) == 0 && (p.root == "" || len(slice) == 0)
	})
	if !restarted.stderr.Await("swept up after a dead instance") {
		t.Errorf("the restart did not log the sweep:\n%s", restarted.stderr)
	}
	release()
	testutil.Eventually(t, "the server gone once its thread is let go", func() bool {
		st, ok := proc.NewWalker().Stat(server)
		return !ok || st.Dead()
	})
}
