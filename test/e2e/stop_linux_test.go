package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestStopClaimsNothingOfReapersOwn: at a stop, the kill of whatever no session claimed finds none of
// reaper's own processes (its sessions' inits, a ready shell, the probe's init): the line "killed
// processes no session claimed" would read like a leak to an operator.
func TestStopClaimsNothingOfReapersOwn(t *testing.T) {
	eachModeAndNamespace(t, func(t *testing.T, p placement, ns string) {
		r := startHTTP(t, append(p.args(), "--pid-namespace", ns)...)
		busy := r.connect(t)
		bash(t, busy, "echo one")
		bash(t, busy, "echo two") // from the second command on, a session keeps a shell ready
		bash(t, busy, "sleep 1000", "run_in_background", true)
		bash(t, r.connect(t), "echo idle")
		r.stop(t)
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			t.Fatal("reaper did not exit")
		}
		if !strings.Contains(r.stderr.String(), "session ended") {
			t.Fatalf("no session ended before the stop:\n%s", r.stderr)
		}
		if log := r.stderr.String(); strings.Contains(log, "no session claimed") {
			t.Errorf("the stop killed processes of reaper's own as unclaimed:\n%s", log)
		}
	})
}
