package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Timeouts of the tools, in milliseconds as the agents' tools count them.
const (
	defaultBashTimeoutMS = 120000
	defaultWaitMS        = 30000
	maxTimeoutMS         = 600000
)

// BashInput is the bash tool's arguments. The names match the shell tools agents already use.
type BashInput struct {
	Command         string `json:"command" jsonschema:"the shell command to run (bash -c)"`
	Timeout         *int   `json:"timeout,omitempty" jsonschema:"milliseconds before the command and everything it started are killed; default 120000, at most 600000"`
	RunInBackground bool   `json:"run_in_background,omitempty" jsonschema:"start the command as a background task and return its task_id at once"`
	Description     string `json:"description,omitempty" jsonschema:"a short description of what the command does, at most 1024 bytes"`
}

// BashOutput is the bash tool's structured result.
type BashOutput struct {
	// Output is stdout and stderr, interleaved as written. Empty for a background start.
	Output string `json:"output"`
	// Status is completed, failed, timed_out, killed, or running (a background task).
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// OOMKilled is set when the kernel's OOM killer killed a process of the command: the session's
	// memory limit was reached.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// DroppedBytes were cut from the middle of a long output; its head and tail are kept.
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
	// Cwd is the session's working directory after the command.
	Cwd string `json:"cwd"`
	// TaskID is set for background tasks (and commands moved to the background).
	TaskID string `json:"task_id,omitempty"`
	// Leftover counts processes the command left running in the session.
	Leftover int `json:"leftover_processes,omitempty"`
}

// TaskOutputInput is the task_output tool's arguments.
type TaskOutputInput struct {
	TaskID  string `json:"task_id" jsonschema:"the id bash returned for a background task"`
	Block   bool   `json:"block,omitempty" jsonschema:"wait until the task ends (or the timeout passes) before returning"`
	Timeout *int   `json:"timeout,omitempty" jsonschema:"milliseconds to wait when block is true; default 30000, at most 600000"`
}

// TaskOutput is the task_output tool's structured result.
type TaskOutput struct {
	TaskID   string `json:"task_id"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// OOMKilled is set when the kernel's OOM killer killed a process of the task.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// Output is what the task wrote since the previous read: all of it kept, up to the output limit,
	// unless PendingBytes says otherwise.
	Output string `json:"output"`
	// Offset and Next delimit Output in the task's output stream. SkippedBytes of them were dropped
	// to keep the output bounded (the middle of a long output), and a line in Output stands for them.
	Offset       int64 `json:"offset"`
	Next         int64 `json:"next"`
	SkippedBytes int64 `json:"skipped_bytes,omitempty"`
	// PendingBytes is output the task already wrote that did not fit in this result: the next
	// task_output call returns it.
	PendingBytes int64 `json:"pending_bytes,omitempty"`
	// Processes is the number of the task's processes still alive.
	Processes int `json:"processes"`
}

// TaskStopInput is the task_stop tool's arguments.
type TaskStopInput struct {
	TaskID string `json:"task_id" jsonschema:"the id of the task to stop"`
}

// TaskStopOutput is the task_stop tool's structured result.
type TaskStopOutput struct {
	TaskID   string `json:"task_id"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// Killed counts the processes the stop ended.
	Killed int `json:"killed"`
}

// TaskListInput is the task_list tool's (empty) arguments.
type TaskListInput struct{}

// TaskListOutput is the task_list tool's structured result.
type TaskListOutput struct {
	Tasks     []TaskEntry     `json:"tasks"`
	Leftovers []LeftoverEntry `json:"leftovers"`
}

// TaskEntry describes one background task.
type TaskEntry struct {
	TaskID      string `json:"task_id"`
	Command     string `json:"command"`
	Description string `json:"description,omitempty"`
	Status      string `json:"status"`
	ExitCode    *int   `json:"exit_code,omitempty"`
	Started     string `json:"started"`
	Ended       string `json:"ended,omitempty"`
	Processes   int    `json:"processes"`
	OutputBytes int64  `json:"output_bytes"`
}

// LeftoverEntry describes processes a finished foreground command left running.
type LeftoverEntry struct {
	TaskID  string `json:"task_id"`
	Command string `json:"command"`
	Pids    []int  `json:"pids"`
}

// scope says, in the tools' descriptions, where commands run and when everything they start dies.
type scope struct {
	in   string // where commands run: "this session"
	the  string // the same, as a subject: "the session"
	ends string // when it ends, after "killed when the session ends"
}

