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
	got := bashText(res, time.Minute, 64<<20)
	if !strings.Contains(got, "[exit code 137]") || !strings.Contains(got, "out-of-memory killer") || !strings.Contains(got, "64 MiB") {
		t.Errorf("bash text of an OOM-killed command:\n%s", got)
	}
	res.OOMKilled = false
	if got := bashText(res, time.Minute, 64<<20); strings.Contains(got, "memory") {
		t.Errorf("bash text mentions memory without an OOM kill:\n%s", got)
	}
}
