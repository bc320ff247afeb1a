package reaper

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/testutil"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu        sync.Mutex
	ended     []SessionEnd
	tasks     []TaskEnd
	teardowns []KillReport
	swept     int
}

func (r *recorder) SessionEnded(e SessionEnd) {
	r.mu.Lock()
	r.ended = append(r.ended, e)
	r.mu.Unlock()
}
func (r *recorder) TaskEnded(e TaskEnd) { r.mu.Lock(); r.tasks = append(r.tasks, e); r.mu.Unlock() }
func (r *recorder) Teardown(k KillReport) {
	r.mu.Lock()
	r.teardowns = append(r.teardowns, k)
	r.mu.Unlock()
}
func (r *recorder) Swept(SweepReport) { r.mu.Lock(); r.swept++; r.mu.Unlock() }

// TestObserverAndTheOneEndLine follows a session through its life: a task that fails, a background
// task left running, the end with a reason. The Observer hears each, and the log holds exactly one
// line for the end, with the reason and the counts and without an error.
func TestObserverAndTheOneEndLine(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			rec := &recorder{}
			logs := &testutil.Buffer{}
			r := newTestReaper(t, mode, Options{Observer: rec, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			s := newTestSession(t, r, SessionOptions{})
			if res := run(t, s, "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3"); res.Status != Failed {
				t.Fatalf("exit 3: %+v", res)
			}
			if _, err := s.Start("sleep 1000", ""); err != nil {
				t.Fatal(err)
			}
			live := r.Usage()
			if live.Sessions != 1 || mode == ContainCgroup && (len(live.Processes) != 1 || live.Processes[0] < 1 || live.CPU <= 0) {
				t.Errorf("usage with one session running sleep, after a busy loop: %+v", live)
			}
			if mode == ContainProcess && (live.Counted || live.CPU != 0) {
				t.Errorf("process containment counts usage: %+v", live)
			}
			if _, err := s.CloseFor(context.Background(), "idle"); err != nil {
				t.Fatal(err)
			}
			s.Close(context.Background()) // a later call changes neither the reason nor the count
			after := r.Usage()
			if after.Sessions != 0 || len(after.Processes) != 0 {
				t.Errorf("usage with no session: %+v", after)
			}
			if after.CPU < live.CPU {
				t.Errorf("the sessions' CPU time went back from %v to %v as the session ended: the total must keep what ended sessions used", live.CPU, after.CPU)
			}

			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.ended) != 1 || rec.ended[0].Reason != "idle" || rec.ended[0].Tasks != 1 || rec.ended[0].Report.Total() < 1 || rec.ended[0].Err != nil {
				t.Fatalf("sessions ended: %+v", rec.ended)
			}
			if end := rec.ended[0]; end.UsageCounted != (mode == ContainCgroup) || end.UsageCounted && (end.Usage.CPU <= 0 || end.Usage.CPU != after.CPU) {
				t.Errorf("the ended session's usage %+v (counted %v), the total after it %v", end.Usage, end.UsageCounted, after.CPU)
			}
			statuses := make([]Status, len(rec.tasks))
			for i, e := range rec.tasks {
				statuses[i] = e.Status
			}
			if slices.Sort(statuses); !slices.Equal(statuses, []Status{Failed, Killed}) {
				t.Errorf("tasks ended: %+v", rec.tasks)
			}
			if len(rec.teardowns) != 1 || rec.teardowns[0].Total() < 1 {
				t.Errorf("teardowns: %+v", rec.teardowns)
			}
			if k := rec.teardowns[0]; mode == ContainProcess && k.Walked != k.Killed {
				t.Errorf("process containment: every hard kill follows a walk: %+v", k)
			}

			var ends []map[string]any
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if strings.Contains(line, "<nil>") || strings.Contains(line, `"err"`) {
					t.Errorf("log line with an empty error or an err key: %s", line)
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if m["msg"] == "session ended" {
					ends = append(ends, m)
				}
			}
			if len(ends) != 1 {
				t.Fatalf("%d session-end lines, want 1:\n%s", len(ends), logs)
			}
			e := ends[0]
			if e["reason"] != "idle" || e["tasks"] != 1.0 || e["processes_ended"].(float64) < 1 || e["error"] != nil || e["teardown_seconds"].(float64) <= 0 {
				t.Errorf("session-end line: %v", e)
			}
			if cpu, _ := e["cpu_seconds"].(float64); mode == ContainCgroup && (cpu <= 0 || e["usage"] != nil) {
				t.Errorf("cgroup containment: the session-end line does not give the CPU time its slice counted: %v", e)
			}
			if mode == ContainProcess && (e["usage"] != "not counted (process containment)" || e["cpu_seconds"] != nil) {
				t.Errorf("process containment: the session-end line must say its usage is not counted, not give 0: %v", e)
			}
		})
	}
}

// TestLimitsWhereTheHostHasNoController asks for a memory limit. Where the host offers no memory
// controller for the root (this machine's cgroup2 offers only hugetlb), cgroup containment refuses
// with an error naming it and auto warns and runs without the limit; where it does, the limit is
// written into the session's slice.
func TestLimitsWhereTheHostHasNoController(t *testing.T) {
	root := testutil.CgroupRoot(t)
	info := cgroup.Detect(cgroup.Options{Root: root})
	limits := cgroup.Limits{MemoryMax: 64 << 20}
	if slices.Contains(info.Controllers, "memory") {
		r := newTestReaper(t, ContainCgroup, Options{SessionLimits: limits})
		s := newTestSession(t, r, SessionOptions{})
		run(t, s, "true")
		b, err := os.ReadFile(filepath.Join(r.Containment().Slice, s.name, "memory.max"))
		if err != nil || strings.TrimSpace(string(b)) != "67108864" {
			t.Errorf("memory.max of the session's slice: %q, %v", b, err)
		}
		return
	}
	_, err := New(Options{Containment: ContainCgroup, Cgroup: cgroup.Options{Root: root}, SessionLimits: limits, StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "memory controller") {
		t.Fatalf("cgroup containment with a memory limit the host cannot apply: err = %v", err)
	}
	t.Logf("refused as it should be: %v", err)
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused Reaper left its root %s (err %v)", root, err)
	}

	logs := &testutil.Buffer{}
	r, err := New(Options{Cgroup: cgroup.Options{Root: root}, SessionLimits: limits, Logger: slog.New(slog.NewTextHandler(logs, nil)), StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("auto containment with a limit the host cannot apply: %v", err)
	}
	defer r.Close(context.Background())
	ci := r.Containment()
	if ci.Mode != ContainCgroup || ci.Limits != (cgroup.Limits{}) || !strings.Contains(ci.LimitsDropped, "memory") {
		t.Errorf("containment: %+v", ci)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "memory") {
		t.Errorf("no warning about the memory limit:\n%s", logs)
	}
	s, err := r.NewSession("limited", SessionOptions{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s, "true")
	s.Close(context.Background())

	if _, err := New(Options{Containment: ContainProcess, SessionLimits: limits, StateDir: t.TempDir()}); err == nil {
		t.Error("process containment accepted a memory limit")
	}
}
