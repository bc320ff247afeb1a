package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// inspection is what `reaper ps --json` prints, as far as the tests read it.
type inspection struct {
	Instances []struct {
		Name        string `json:"name"`
		Pid         int    `json:"pid"`
		Alive       bool   `json:"alive"`
		State       string `json:"process_state"`
		Containment string `json:"containment"`
		PIDNS       bool   `json:"pid_namespace"`
		Sessions    []struct {
			Name  string `json:"name"`
			ID    string `json:"id"`
			Init  int    `json:"init_pid"`
			Tasks []struct {
				ID      string `json:"id"`
				Command string `json:"command"`
			} `json:"tasks"`
			Processes []struct {
				Pid     int     `json:"pid"`
				Command string  `json:"command"`
				State   string  `json:"state"`
				Cgroup  string  `json:"cgroup"`
				Age     float64 `json:"age_seconds"`
				Task    string  `json:"task"`
				Outside bool    `json:"outside_slice"`
			} `json:"processes"`
			Usage      *psUsage `json:"usage"`
			NotCounted string   `json:"usage_not_counted"`
		} `json:"sessions"`
	} `json:"instances"`
}

// psUsage is what `reaper ps --json` says a session used and the limits it hit; a figure no
// controller counts is absent (nil).
type psUsage struct {
	CPUSeconds       float64  `json:"cpu_seconds"`
	MemoryBytes      *int64   `json:"memory_bytes"`
	MemoryPeakBytes  *int64   `json:"memory_peak_bytes"`
	MemoryMaxBytes   *int64   `json:"memory_max_bytes"`
	OOMKills         *int64   `json:"oom_kills"`
	Pids             *int64   `json:"pids"`
	PidsMax          *int64   `json:"pids_max"`
	ForksRefused     *int64   `json:"forks_refused"`
	CPUMax           *float64 `json:"cpu_max"`
	ThrottledPeriods *int64   `json:"cpu_throttled_periods"`
	ThrottledSeconds *float64 `json:"cpu_throttled_seconds"`
}

// reaperPs runs `reaper ps --json` with args and decodes what it prints.
func reaperPs(t testing.TB, args ...string) inspection {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"ps", "--json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("reaper ps: %v\n%s", err, out)
	}
	var in inspection
	if err := json.Unmarshal(out, &in); err != nil {
		t.Fatalf("reaper ps --json: %v\n%s", err, out)
	}
	return in
}

