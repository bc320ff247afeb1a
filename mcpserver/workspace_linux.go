package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cgreaper/reaper/internal/textfit"
	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol 2026-07-28 has no sessions over HTTP (SEP-2567). A workspace is a reaper session held by a
// handle instead of a connection: 130 random bits from workspace_open, bound to the caller's identity
// (see auth_linux.go). Every call that names it renews its lease; unused for IdleTimeout, closed, or
// at the server's end, it ends by end. A handle that is unknown, expired or another identity's gets
// one and the same error. Notifications go out only on a call's own response stream (bash's
// progress); a background task's end is not announced.

// DefaultMaxWorkspaces is how many workspaces one identity may hold open at once by default.
const DefaultMaxWorkspaces = 16

// WorkspaceInput names the workspace a call acts on.
type WorkspaceInput struct {
	Workspace string `json:"workspace" jsonschema:"the workspace's handle, as workspace_open returned it"`
}

func (w WorkspaceInput) handle() string { return w.Workspace }

// WorkspaceBashInput is the bash tool's arguments in a workspace.
type WorkspaceBashInput struct {
	WorkspaceInput
	BashInput
}

func (w WorkspaceBashInput) args() BashInput { return w.BashInput }

// WorkspaceTaskOutputInput is the task_output tool's arguments in a workspace.
type WorkspaceTaskOutputInput struct {
	WorkspaceInput
	TaskOutputInput
}

func (w WorkspaceTaskOutputInput) args() TaskOutputInput { return w.TaskOutputInput }

// WorkspaceTaskStopInput is the task_stop tool's arguments in a workspace.
type WorkspaceTaskStopInput struct {
	WorkspaceInput
	TaskStopInput
}

func (w WorkspaceTaskStopInput) args() TaskStopInput { return w.TaskStopInput }

// WorkspaceWriteStdinInput is the write_stdin tool's arguments in a workspace.
type WorkspaceWriteStdinInput struct {
	WorkspaceInput
	WriteStdinInput
}

func (w WorkspaceWriteStdinInput) args() WriteStdinInput { return w.WriteStdinInput }

// WorkspaceTaskListInput is the task_list tool's arguments in a workspace.
type WorkspaceTaskListInput struct {
	WorkspaceInput
}

func (WorkspaceTaskListInput) args() TaskListInput { return TaskListInput{} }

// WorkspaceOpenInput is the workspace_open tool's (empty) arguments.
type WorkspaceOpenInput struct{}

// WorkspaceOpenOutput is the workspace_open tool's structured result.
type WorkspaceOpenOutput struct {
	// Workspace is the handle every other tool takes.
	Workspace string `json:"workspace"`
	// LeaseSeconds is how long the workspace lives without a call that names it.
	LeaseSeconds int `json:"lease_seconds"`
	// ExpiresAt is when the lease runs out unless a call renews it (RFC 3339).
	ExpiresAt string `json:"expires_at"`
	Cwd       string `json:"cwd"`
}

// WorkspaceCloseOutput is the workspace_close tool's structured result.
type WorkspaceCloseOutput struct {
	Workspace string `json:"workspace"`
	// Status is closed (every process is dead) or closing (they are being killed: a task ignores
	// SIGTERM, say); the handle is unusable either way.
	Status string `json:"status"`
}

// WorkspaceListOutput is the workspace_list tool's structured result.
type WorkspaceListOutput struct {
	Workspaces []WorkspaceEntry `json:"workspaces"`
}

// WorkspaceEntry describes one open workspace.
type WorkspaceEntry struct {
	Workspace string `json:"workspace"`
	Opened    string `json:"opened"`
	LastUsed  string `json:"last_used"`
	// ExpiresAt is when the lease runs out unless a call renews it; empty while a call runs.
	ExpiresAt string `json:"expires_at,omitempty"`
	Cwd       string `json:"cwd"`
	// Tasks counts its background tasks that still run.
	Tasks int `json:"running_tasks"`
}

