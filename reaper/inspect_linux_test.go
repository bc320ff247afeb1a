package reaper

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/inspect"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/testutil"
)

// TestSessionRecordAndInspect checks the record a session keeps for `reaper ps` (readable by its
// owner only, commands cut short, no environment) and that Inspect finds the session's process.
func TestSessionRecordAndInspect(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{StateDir: t.TempDir(), Env: []string{"SECRET_TOKEN=hunter2", "PATH=" + os.Getenv("PATH")}})
			s := newTestSession(t, r, SessionOptions{})
			long := "exec sleep 1000 # " + strings.Repeat("x", 400)
			ti, err := s.Start(long, "")
			if err != nil {
				t.Fatal(err)
			}
			file := s.dir.Join("session.json")
			fi, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v, want 0600", file, fi.Mode().Perm())
			}
			b, _ := os.ReadFile(file)
			if !strings.Contains(string(b), ti.ID) || strings.Contains(string(b), "hunter2") || len(b) > 1024 {
				t.Errorf("record %s", b)
			}

			opts := inspect.Options{StateDir: filepath.Dir(r.Instance().StateDir), NoCgroup: mode == ContainProcess}
			if mode == ContainCgroup {
				opts.Cgroup.Root = filepath.Dir(r.Containment().Slice)
			}
			var in inspect.Inspection
			testutil.Eventually(t, "the task's process listed as sleep", func() bool {
				in, err = inspect.Run(opts)
				if err != nil {
					t.Fatal(err)
				}
				if len(in.Instances) != 1 || len(in.Instances[0].Sessions) != 1 {
					t.Fatalf("inspection: %+v", in)
				}
				ps := in.Instances[0].Sessions[0].Processes
				return len(ps) == 1 && strings.HasPrefix(ps[0].Command, "sleep 1000")
			})
			sv := in.Instances[0].Sessions[0]
			if sv.ID != s.ID() || len(sv.Tasks) != 1 || sv.Tasks[0].ID != ti.ID || len(sv.Tasks[0].Command) != instance.MaxRecordedCommand {
				t.Errorf("session: %+v", sv)
			}
			if p := sv.Processes[0]; p.Task != ti.ID || p.State == "" || mode == ContainCgroup && !strings.HasSuffix(p.Cgroup, "/"+s.name+"/l-1") {
				t.Errorf("process: %+v", p)
			}
		})
	}
}

// TestForegroundRecordedWhenItMatters: a foreground command that ends at once with nothing left is
// not written into the session's record on the way back to its caller; one that runs longer than
// recordDelay, or leaves a process behind, is listed before its result returns.
func TestForegroundRecordedWhenItMatters(t *testing.T) {
	r := newTestReaper(t, ContainProcess, Options{StateDir: t.TempDir()})
	s := newTestSession(t, r, SessionOptions{})
	file := s.dir.Join("session.json")
	listed := func(command string) bool {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(b), command)
	}
	run(t, s, "echo quick")
	if listed("echo quick") {
		t.Error("a command that ended at once was written into the record on its way back")
	}
	run(t, s, "sleep 0.2; echo slow")
	if !listed("echo slow") {
		t.Error("a command that ran longer than recordDelay is not in the record")
	}
	if res := run(t, s, "sleep 1000 & echo left"); res.Leftover == 0 || !listed("echo left") {
		t.Errorf("a command that left %d processes is not in the record", res.Leftover)
	}
}