// taskTools describes the bash, task_output, task_stop and task_list tools for sc, without their
// schemas, which depend on the protocol era.
func taskTools(l reaper.Limits, sc scope) (bash, output, stop, list *mcp.Tool) {
	bash = &mcp.Tool{
		Name: "bash",
		Description: fmt.Sprintf(`Run a shell command (bash -c) in %[1]s and return its output and exit code.
The working directory persists between commands of %[2]s; environment variables do not.
Foreground commands return as soon as the command itself exits, even if it left processes running (such as "server &"); those stay in %[2]s.
Limits: timeout defaults to 120000 ms, at most 600000 ms; on timeout the command and everything it started are killed. Output is kept up to %[3]s per command (head and tail; the middle of longer output is dropped and counted; control characters count six bytes each).
With run_in_background the command becomes a task: you get its task_id at once; read its output with task_output (block=true waits for it to end, instead of polling), stop it with task_stop, see all with task_list. At most %[4]d background tasks run at once%[5]s.
Everything %[1]s starts, background tasks and escaped or detached processes included, is killed when %[2]s ends%[6]s.`,
			sc.in, sc.the, byteString(int64(l.OutputLimit)), l.MaxTasks, bgTimeoutText(l.BackgroundTimeout), sc.ends),
		Annotations: &mcp.ToolAnnotations{Title: "Run a shell command", OpenWorldHint: ptr(true)},
	}
	output = &mcp.Tool{
		Name:        "task_output",
		Description: "Return a background task's status, exit code once it has ended, and the output it wrote since the previous read: everything kept, up to the output limit, unless the result would be too large, in which case pending_bytes says how much more a next call returns. With block=true wait until the task ends (timeout defaults to 30000 ms, at most 600000 ms) instead of polling. A finished task is cleared once its output has been read to the end.",
		Annotations: &mcp.ToolAnnotations{Title: "Read a background task's output", ReadOnlyHint: true},
	}
	stop = &mcp.Tool{
		Name:        "task_stop",
		Description: fmt.Sprintf("Stop a background task: its whole process tree (children, detached and escaped ones included) gets %s. Returns its final status.", graceText(l.Grace)),
		Annotations: &mcp.ToolAnnotations{Title: "Stop a background task", DestructiveHint: ptr(true), IdempotentHint: true},
	}
	list = &mcp.Tool{
		Name:        "task_list",
		Description: fmt.Sprintf("List %s's background tasks (id, command, status, exit code, times, live process count) and any processes left running by finished foreground commands.", sc.the),
		Annotations: &mcp.ToolAnnotations{Title: "List background tasks", ReadOnlyHint: true},
	}
	return bash, output, stop, list
}

// addTools adds the tools of the session era (a session is the connection, or an HTTP session) to
// the session server.
func (s *Server) addTools(l reaper.Limits) {
	bash, output, stop, list := taskTools(l, scope{in: "this session", the: "the session",
		ends: fmt.Sprintf(" (over HTTP, also after %v without requests)", s.opts.IdleTimeout)})
	bash.InputSchema, bash.OutputSchema = schemaFor[BashInput](), schemaFor[BashOutput]()
	output.InputSchema, output.OutputSchema = schemaFor[TaskOutputInput](), schemaFor[TaskOutput]()
	stop.InputSchema, stop.OutputSchema = schemaFor[TaskStopInput](), schemaFor[TaskStopOutput]()
	list.InputSchema, list.OutputSchema = schemaFor[TaskListInput](), schemaFor[TaskListOutput]()
	mcp.AddTool(s.mcp, bash, structured(inSession(s, s.bash)))
	mcp.AddTool(s.mcp, output, structured(inSession(s, s.taskOutput)))
	mcp.AddTool(s.mcp, stop, structured(inSession(s, s.taskStop)))
	mcp.AddTool(s.mcp, list, structured(inSession(s, s.taskList)))
}

// inSession adapts a tool handler that acts on a session to the session era: the session is the one
// the call came on, opened on its first tool call.
func inSession[In, Out any](s *Server, h func(context.Context, *mcp.CallToolRequest, *session, In) (*mcp.CallToolResult, Out, error)) func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error) {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		st, err := s.sessionFor(ctx, req)
		if err != nil {
			var none Out
			return nil, none, err
		}
		return h(ctx, req, st, in)
	}
}

