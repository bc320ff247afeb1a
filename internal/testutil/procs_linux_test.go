package testutil

import (
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/cgreaper/reaper/internal/proc"
)

func TestKillIn(t *testing.T) {
	for _, c := range []struct {
		status string
		want   bool
	}{
		{"Name:\tsleep\nState:\tR (running)\nSigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n", true},
		{"SigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n", true},
		{"SigPnd:\t0000000000000200\nShdPnd:\t0000000000004000\n", false}, // SIGUSR1, SIGTERM
		{"SigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\nSigBlk:\t0000000000000100\n", false},
		{"Name:\tx\n", false},
	} {
		if got := killIn(c.status); got != c.want {
			t.Errorf("killIn(%q) = %v, want %v", c.status, got, c.want)
		}
	}
	if KillPending(os.Getpid()) {
		t.Error("this process has SIGKILL pending")
	}
	if v, ok := StatusField(os.Getpid(), "Pid"); !ok || v != strconv.Itoa(os.Getpid()) {
		t.Errorf("StatusField(self, Pid) = %q, %v", v, ok)
	}
	if _, ok := StatusField(os.Getpid(), "NoSuchField"); ok {
		t.Error("StatusField found a field that is not there")
	}
}

func TestRunning(t *testing.T) {
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p, ok := ProcOf(cmd.Process.Pid)
	if !ok || !Running(p) {
		t.Fatalf("sleep %d does not run: %+v", cmd.Process.Pid, proc.Describe(cmd.Process.Pid))
	}
	if Running(Proc{Pid: p.Pid, Start: p.Start + 1}) {
		t.Error("a process with another start time counts as running")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if Running(p) {
		t.Error("a reaped process counts as running")
	}
}
