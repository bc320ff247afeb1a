package guard

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
)

// run runs a guard whose server is script under /bin/sh, and returns what it saw.
func run(t *testing.T, script string, signals ...os.Signal) Result {
	t.Helper()
	res, err := Run(Options{Argv: []string{"sh", "-c", script}, Path: "/bin/sh", Signals: signals})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestEnded: Run reports the server's status and its announcements in order; only a server that
// exited by itself with Clean as its last word is not cleaned up after.
func TestEnded(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		announced    []string
		code         int
		signal       syscall.Signal
		clean        bool
	}{
		{"clean end", `echo '{"name":"r1-2"}' >&3; echo clean >&3; exit 3`, []string{`{"name":"r1-2"}`, Clean}, 3, 0, true},
		{"no last word", `echo '{"name":"r1-2"}' >&3; exit 0`, []string{`{"name":"r1-2"}`}, 0, 0, false},
		{"a record after it", `echo clean >&3; echo '{}' >&3; exit 0`, []string{Clean, "{}"}, 0, 0, false},
		{"killed after it", `echo clean >&3; kill -9 $$`, []string{Clean}, 128 + 9, syscall.SIGKILL, false},
		{"nothing at all", `exec 3>&-; exit 1`, nil, 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, tc.script)
			if !slices.Equal(res.Announced, tc.announced) {
				t.Errorf("announced %q, want %q", res.Announced, tc.announced)
			}
			if res.Code != tc.code || res.Signal != tc.signal || res.Clean != tc.clean {
				t.Errorf("code %d, signal %v, clean %v; want %d, %v, %v", res.Code, res.Signal, res.Clean, tc.code, tc.signal, tc.clean)
			}
			if res.Err != nil || len(res.Killed) > 0 {
				t.Errorf("cleaned up after a server that left nothing: killed %v, error %v", res.Killed, res.Err)
			}
		})
	}
}

// TestForwards: a signal this process receives reaches the server, whose status is the guard's.
func TestForwards(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				syscall.Kill(os.Getpid(), syscall.SIGUSR1)
				return
			}
		}
	}()
	// The trap reaps the sleep it interrupts: nothing is left to come to this process. Without the
	// signal the server gives up after about 30 s.
	res := run(t, `trap 'kill $!; wait $!; echo clean >&3; exit 42' USR1; : > `+ready+
		`; for i in $(seq 300); do sleep 0.1 & wait $!; done; exit 1`, syscall.SIGUSR1)
	<-sent
	if res.Code != 42 || !res.Clean || res.Forwarded != nil {
		t.Errorf("code %d, clean %v, forwarded %v; want exit 42 from the trap, clean", res.Code, res.Clean, res.Forwarded)
	}
}

// TestKillsWhatWasLeft: a process the server left comes to the guard, its subreaper, even after a
// clean last word: the guard kills it, reaps it, and says so. The orphan holds the announcement pipe
// too (sh passes descriptor 3 on): the guard reads what the server wrote without waiting for it.
func TestKillsWhatWasLeft(t *testing.T) {
	res := run(t, `sleep 60 & echo $! >&3; echo clean >&3; exit 0`)
	if len(res.Announced) != 2 || res.Code != 0 {
		t.Fatalf("result %+v", res)
	}
	pid, err := strconv.Atoi(res.Announced[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // if the guard missed it
	if res.Clean || res.Err != nil {
		t.Errorf("clean %v, error %v: want a clean-up without error", res.Clean, res.Err)
	}
	if !slices.ContainsFunc(res.Killed, func(p proc.Proc) bool { return p.Pid == pid }) {
		t.Errorf("killed %v, want the server's orphan %d among them", res.Killed, pid)
	}
	var ws syscall.WaitStatus
	if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != syscall.ECHILD {
		t.Errorf("wait4(%d) = %d, %v: want it reaped by the guard (ECHILD)", pid, got, err)
	}
}