func (s *Server) bash(ctx context.Context, req *mcp.CallToolRequest, st *session, in BashInput) (*mcp.CallToolResult, BashOutput, error) {
	timeout, err := millis("timeout", in.Timeout, defaultBashTimeoutMS)
	if err != nil {
		return nil, BashOutput{}, err
	}
	if in.RunInBackground {
		ti, err := st.rs.Start(in.Command, in.Description)
		if err != nil {
			return nil, BashOutput{}, err
		}
		out := BashOutput{Status: string(ti.Status), TaskID: ti.ID, Cwd: st.rs.Cwd()}
		return text(fmt.Sprintf("Started background task %s. Read its output with task_output (block=true waits for it to end); stop it with task_stop.", ti.ID)), out, nil
	}
	opts := reaper.RunOptions{Timeout: timeout, Description: in.Description, Budget: s.budget}
	if token := req.Params.GetProgressToken(); token != nil {
		opts.OnProgress = func(p reaper.Progress) {
			msg := fmt.Sprintf("%d lines, %v", p.Lines, p.Elapsed.Round(time.Second))
			if p.LastLine != "" {
				msg += ": " + p.LastLine
			}
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token, Progress: p.Elapsed.Seconds(), Message: msg,
			})
		}
	}
	res, err := st.rs.Run(ctx, in.Command, opts)
	if err != nil && res.Status == "" {
		return nil, BashOutput{}, err
	}
	txt := bashText(res, timeout, s.memoryMax())
	out := BashOutput{
		// The text starts with the output: both share one copy of it.
		Output: txt[:len(res.Output)], Status: string(res.Status), TimedOut: res.TimedOut, OOMKilled: res.OOMKilled,
		DroppedBytes: res.Dropped, Cwd: res.Cwd, TaskID: res.TaskID, Leftover: res.Leftover,
	}
	if res.Status.Terminal() {
		out.ExitCode = ptr(res.ExitCode)
	}
	return text(txt), out, nil
}

// memoryMax is the per-session memory limit in effect, in bytes; zero for none.
func (s *Server) memoryMax() int64 { return s.opts.Reaper.Containment().Limits.MemoryMax }

// oomText tells the agent that the OOM killer struck, and why.
func oomText(memoryMax int64) string {
	if memoryMax > 0 {
		return fmt.Sprintf("killed by the out-of-memory killer: this session's processes together reached its memory limit of %s", byteString(memoryMax))
	}
	return "killed by the out-of-memory killer"
}

