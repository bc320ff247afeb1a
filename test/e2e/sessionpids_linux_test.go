package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/mcptest"
)

// TestPidsAsTheSessionSeesThem: with PID namespaces, every pid reaper gives an agent or a CI log is
// the one the session's own commands see: task_list's leftovers are the pids $! printed, and a later
// command's kill reaches them; reaper run names a leftover by the pid its job printed (and the host's
// beside it), in its log line and its report.
func TestPidsAsTheSessionSeesThem(t *testing.T) {
	needPIDNamespaces(t)
	t.Run("task_list", func(t *testing.T) {
		r := startHTTP(t, append(cgroupArgs(t), "--pid-namespace", "on")...)
		cs := r.connect(t)
		printed := strings.TrimSpace(bash(t, cs, "setsid sleep 9191 & echo $!").Output)
		var list struct {
			Leftovers []struct{ Pids []int } `json:"leftovers"`
		}
		mcptest.CallInto(t, cs, "task_list", map[string]any{}, &list)
		var pids []int
		for _, l := range list.Leftovers {
			pids = append(pids, l.Pids...)
		}
		pid, _ := strconv.Atoi(printed)
		if len(pids) != 1 || pids[0] != pid {
			t.Fatalf("task_list's leftovers %v, want the pid the command printed, %s", pids, printed)
		}
		if res := bash(t, cs, "kill -0 "+printed+" && echo reached"); res.Output != "reached\n" {
			t.Errorf("kill -0 %s in the session: %q", printed, res.Output)
		}
		if res := bash(t, cs, "kill "+printed+"; sleep 0.2; kill -0 "+printed+" 2>/dev/null || echo gone"); res.Output != "gone\n" {
			t.Errorf("kill %s in the session: %q", printed, res.Output)
		}
	})
	t.Run("reaper run", func(t *testing.T) {
		report := filepath.Join(t.TempDir(), "report.json")
		out, code := runOnce(t, nil, append(append([]string{"run", "--grace", "0", "--report", report, "--pid-namespace", "on"}, cgroupArgs(t)...),
			"--", "sh", "-c", "setsid sleep 1000 & echo started $!")...)
		if code != 0 {
			t.Fatalf("reaper run: exit %d\n%s", code, out)
		}
		m := regexp.MustCompile(`started (\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("the job printed no pid:\n%s", out)
		}
		if want := "(pid " + m[1] + ", host pid "; !strings.Contains(out, want) {
			t.Errorf("reaper run's line does not name the leftover as the job saw it (%q):\n%s", want, out)
		}
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Leftovers []struct {
				Pid     int `json:"pid"`
				HostPid int `json:"host_pid"`
			} `json:"leftovers"`
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(m[1])
		if !slices.ContainsFunc(rep.Leftovers, func(l struct {
			Pid     int `json:"pid"`
			HostPid int `json:"host_pid"`
		}) bool {
			return l.Pid == pid && l.HostPid > 0 && l.HostPid != pid
		}) {
			t.Errorf("the report's leftovers %s do not name the job's pid %d beside a host pid", b, pid)
		}
	})
}
