package guard

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/cgreaper/reaper/internal/reap"
	"github.com/cgreaper/reaper/internal/testutil"
)

// start starts script under /bin/sh as a guard's server, and kills it at the end of the test if it
// is still there (the test failed before Wait).
func start(t *testing.T, script string) *Server {
	t.Helper()
	s, err := Start(Options{Argv: []string{"sh", "-c", script}, Path: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Signal(syscall.SIGKILL) })
	return s
}

func wait(t *testing.T, s *Server) Ended {
	t.Helper()
	e, err := s.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestEnded: Wait reports the server's status and its announcements in order, and Clean holds only
// for a server that exited by itself with guard.Clean as its last word.
func TestEnded(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		announced    []string
		status       int // exit status, or -n for death by signal n
		clean        bool
	}{
		{"clean end", `echo '{"name":"r1-2"}' >&3; echo clean >&3; exit 3`, []string{`{"name":"r1-2"}`, Clean}, 3, true},
		{"no last word", `echo '{"name":"r1-2"}' >&3; exit 0`, []string{`{"name":"r1-2"}`}, 0, false},
		{"a record after it", `echo clean >&3; echo '{}' >&3; exit 0`, []string{Clean, "{}"}, 0, false},
		{"killed after it", `echo clean >&3; kill -9 $$`, []string{Clean}, -9, false},
		{"nothing at all", `exec 3>&-; exit 1`, nil, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wait(t, start(t, tc.script))
			if !slices.Equal(e.Announced, tc.announced) {
				t.Errorf("announced %q, want %q", e.Announced, tc.announced)
			}
			status := e.Status.ExitStatus()
			if e.Status.Signaled() {
				status = -int(e.Status.Signal())
			}
			if status != tc.status || e.Clean() != tc.clean {
				t.Errorf("status %d, clean %v; want %d, %v", status, e.Clean(), tc.status, tc.clean)
			}
		})
	}
}

// TestSignal: a signal reaches the server until Wait has reaped it; after, Signal does nothing
// (its pid may name another process by then).
func TestSignal(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	// The trap reaps the sleep it interrupts: nothing is left to come to this process.
	s := start(t, `trap 'kill $!; wait $!; exit 42' TERM; : > `+ready+`; while :; do sleep 1 & wait $!; done`)
	testutil.Eventually(t, "the server traps TERM", func() bool { _, err := os.Stat(ready); return err == nil })
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, s); e.Status.ExitStatus() != 42 {
		t.Errorf("status %v, want exit 42 from the trap", e.Status)
	}
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("Signal after Wait: %v", err)
	}
}

// TestHasChildren: a process the server left comes to this process, its subreaper, and
// reap.HasChildren sees it (package early then leaves the clean-up to main); once it is reaped, none.
func TestHasChildren(t *testing.T) {
	e := wait(t, start(t, `sleep 60 & echo $! >&3; echo clean >&3; exit 0`))
	if !e.Clean() || len(e.Announced) != 2 {
		t.Fatalf("ended %+v", e)
	}
	pid, err := strconv.Atoi(e.Announced[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // if the test fails before it is reaped
	if !reap.HasChildren() {
		t.Errorf("the server's orphan %d did not come to this process", pid)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatalf("reap %d: %v", pid, err)
	}
	if reap.HasChildren() {
		t.Error("a child is left after the orphan was reaped")
	}
}