func (s *Server) addWorkspaceTools(l reaper.Limits) {
	lease := s.opts.IdleTimeout
	sc := scope{in: "the workspace", the: "the workspace",
		ends: fmt.Sprintf(" (workspace_close, %v without a call that names it, or the server's end)", lease)}
	t := taskTools(l, s.maxOutput, sc)
	for _, tool := range []*mcp.Tool{t.bash, t.output, t.stop, t.list, t.input} {
		tool.Description = "In the workspace named by workspace (call workspace_open first for a handle). " + tool.Description
	}
	addTool(s.ws, t.bash, inWorkspace[WorkspaceBashInput](s, s.bash), needsWorkspace)
	addTool(s.ws, t.output, inWorkspace[WorkspaceTaskOutputInput](s, s.taskOutput), needsWorkspace)
	addTool(s.ws, t.stop, inWorkspace[WorkspaceTaskStopInput](s, s.taskStop), needsWorkspace)
	addTool(s.ws, t.list, inWorkspace[WorkspaceTaskListInput](s, s.taskList), needsWorkspace)
	addTool(s.ws, t.input, inWorkspace[WorkspaceWriteStdinInput](s, s.writeStdin), needsWorkspace)
	addTool(s.ws, &mcp.Tool{
		Name: "workspace_open",
		Description: fmt.Sprintf(`Open a workspace and return its handle: pass it as workspace to bash, task_output, task_stop, task_list, write_stdin and workspace_close.
A workspace keeps a working directory and background tasks across calls, as a shell session does. Its lease is %v: every call that names it renews the lease, and a call in progress holds it; unused for that long, it expires. When it is closed (workspace_close), expires, or the server stops, everything it started is killed, background tasks and escaped or detached processes included.
A workspace belongs to the identity that opened it (the bearer token's): no other identity can use, list or close it. At most %d workspaces are open at once per identity.
No notifications come between calls: wait for a background task with task_output block=true.`, lease, s.opts.MaxWorkspaces),
		Annotations: &mcp.ToolAnnotations{Title: "Open a workspace"},
	}, s.workspaceOpen)
	addTool(s.ws, &mcp.Tool{
		Name:        "workspace_close",
		Description: fmt.Sprintf("Close a workspace now: every process it started, background tasks and escaped or detached processes included, gets %s; the handle is unusable at once. Answers within a second, closed or still closing.", graceText(l.Grace)),
		Annotations: &mcp.ToolAnnotations{Title: "Close a workspace", DestructiveHint: ptr(true), IdempotentHint: true},
	}, s.workspaceClose, needsWorkspace)
	addTool(s.ws, &mcp.Tool{
		Name:        "workspace_list",
		Description: fmt.Sprintf("List the caller's open workspaces: handle, when opened and last used, when the lease (%v) runs out, working directory, running background tasks.", lease),
		Annotations: &mcp.ToolAnnotations{Title: "List your workspaces", ReadOnlyHint: true},
	}, s.workspaceList)
}

// workspaceArgs are the arguments of a tool that acts on a workspace: the handle, and the tool's
// arguments in the session era.
type workspaceArgs[In any] interface {
	handle() string
	args() In
}

// inWorkspace adapts a tool handler to the workspace era: the session is the workspace the call
// names, whose lease the call holds while it runs.
func inWorkspace[W workspaceArgs[In], In, Out any](s *Server, h func(context.Context, *mcp.CallToolRequest, *session, In) (*mcp.CallToolResult, Out, error)) func(context.Context, *mcp.CallToolRequest, W) (*mcp.CallToolResult, Out, error) {
	return func(ctx context.Context, req *mcp.CallToolRequest, in W) (*mcp.CallToolResult, Out, error) {
		st, done, err := s.workspaceFor(ctx, req, in.handle())
		if err != nil {
			var none Out
			return nil, none, err
		}
		defer done()
		res, out, err := h(ctx, req, st, in.args())
		return res, out, nextStep(err)
	}
}

// workspaceFor returns the live workspace that handle names for the caller's identity, with the call
// counted on its lease (see beginLocked) until done is called.
func (s *Server) workspaceFor(ctx context.Context, req *mcp.CallToolRequest, handle string) (st *session, done func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st = s.sessions[key{kind: kindWorkspace, id: handle}]
	if st == nil || st.owner != owner(req) || st.state != stateLive {
		// One error for a handle that never was, that ended, and that is another identity's.
		return nil, nil, fmt.Errorf("no open workspace of yours has this handle: a workspace ends when closed, after %v without a call that names it, or when the server stops. Call workspace_open for a new one", s.opts.IdleTimeout)
	}
	return st, s.beginLocked(st, ctx), nil
}

func (s *Server) workspaceOpen(ctx context.Context, req *mcp.CallToolRequest, _ WorkspaceOpenInput) (*mcp.CallToolResult, WorkspaceOpenOutput, error) {
	who := owner(req)
	st := newSession(key{kind: kindWorkspace, id: "ws_" + rand.Text()}, nil, who)
	st.version = requestVersion(req)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, WorkspaceOpenOutput{}, errShuttingDown
	}
	if refused := s.admitLocked(who, true); refused != nil {
		s.mu.Unlock()
		s.opts.Observer.Refused(refused.limit)
		return nil, WorkspaceOpenOutput{}, errors.New(refused.why)
	}
	st.state, st.opened = stateOpening, make(chan struct{})
	s.sessions[st.key] = st
	s.mu.Unlock()
	if err := s.create(st); err != nil {
		return nil, WorkspaceOpenOutput{}, err
	}
	out := WorkspaceOpenOutput{
		Workspace: st.key.id, LeaseSeconds: int(s.opts.IdleTimeout / time.Second), Cwd: st.rs.Cwd(),
		ExpiresAt: time.Now().Add(s.opts.IdleTimeout).UTC().Format(time.RFC3339),
	}
	return text(fmt.Sprintf("Opened workspace %s (lease %v, renewed by every call that names it). Pass it as workspace to bash, task_output, task_stop, task_list, write_stdin and workspace_close.", out.Workspace, s.opts.IdleTimeout)), out, nil
}