// byteString writes n in the largest binary unit that divides it.
func byteString(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// bashText is the human-readable result of a foreground command: the output, then what else the
// agent should know, in brackets. It starts with res.Output.
func bashText(res reaper.Result, timeout time.Duration, memoryMax int64) string {
	var b strings.Builder
	b.Grow(len(res.Output) + 256)
	b.WriteString(res.Output)
	if res.Output != "" && !strings.HasSuffix(res.Output, "\n") {
		b.WriteByte('\n')
	}
	note := func(format string, args ...any) { fmt.Fprintf(&b, "["+format+"]\n", args...) }
	if res.Notice != "" {
		note("%s", res.Notice)
	}
	switch {
	case res.TaskID != "":
		note("still running: moved to the background as task %s; follow it with task_output", res.TaskID)
	case res.TimedOut:
		note("timed out after %v: the command and everything it started were killed", timeout)
	case res.Status == reaper.Killed:
		note("killed")
	default:
		note("exit code %d", res.ExitCode)
	}
	if res.OOMKilled {
		note("%s", oomText(memoryMax))
	}
	if res.Dropped > 0 {
		note("output too long: %d bytes dropped from the middle", res.Dropped)
	}
	if res.Leftover > 0 {
		note("%d process(es) started by this command still run in this session (see task_list); they are killed when the session ends", res.Leftover)
	}
	note("cwd: %s", res.Cwd)
	return b.String()
}

func (s *Server) taskOutput(ctx context.Context, req *mcp.CallToolRequest, st *session, in TaskOutputInput) (*mcp.CallToolResult, TaskOutput, error) {
	wait, err := millis("timeout", in.Timeout, defaultWaitMS)
	if err != nil {
		return nil, TaskOutput{}, err
	}
	if in.Block {
		if _, err := st.rs.Wait(ctx, in.TaskID, wait); err != nil && !errors.Is(err, context.Canceled) {
			return nil, TaskOutput{}, err
		}
	}
	ti, c, err := st.rs.Output(in.TaskID, reaper.OutputOptions{Budget: s.budget})
	if err != nil {
		return nil, TaskOutput{}, err
	}
	out := TaskOutput{
		TaskID: ti.ID, Status: string(ti.Status), OOMKilled: ti.OOMKilled, Output: c.Text, Offset: c.Offset, Next: c.Next,
		SkippedBytes: c.Skipped, PendingBytes: c.Pending, Processes: ti.Processes,
	}
	var b strings.Builder
	b.Grow(len(c.Text) + 256)
	b.WriteString(c.Text) // a line in it stands for skipped bytes
	if c.Text != "" && !strings.HasSuffix(c.Text, "\n") {
		b.WriteByte('\n')
	}
	if c.Pending > 0 {
		fmt.Fprintf(&b, "[%d more bytes pending: call task_output again]\n", c.Pending)
	}
	if ti.Status.Terminal() {
		out.ExitCode = ptr(ti.ExitCode)
		fmt.Fprintf(&b, "[task %s %s, exit code %d]\n", ti.ID, ti.Status, ti.ExitCode)
		if ti.OOMKilled {
			fmt.Fprintf(&b, "[%s]\n", oomText(s.memoryMax()))
		}
	} else {
		fmt.Fprintf(&b, "[task %s running for %v, %d process(es)]\n", ti.ID, time.Since(ti.Started).Round(time.Second), ti.Processes)
	}
	txt := b.String()
	out.Output = txt[:len(c.Text)] // the text starts with the output: both share one copy of it
	return text(txt), out, nil
}

func (s *Server) taskStop(ctx context.Context, req *mcp.CallToolRequest, st *session, in TaskStopInput) (*mcp.CallToolResult, TaskStopOutput, error) {
	ti, rep, err := st.rs.Stop(ctx, in.TaskID)
	if errors.Is(err, reaper.ErrUnknownTask) || ti.ID == "" {
		return nil, TaskStopOutput{}, err
	}
	out := TaskStopOutput{TaskID: ti.ID, Status: string(ti.Status), Killed: rep.Total()}
	if ti.Status.Terminal() {
		out.ExitCode = ptr(ti.ExitCode)
	}
	msg := fmt.Sprintf("Task %s: %s; %d process(es) ended.", ti.ID, ti.Status, rep.Total())
	if err != nil {
		msg += " Warning: " + err.Error()
	}
	return text(msg), out, nil
}

func (s *Server) taskList(ctx context.Context, req *mcp.CallToolRequest, st *session, _ TaskListInput) (*mcp.CallToolResult, TaskListOutput, error) {
	l := st.rs.List()
	out := TaskListOutput{Tasks: []TaskEntry{}, Leftovers: []LeftoverEntry{}}
	var b strings.Builder
	for _, t := range l.Tasks {
		e := TaskEntry{
			TaskID: t.ID, Command: t.Command, Description: t.Description, Status: string(t.Status),
			Started: t.Started.UTC().Format(time.RFC3339), Processes: t.Processes, OutputBytes: t.OutputBytes,
		}
		if t.Status.Terminal() {
			e.ExitCode = ptr(t.ExitCode)
			e.Ended = t.Ended.UTC().Format(time.RFC3339)
		}
		out.Tasks = append(out.Tasks, e)
		fmt.Fprintf(&b, "%s  %-9s  %d proc  %s\n", t.ID, t.Status, t.Processes, oneLine(t.Command))
	}
	for _, lo := range l.Leftovers {
		out.Leftovers = append(out.Leftovers, LeftoverEntry{TaskID: lo.TaskID, Command: lo.Command, Pids: append([]int{}, lo.Pids...)})
		fmt.Fprintf(&b, "left by %s (%s): pids %v\n", lo.TaskID, oneLine(lo.Command), lo.Pids)
	}
	if b.Len() == 0 {
		b.WriteString("No background tasks and no leftover processes.\n")
	}
	return text(b.String()), out, nil
}

// millis converts an optional millisecond argument, checking its range.
func millis(name string, v *int, def int) (time.Duration, error) {
	ms := def
	if v != nil {
		ms = *v
	}
	if ms < 1 || ms > maxTimeoutMS {
		return 0, fmt.Errorf("%s must be between 1 and %d milliseconds, got %d", name, maxTimeoutMS, ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func bgTimeoutText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf("; a background task still running after %v is killed", d)
}

func graceText(grace time.Duration) string {
	if grace == 0 {
		return "SIGKILL at once"
	}
	return fmt.Sprintf("SIGTERM, then SIGKILL after %v", grace)
}

func instructions(l reaper.Limits, idle time.Duration) string {
	return fmt.Sprintf("reaper runs shell commands for this session with the bash tool, in the foreground or as background tasks (task_output, task_stop, task_list). "+
		"Every process the session starts is killed when the session ends (over HTTP, also after %v without requests), including detached ones; do not rely on anything outliving the session. "+
		"At most %d background tasks run at once; output is kept up to %s per command.", idle, l.MaxTasks, byteString(int64(l.OutputLimit)))
}
