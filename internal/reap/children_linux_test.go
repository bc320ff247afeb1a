package reap

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestChildrenClose: Close returns while a child is still running (it wakes the loop out of wait4
// with a process of its own), and starts no process when nothing is left to wait for.
func TestChildrenClose(t *testing.T) {
	forkExec := func(argv ...string) func() (int, error) {
		return func() (int, error) { return syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{}) }
	}
	closed := func(c *Children, argv ...string) bool {
		done := make(chan struct{})
		go func() { c.Close(argv); close(done) }()
		select {
		case <-done:
			return true
		case <-time.After(30 * time.Second):
			return false
		}
	}

	t.Run("a child left", func(t *testing.T) {
		c := NewChildren()
		pid, _, err := c.Start(forkExec("/bin/sleep", "1000"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			unix.Kill(pid, unix.SIGKILL)
			reapLeft(t, pid) // the loop has stopped: reap it here
		})
		if !closed(c, "/bin/true") {
			t.Fatal("Close did not return within 30 s while a child was running")
		}
		if c.wake == 0 {
			t.Fatal("Close started no process to wake the loop, yet a child was running")
		}
		// The loop may have stopped before it reaped the process that woke it: reap it here (ECHILD
		// if the loop did), so that the next subtest starts with no child.
		reapLeft(t, c.wake)
	})

	t.Run("none left", func(t *testing.T) {
		if HasChildren() {
			t.Skip("skipped: this test process has children of earlier tests, so close must wake its loop")
		}
		c := NewChildren()
		_, exited, err := c.Start(forkExec("/bin/true"))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Fatal("the loop did not report /bin/true's exit within 30 s")
		}
		if !closed(c, "/bin/true") {
			t.Fatal("Close did not return within 30 s")
		}
		if c.wake != 0 {
			t.Errorf("Close started process %d though no child was left", c.wake)
		}
	})
}

// TestNotReapedDuringStart: a child that exits at once is not reaped while Start's fork runs, so that
// its pid, still its own, can be read in /proc (once, the loop reaped it in wait4 before taking the
// lock, and a task's start time read as 0).
func TestNotReapedDuringStart(t *testing.T) {
	c := NewChildren()
	defer c.Close([]string{"/bin/true"})
	for i := 0; i < 20; i++ {
		var stat []byte
		_, exited, err := c.Start(func() (int, error) {
			pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
			if err == nil {
				time.Sleep(20 * time.Millisecond) // long enough for true to have exited
				stat, _ = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			}
			return pid, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(stat) == 0 {
			t.Fatalf("round %d: the child was reaped while Start's fork still ran", i)
		}
		if st := <-exited; st.Code() != 0 {
			t.Fatalf("true exited %d", st.Code())
		}
	}
}

// TestExited: a child that has exited is told so, and stays a zombie for whoever reaps it; a live
// child, a process that is not a child and a child already reaped are not told as exited. Childless
// is false while a child lives, and for any process but this one.
func TestExited(t *testing.T) {
	sleeper, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "1000"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Kill(sleeper, unix.SIGKILL)
		reapLeft(t, sleeper)
	})
	done, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reapLeft(t, done) }) // in case the test fails before it reaps it
	deadline := time.Now().Add(30 * time.Second)
	for !Exited(done) {
		if time.Now().After(deadline) {
			t.Fatalf("true (pid %d) not told as exited within 30 s", done)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if Exited(sleeper) {
		t.Errorf("the live sleeper (pid %d) told as exited", sleeper)
	}
	if Exited(os.Getppid()) {
		t.Errorf("this process's parent (pid %d), not a child, told as exited", os.Getppid())
	}
	if Childless(os.Getpid()) {
		t.Errorf("this process told childless while its sleeper (pid %d) lives", sleeper)
	}
	if Childless(os.Getppid()) {
		t.Errorf("another process (pid %d) told childless: only this process can tell", os.Getppid())
	}
	if err := reapWithin(done, 10*time.Second); err != nil {
		t.Fatalf("reaping true (pid %d) after Exited: %v (Exited must not reap)", done, err)
	}
	if Exited(done) {
		t.Errorf("true (pid %d) told as exited after it was reaped", done)
	}
}

// reapWithin reaps the child pid once it has exited, waiting for that until d has passed; it returns
// wait4's error (ECHILD where pid is not, or no longer, a child of this process), or an error saying
// it is still running.
func reapWithin(pid int, d time.Duration) error {
	for deadline := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err != nil || got == pid {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("child %d still running after %v", pid, d)
		}
	}
}

// reapLeft reaps a child a test leaves behind, if it is still this process's child, and fails the
// test if it has not ended within 10 s.
func reapLeft(t testing.TB, pid int) {
	t.Helper()
	if err := reapWithin(pid, 10*time.Second); err != nil && !errors.Is(err, unix.ECHILD) {
		t.Error(err)
	}
}