// TestPsWhileTheServerIsStopped lists a running session with `reaper ps --json` while the server is
// stopped by SIGSTOP (its API unreachable): the instance shows as stopped, with the session, its
// background task and its processes, the escaped one included.
func TestPsWhileTheServerIsStopped(t *testing.T) {
	for _, mode := range []string{"cgroup", "process"} {
		t.Run(mode, func(t *testing.T) {
			pl := place(t, mode)
			p := startHTTP(t, pl.args()...)
			cs := p.connect(t)
			ps := escapees(t, cs) // a background task: its shell, a setsid escapee, a double-forked child
			server := serverOf(t, p.cmd.Process.Pid)
			if err := syscall.Kill(server, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			defer syscall.Kill(server, syscall.SIGCONT)
			testutil.Eventually(t, "the server stopped", func() bool {
				in := reaperPs(t, pl.args()...)
				return len(in.Instances) == 1 && in.Instances[0].State == "T"
			})

			in := reaperPs(t, pl.args()...)
			iv := in.Instances[0]
			if !iv.Alive || iv.Pid != server || iv.Containment != mode || len(iv.Sessions) != 1 {
				t.Fatalf("instance: %+v", iv)
			}
			sv := iv.Sessions[0]
			// The session's init is named apart from its processes (it is reaper's), where there is one.
			if iv.PIDNS != (sv.Init != 0) || sv.Init != 0 && parentOf(sv.Init) != server {
				t.Errorf("pid namespace %v, the session's init %d (parent %d, the server is %d)", iv.PIDNS, sv.Init, parentOf(sv.Init), server)
			}
			if !strings.HasPrefix(sv.ID, "mcp-") || len(sv.Tasks) != 1 || !strings.Contains(sv.Tasks[0].Command, "exec sleep 1000") {
				t.Errorf("session: %+v", sv)
			}
			listed := map[int]bool{}
			for _, pr := range sv.Processes {
				listed[pr.Pid] = true
				if pr.Task != sv.Tasks[0].ID || pr.State == "" || pr.Command == "" || pr.Age <= 0 {
					t.Errorf("process %+v", pr)
				}
				if mode == "cgroup" && !strings.Contains(pr.Cgroup, "/"+iv.Name+"/"+sv.Name+"/") {
					t.Errorf("process %d in cgroup %s, not in the session's slice", pr.Pid, pr.Cgroup)
				}
			}
			for _, pr := range ps {
				if !listed[pr.Pid] {
					t.Errorf("process %d of the task is not listed: %+v", pr.Pid, sv.Processes)
				}
			}
			// What the session used: its slice's CPU time in cgroup containment (no limit is set, so
			// no controller counts more); in process containment nothing counts it, and ps says so.
			usage := "usage: cpu "
			switch {
			case mode == "cgroup" && (sv.Usage == nil || sv.Usage.CPUSeconds <= 0 || sv.Usage.MemoryBytes != nil || sv.NotCounted != ""):
				t.Errorf("cgroup containment without limits: usage %+v (not counted: %q), want CPU time alone", sv.Usage, sv.NotCounted)
			case mode == "process" && (sv.Usage != nil || sv.NotCounted != "process containment"):
				t.Errorf("process containment: usage %+v (not counted: %q), want none, saying why", sv.Usage, sv.NotCounted)
			case mode == "process":
				usage = "usage not counted: process containment"
			}

			out, err := exec.Command(bin, append([]string{"ps"}, pl.args()...)...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "stopped") || !strings.Contains(string(out), "sleep 1000") ||
				!strings.Contains(string(out), usage) || iv.PIDNS && !strings.Contains(string(out), "pid namespace per session") {
				t.Errorf("reaper ps: %v\n%s", err, out)
			}
			t.Logf("reaper ps:\n%s", out)
		})
	}
}

// TestJSONListsNeverNull: `reaper sweep --dry-run --json` and `reaper ps --json` with nothing to
// report print their lists as [], not null.
func TestJSONListsNeverNull(t *testing.T) {
	p := place(t, "process")
	for _, args := range [][]string{{"sweep", "--dry-run", "--json"}, {"ps", "--json"}} {
		out, code := runOnce(t, nil, append(args, p.args()...)...)
		if code != 0 {
			t.Fatalf("reaper %v: exit %d\n%s", args, code, out)
		}
		var top map[string]any
		if err := json.Unmarshal([]byte(out), &top); err != nil {
			t.Fatalf("reaper %v printed %s: %v", args, out, err)
		}
		for _, list := range map[string][]string{"sweep": {"dead", "live"}, "ps": {"instances"}}[args[0]] {
			if v, ok := top[list].([]any); !ok || len(v) != 0 {
				t.Errorf("reaper %v: %q is %v, want []\n%s", args, list, top[list], out)
			}
		}
	}
}

// TestSweepRemovesTheRootItMade: an instance killed with its guard leaves its slice below a
// --cgroup-root that it made, parents included; `reaper sweep` with that root kills what the slice
// holds and removes the slice, and the root and parents the dead instance made (its record names
// them). A root that was there before the instance is the operator's, and stays.
func TestSweepRemovesTheRootItMade(t *testing.T) {
	for _, existed := range []bool{false, true} {
		t.Run(map[bool]string{false: "made by reaper", true: "the operator's"}[existed], func(t *testing.T) {
			pl := place(t, "cgroup")
			root := filepath.Join(pl.root, "sub")
			t.Cleanup(func() { os.Remove(root) }) // before place's check of pl.root
			if existed {
				if err := os.MkdirAll(root, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"--cgroup-root", root, "--state-dir", pl.stateDir}
			dead := startHTTP(t, args...)
			r := bash(t, dead.connect(t), "sleep 300 & echo $! $("+testutil.ShowNS+")")
			left := testutil.PidsIn(t, r.Output)
			guard := dead.cmd.Process.Pid
			server := serverOf(t, guard)
			for _, pid := range []int{guard, server} {
				syscall.Kill(pid, syscall.SIGSTOP)
			}
			for _, pid := range []int{server, guard} {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			<-dead.done
			out, code := runOnce(t, nil, append([]string{"sweep"}, args...)...)
			if code != 0 || !strings.Contains(out, "dead instance r") {
				t.Fatalf("reaper sweep: exit %d\n%s", code, out)
			}
			testutil.AwaitDead(t, left, 5*time.Second)
			_, errRoot := os.Stat(root)
			_, errParent := os.Stat(pl.root)
			if existed && errRoot != nil || !existed && (!os.IsNotExist(errRoot) || !os.IsNotExist(errParent)) {
				t.Errorf("after the sweep: the root %v, its parent %v (the root existed before: %v)\n%s", errRoot, errParent, existed, out)
			}
		})
	}
}
