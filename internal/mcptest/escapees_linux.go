package mcptest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// Escapees starts, through c, a background task with a setsid escapee and a double-forked child, and
// returns the task's three processes: its shell and those two, each of which a session's end must
// kill though neither is in the task's process group nor, once re-parented, its process tree.
func Escapees(t testing.TB, c Caller) []testutil.Proc {
	t.Helper()
	r := Bash(t, c, `setsid sh -c 'echo $$; exec sleep 1000' & sh -c 'sh -c "echo \$\$; exec sleep 1000" &'; echo $$; `+testutil.ShowNS+`; exec sleep 1000`, "run_in_background", true)
	if r.TaskID == "" {
		t.Fatalf("no task id: %+v", r)
	}
	var out string
	deadline := time.Now().Add(testutil.Slow(30 * time.Second))
	for strings.Count(out, "\n") < 4 { // three pids and their PID namespace
		_, o := TaskOutput(t, c, r.TaskID, false)
		out += o
		if time.Now().After(deadline) {
			t.Fatalf("the task printed %q", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return testutil.PidsIn(t, out)
}

// Leftovers runs, through c, a foreground command that leaves a setsid escapee, a double-forked
// child and a nohup child running and returns as soon as all three have started; it returns them.
// The command itself has exited: they are what its end left in the session.
func Leftovers(t testing.TB, c Caller) []testutil.Proc {
	t.Helper()
	f := filepath.Join(t.TempDir(), "pids")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	script := strings.NewReplacer("{F}", f).Replace(`setsid sh -c 'echo $$ >> {F}; exec sleep 1000' &
(sh -c 'echo $$ >> {F}; exec sleep 1000' &)
nohup sh -c 'echo $$ >> {F}; exec sleep 1000' >/dev/null 2>&1 &
while [ "$(wc -l < {F})" -lt 3 ]; do sleep 0.01; done
cat {F}; ` + testutil.ShowNS)
	r := Bash(t, c, script, "timeout", 60000)
	if r.ExitCode == nil || *r.ExitCode != 0 || strings.Count(r.Output, "\n") != 4 {
		t.Fatalf("the foreground command: %+v", r)
	}
	return testutil.PidsIn(t, r.Output)
}