// workspaceClose ends a workspace as a DELETE ends a session: the teardown goes on in a goroutine,
// and the answer waits deleteWait for it at most.
func (s *Server) workspaceClose(ctx context.Context, req *mcp.CallToolRequest, in WorkspaceInput) (*mcp.CallToolResult, WorkspaceCloseOutput, error) {
	st, done, err := s.workspaceFor(ctx, req, in.Workspace)
	if err != nil {
		return nil, WorkspaceCloseOutput{}, err
	}
	done() // the lease is over either way
	s.mu.Lock()
	s.goLocked(func() { s.end(context.Background(), st, endClose) }) // while closing, Close ends it
	s.mu.Unlock()
	timer := time.NewTimer(deleteWait)
	defer timer.Stop()
	out := WorkspaceCloseOutput{Workspace: in.Workspace, Status: "closing"}
	msg := "Workspace closing: its processes are being killed, and its handle is no longer usable (workspace_open opens another)."
	select {
	case <-st.ended:
		out.Status, msg = "closed", "Workspace closed: every process it started is dead."
		if st.err != nil {
			msg += " Warning: " + st.err.Error()
		}
	case <-timer.C:
	}
	return text(msg), out, nil
}

func (s *Server) workspaceList(ctx context.Context, req *mcp.CallToolRequest, _ WorkspaceOpenInput) (*mcp.CallToolResult, WorkspaceListOutput, error) {
	who := owner(req)
	type entry struct {
		st   *session
		last time.Time
		busy bool
	}
	var mine []entry
	s.mu.Lock()
	for k, st := range s.sessions {
		if k.kind == kindWorkspace && st.owner == who && st.state == stateLive {
			mine = append(mine, entry{st: st, last: st.last, busy: st.inFlight > 0})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(mine, func(a, b entry) int { return a.st.created.Compare(b.st.created) })
	out := WorkspaceListOutput{Workspaces: []WorkspaceEntry{}}
	var b strings.Builder
	for _, e := range mine {
		w := WorkspaceEntry{
			Workspace: e.st.key.id, Opened: e.st.created.UTC().Format(time.RFC3339), LastUsed: e.last.UTC().Format(time.RFC3339),
			Cwd: e.st.rs.Cwd(),
		}
		if !e.busy {
			w.ExpiresAt = e.last.Add(s.opts.IdleTimeout).UTC().Format(time.RFC3339)
		}
		for _, t := range e.st.rs.List().Tasks {
			if !t.Status.Terminal() {
				w.Tasks++
			}
		}
		out.Workspaces = append(out.Workspaces, w)
		fmt.Fprintf(&b, "%s  opened %s  last used %s  %d running task(s)  %s\n", w.Workspace, w.Opened, w.LastUsed, w.Tasks, w.Cwd)
	}
	if b.Len() == 0 {
		b.WriteString("No open workspaces. Open one with workspace_open.\n")
	}
	return text(b.String()), out, nil
}

// needsWorkspace is the check (see addTool) of a call of the tool name, which acts on a workspace:
// without a handle it is refused with an error that says how to get one, before the validation
// would refuse it with one that does not. It runs in the tool's handler, not in middleware, whose
// results get no resultType from go-sdk v1.8.0 (see sdkfix's package doc). A workspace of any type
// but "" passes: the validation refuses one that is not a string.
func needsWorkspace(name string, args json.RawMessage) error {
	var a struct {
		Workspace json.RawMessage `json:"workspace"`
	}
	// Arguments that are not an object pass too: the validation says so.
	if json.Unmarshal(args, &a) != nil || len(a.Workspace) > 0 && !bytes.Equal(a.Workspace, []byte(`""`)) {
		return nil
	}
	return fmt.Errorf("%s needs the workspace argument: call workspace_open first and pass the handle it returns as workspace", name)
}

func workspaceInstructions(l reaper.Limits, maxOutput int, lease time.Duration, most int) string {
	return fmt.Sprintf("reaper runs shell commands in workspaces. Call workspace_open first and pass the handle it returns as workspace to bash (foreground or background, with stdin or tty for interactive programs), task_output, task_stop, task_list and write_stdin; close it with workspace_close when done. "+
		"A workspace's lease is %v, renewed by every call that names it; when it is closed, expires or the server stops, every process it started is killed, detached ones included: do not rely on anything outliving it. "+
		"At most %d workspaces per identity and %d background tasks per workspace run at once. A result holds at most %d characters of output (max_output changes it); the whole output of every command is kept in a file that task_output reads (offset, grep, tail), within %s per workspace.", lease, most, l.MaxTasks, maxOutput, textfit.ByteSize(l.OutputBudget))
}
