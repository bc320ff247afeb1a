package job

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/cgreaper/reaper/reaper"
)

// TestMain lets this test binary be the init of a session's PID namespace, should a Reaper it makes
// have one.
func TestMain(m *testing.M) { testutil.Main(m, nil) }

// config is a job of argv in process containment without a PID namespace (the pids it prints are this
// process's), with state in a directory of its own.
func config(t *testing.T, argv ...string) Config {
	return Config{
		Argv: argv,
		Options: reaper.Options{
			Containment: reaper.ContainProcess, PIDNamespace: reaper.PIDNamespaceOff, StateDir: t.TempDir(),
			WorkDir: t.TempDir(), NoSweep: true, Grace: new(100 * time.Millisecond),
		},
		Stderr: io.Discard,
	}
}

// TestExitStatuses: the job's own status, and reaper run's for a command not found, not executable,
// timed out, or successful but leaving processes with FailOnLeftovers; what it left is named and dead.
func TestExitStatuses(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	pidFile := filepath.Join(dir, "left")
	for _, tc := range []struct {
		name string
		c    func(*testing.T) Config
		want int
	}{
		{"status", func(t *testing.T) Config { return config(t, "sh", "-c", "exit 3") }, 3},
		{"signal", func(t *testing.T) Config { return config(t, "sh", "-c", "kill -TERM $$") }, 128 + int(syscall.SIGTERM)},
		{"not found", func(t *testing.T) Config { return config(t, "no-such-command-here") }, ExitNotFound},
		{"not executable", func(t *testing.T) Config { return config(t, noexec) }, ExitNotExecutable},
		{"timeout", func(t *testing.T) Config {
			c := config(t, "sleep", "1000")
			c.Timeout = 100 * time.Millisecond
			return c
		}, ExitTimedOut},
		{"leftovers", func(t *testing.T) Config {
			// The job ends once its child is sleep, not before its exec: a leftover is named as it
			// is when the job's end finds it, and a fork not yet exec'd is still "sh".
			c := config(t, "sh", "-c", `sleep 1000 & until read c < /proc/$!/comm && [ "$c" = sleep ]; do :; done; echo $! > `+pidFile)
			c.FailOnLeftovers = true
			c.Timeout = time.Minute // the wait for the exec, bounded: a job stuck there ends timed out
			return c
		}, ExitLeftovers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Run(tc.c(t))
			if rep.ExitStatus != tc.want {
				t.Fatalf("exit %d, want %d (report %+v)", rep.ExitStatus, tc.want, rep)
			}
			if tc.name != "leftovers" {
				return
			}
			if rep.ExitCode == nil || *rep.ExitCode != 0 {
				t.Errorf("the command's exit code %v, want 0: reaper run's status (%d) is not the command's", rep.ExitCode, rep.ExitStatus)
			}
			b, _ := os.ReadFile(pidFile)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if len(rep.Leftovers) != 1 || rep.Leftovers[0].Pid != pid || rep.Leftovers[0].Comm != "sleep" {
				t.Errorf("leftovers %v, want the sleep, pid %d", rep.Leftovers, pid)
			}
			if st := proc.Describe(pid).State; st != "?" && st != "Z" {
				t.Errorf("the leftover %d is still there: %s", pid, st)
			}
		})
	}
}
