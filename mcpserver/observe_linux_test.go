package mcpserver

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	ops      []Operation
	sessions []SessionInfo
	refused  []string
}

func (r *recorder) Refused(limit string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused = append(r.refused, limit)
}

func (r *recorder) Operation(op Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
}

func (r *recorder) SessionEnded(si SessionInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sessions = append(r.sessions, si)
}

func (r *recorder) find(method, tool string) (Operation, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, op := range r.ops {
		if op.Method == method && op.Tool == tool {
			return op, true
		}
	}
	return Operation{}, false
}

func TestObserverSeesOperationsAndSessions(t *testing.T) {
	rec := &recorder{}
	_, cs := connectWith(t, Options{Observer: rec})
	mcptest.CallInto(t, cs, "bash", map[string]any{"command": "exit 3"}, nil)
	if op, ok := rec.find("tools/call", "bash"); !ok || op.ErrorType != "" || op.Transport != "pipe" || op.Duration <= 0 {
		t.Errorf("bash that exited 3 (a result, not an error): %+v, %v", op, ok)
	}
	_, initialized := rec.find("initialize", "")
	_, discovered := rec.find("server/discover", "")
	if !initialized && !discovered {
		t.Errorf("neither initialize nor server/discover observed: %+v", rec.ops)
	}

	res := mcptest.CallInto(t, cs, "task_output", map[string]any{"task_id": "t-nope"}, nil)
	if !res.IsError {
		t.Fatalf("task_output of an unknown task succeeded: %+v", res)
	}
	if op, ok := rec.find("tools/call", "task_output"); !ok || op.ErrorType != "tool_error" {
		t.Errorf("a tool error: %+v, %v", op, ok)
	}

	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rm -rf " + strings.Repeat("x", 50)})
	if err == nil {
		t.Fatal("an unknown tool was called")
	}
	if op, ok := rec.find("tools/call", OtherValue); !ok || op.ErrorType == "" || op.ErrorType == "tool_error" {
		t.Errorf("an unknown tool is a protocol error with a bounded tool name: %+v, %v", op, ok)
	}

	cs.Close()
	testutil.Eventually(t, "the session's end observed", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.sessions) == 1
	})
	if si := rec.sessions[0]; si.Transport != "pipe" || si.Duration <= 0 {
		t.Errorf("session: %+v", si)
	}
}

func TestBashTextSaysOOM(t *testing.T) {
	res := reaper.Result{Status: reaper.Failed, ExitCode: 137, OOMKilled: true, Cwd: "/"}
	got := bashText(res, time.Minute, sessionLimits{memoryMax: 64 << 20})
	if !strings.Contains(got, "[exit code 137]") || !strings.Contains(got, "out-of-memory killer") || !strings.Contains(got, "64 MiB") {
		t.Errorf("bash text of an OOM-killed command:\n%s", got)
	}
	res.OOMKilled = false
	if got := bashText(res, time.Minute, sessionLimits{memoryMax: 64 << 20}); strings.Contains(got, "memory") {
		t.Errorf("bash text mentions memory without an OOM kill:\n%s", got)
	}
}

// TestBashTextSaysLimitsHit: refused forks and CPU throttling while a command ran are in its result,
// with the limit that did it; none of it without hits.
func TestBashTextSaysLimitsHit(t *testing.T) {
	res := reaper.Result{Status: reaper.Failed, ExitCode: 2, Cwd: "/", Hits: reaper.Hits{ForksRefused: 12, Throttled: 30, ThrottledTime: 2100 * time.Millisecond}}
	got := bashText(res, time.Minute, sessionLimits{pidsMax: 64, cpus: 0.2})
	for _, want := range []string{
		"[fork failed: the session's processes reached its limit of 64 (--pids-max); 12 fork(s) refused while this command ran]",
		"[throttled: the session's processes used its CPU limit of 0.2 CPUs (--cpu-max) and were held back in 30 period(s) of 100 ms, 2.1s in all, while this command ran]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("bash text lacks %q:\n%s", want, got)
		}
	}
	if got := bashText(res, time.Minute, sessionLimits{}); !strings.Contains(got, "a limit on processes above the session's own") {
		t.Errorf("a hit without a session limit of its kind must name the limit above:\n%s", got)
	}
	res.Hits = reaper.Hits{}
	if got := bashText(res, time.Minute, sessionLimits{pidsMax: 64, cpus: 0.2}); strings.Contains(got, "fork") || strings.Contains(got, "throttled") {
		t.Errorf("bash text names limits that were not hit:\n%s", got)
	}
}
