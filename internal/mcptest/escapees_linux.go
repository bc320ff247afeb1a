package mcptest

import (
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
	r := Bash(t, c, `setsid sh -c 'echo $$; exec sleep 1000' & sh -c 'sh -c "echo \$\$; exec sleep 1000" &'; echo $$; exec sleep 1000`, "run_in_background", true)
	if r.TaskID == "" {
		t.Fatalf("no task id: %+v", r)
	}
	var out string
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(out, "\n") < 3 {
		_, o := TaskOutput(t, c, r.TaskID, false)
		out += o
		if time.Now().After(deadline) {
			t.Fatalf("the task printed %q", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return testutil.PidsIn(t, out)
}
