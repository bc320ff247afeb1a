package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cgreaper/reaper/internal/textfit"
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
	MaxOutput       *int   `json:"max_output,omitempty" jsonschema:"the most characters of output the result holds (its head and tail; the whole output is in output_file either way); default: the server's (see the tool's description), at most 1048576"`
	Stdin           bool   `json:"stdin,omitempty" jsonschema:"with run_in_background: keep the task's standard input open (a pipe) so that write_stdin can write to it; without it, and without tty, input is /dev/null"`
	TTY             bool   `json:"tty,omitempty" jsonschema:"run the command on a terminal (its input, output and controlling terminal), for programs that need one: password prompts, REPLs, full-screen tools, anything that checks isatty; with run_in_background, write_stdin types into it. Output then has \\r\\n line ends and the terminal echoes what is typed"`
	Rows            *int   `json:"rows,omitempty" jsonschema:"with tty: the terminal's height in lines; default 24"`
	Cols            *int   `json:"cols,omitempty" jsonschema:"with tty: the terminal's width in characters; default 80"`
}

// BashOutput is the bash tool's structured result.
type BashOutput struct {
	// Output is stdout and stderr, interleaved as written, at most max_output characters: all of
	// it, or its head and tail with a line between them for what was left out. Empty for a
	// background start.
	Output string `json:"output"`
	// Status is completed, failed, timed_out, killed, or running (a background task).
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// OOMKilled is set when the kernel's OOM killer killed a process of the command: the session's
	// memory limit was reached.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// ForksRefused counts the forks in the session refused at its process limit while the command
	// ran; CPUThrottledPeriods the periods of its CPU limit in which its processes were held back,
	// CPUThrottledSeconds how long (the limits are the session's: another of its tasks may have hit
	// them).
	ForksRefused        int64   `json:"forks_refused,omitempty"`
	CPUThrottledPeriods int64   `json:"cpu_throttled_periods,omitempty"`
	CPUThrottledSeconds float64 `json:"cpu_throttled_seconds,omitempty"`
	// DroppedChars, DroppedLines and DroppedBytes count what was left out of output between its head
	// and tail: read it from output_file.
	DroppedChars int64 `json:"dropped_chars,omitempty"`
	DroppedLines int64 `json:"dropped_lines,omitempty"`
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
	// OutputBytes and OutputLines measure the whole output.
	OutputBytes int64 `json:"output_bytes,omitempty"`
	OutputLines int64 `json:"output_lines,omitempty"`
	// OutputFile holds the whole output (set when there was any); task_output reads it by
	// OutputTaskID (offset, grep, tail).
	OutputFile   string `json:"output_file,omitempty"`
	OutputTaskID string `json:"output_task_id,omitempty"`
	// FileMissingBytes is set when output_file lacks part of the middle of a larger output: the
	// session's output files reached their budget.
	FileMissingBytes int64 `json:"file_missing_bytes,omitempty"`
	// Cwd is the session's working directory after the command.
	Cwd string `json:"cwd"`
	// Notice tells of something else to know: the working directory was removed, say, and where the
	// next command runs.
	Notice string `json:"notice,omitempty"`
	// TaskID is set for background tasks (and commands moved to the background).
	TaskID string `json:"task_id,omitempty"`
	// Input is "pipe" or "tty" for a background task started with stdin or tty.
	Input string `json:"input,omitempty"`
	// Leftover counts processes the command left running in the session.
	Leftover int `json:"leftover_processes,omitempty"`
}

// TaskOutputInput is the task_output tool's arguments.
type TaskOutputInput struct {
	TaskID    string `json:"task_id" jsonschema:"the id bash returned for a background task (task_id), or for a foreground command's output file (output_task_id)"`
	Block     bool   `json:"block,omitempty" jsonschema:"wait until the task ends (or the timeout passes) before returning"`
	Timeout   *int   `json:"timeout,omitempty" jsonschema:"milliseconds to wait when block is true; default 30000, at most 600000"`
	Offset    *int64 `json:"offset,omitempty" jsonschema:"read from this byte offset of the output (as next and output_bytes count it) instead of from where the previous read ended"`
	MaxOutput *int   `json:"max_output,omitempty" jsonschema:"the most characters of output to return; default: the server's (see the tool's description), at most 1048576"`
	Grep      string `json:"grep,omitempty" jsonschema:"return only the lines that match this regular expression (RE2 syntax, such as (?i)error|warn), from where the previous read ended or from offset"`
	Tail      *int   `json:"tail,omitempty" jsonschema:"return the last this many lines of the output (with grep: of the lines that match), at most 100000"`
}

// TaskOutput is the task_output tool's structured result.
type TaskOutput struct {
	TaskID   string `json:"task_id"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// OOMKilled is set when the kernel's OOM killer killed a process of the task.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// ForksRefused, CPUThrottledPeriods and CPUThrottledSeconds are the session's limits hit while
	// the task ran, once it has ended (see BashOutput).
	ForksRefused        int64   `json:"forks_refused,omitempty"`
	CPUThrottledPeriods int64   `json:"cpu_throttled_periods,omitempty"`
	CPUThrottledSeconds float64 `json:"cpu_throttled_seconds,omitempty"`
	// WaitingForInput is set while a process of the task is blocked reading its input: answer it
	// with write_stdin.
	WaitingForInput bool `json:"waiting_for_input,omitempty"`
	// Output is the output read: what the task wrote since the previous read (or from offset), at
	// most max_output characters, unless PendingBytes says more is there; with grep, the lines that
	// matched; with tail, the last lines.
	Output string `json:"output"`
	// Offset and Next delimit what was read in the task's output, in bytes. SkippedBytes of them
	// were not kept (the middle of an output larger than the session's output budget), and a line in
	// Output stands for them.
	Offset       int64 `json:"offset"`
	Next         int64 `json:"next"`
	SkippedBytes int64 `json:"skipped_bytes,omitempty"`
	// PendingBytes is output after next that this result did not hold (with grep: did not search):
	// the next task_output call continues there.
	PendingBytes int64 `json:"pending_bytes,omitempty"`
	// Lines counts the lines returned, with grep or tail.
	Lines int `json:"lines,omitempty"`
	// OutputBytes is the length of the task's whole output so far.
	OutputBytes int64 `json:"output_bytes"`
	// OutputFile holds the task's whole output (see BashOutput.FileMissingBytes for when it lacks its
	// middle).
	OutputFile       string `json:"output_file,omitempty"`
	FileMissingBytes int64  `json:"file_missing_bytes,omitempty"`
	// Input is "pipe" or "tty" for a task started with stdin or tty.
	Input string `json:"input,omitempty"`
	// Processes is the number of the task's processes still alive.
	Processes int `json:"processes"`
}

// WriteStdinInput is the write_stdin tool's arguments; the names follow Codex's tool of that name.
type WriteStdinInput struct {
	TaskID     string `json:"task_id" jsonschema:"the id of a background task started with stdin or tty"`
	Chars      string `json:"chars,omitempty" jsonschema:"what to type: text, with \\n for Enter, and control characters as JSON escapes: \\u0003 Ctrl-C, \\u0004 Ctrl-D, \\u001b Escape, \\u001a Ctrl-Z; empty only waits and reads; at most 65536 bytes"`
	CloseStdin bool   `json:"close_stdin,omitempty" jsonschema:"after writing, close the input of a task started with stdin (its end of input); on a tty send \\u0004 instead"`
	WaitMS     *int   `json:"wait_ms,omitempty" jsonschema:"milliseconds to wait for the answer; default 1000, at most 30000; it returns earlier when the task ends or waits for input again"`
	MaxOutput  *int   `json:"max_output,omitempty" jsonschema:"the most characters of output to return; default: the server's, at most 1048576"`
	Rows       *int   `json:"rows,omitempty" jsonschema:"resize the task's terminal to this many lines first (tty only)"`
	Cols       *int   `json:"cols,omitempty" jsonschema:"resize the task's terminal to this many characters wide first (tty only)"`
}

// WriteStdinOutput is the write_stdin tool's structured result: what task_output returns, and how
// much of the input the task took.
type WriteStdinOutput struct {
	TaskOutput
	// Written is how many bytes of chars the task took.
	Written int `json:"written"`
}

// TaskStopInput is the task_stop tool's arguments.
type TaskStopInput struct {
	TaskID string `json:"task_id" jsonschema:"a background task's task_id, or a foreground command's output_task_id to stop what it left running"`
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
	// OutputFile holds the task's whole output.
	OutputFile string `json:"output_file,omitempty"`
	// Input is "pipe" or "tty" for a task started with stdin or tty; WaitingForInput is set while
	// it is blocked reading that input.
	Input           string `json:"input,omitempty"`
	WaitingForInput bool   `json:"waiting_for_input,omitempty"`
}

// LeftoverEntry describes processes a finished foreground command left running. Pids are as the
// session's commands see them (in its PID namespace, where it has one): kill takes them there.
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

// tools are the tools that act on a session, described for one protocol era, without their schemas.
type tools struct {
	bash, output, stop, list, input *mcp.Tool
}

// taskTools describes the bash, task_output, task_stop, task_list and write_stdin tools for sc, with
// maxOutput characters of output per result by default.
func taskTools(l reaper.Limits, maxOutput int, sc scope) tools {
	var t tools
	t.bash = &mcp.Tool{
		Name: "bash",
		Description: fmt.Sprintf(`Run a shell command (bash -c) in %[1]s and return its output and exit code.
The working directory persists between commands of %[2]s: the next command starts where this command's own shell was when it ended (also when it ends with exec, sets its own EXIT trap, or removes its directory: the result then says where the next command runs). A cd made inside another program does not carry over: a script, a subshell, bash -c, or the program exec replaces the shell with (after cd /tmp; exec bash -c 'cd /var; make' the next command starts in /tmp). Environment variables do not persist.
Foreground commands return as soon as the command itself exits, even if it left processes running (such as "server &"); those stay in %[2]s. Timeout defaults to 120000 ms, at most 600000 ms; on timeout the command and everything it started are killed.
Output: a result holds at most max_output characters of it (default %[3]d, at most 1048576): all of it, or its head and tail with a line between them that says how many characters and lines were left out (the line counts within max_output). The whole output of every command, foreground or background, is kept in a file (output_file): read any part of it with task_output, task_id = output_task_id (offset, grep, tail), instead of running the command again. %[4]s
Input is /dev/null unless asked. For interactive programs (a REPL such as python3 -i, a prompt or confirmation, an installer, a debugger) start a background task with stdin=true (a pipe) or tty=true (a terminal: for programs that insist on one, such as password prompts, or that change what they print without one) and answer it with write_stdin; task_output and task_list say when it waits for input. tty also works in the foreground, for output that needs a terminal.
With run_in_background the command becomes a task: you get its task_id at once; read its output with task_output (block=true waits for it to end, instead of polling; grep and tail for logs), stop it with task_stop, see all with task_list. At most %[5]d background tasks run at once%[6]s.
Everything %[1]s starts, background tasks and escaped or detached processes included, is killed when %[2]s ends%[7]s.`,
			sc.in, sc.the, maxOutput, budgetText(l, sc.the), l.MaxTasks, bgTimeoutText(l.BackgroundTimeout), sc.ends),
		Annotations: &mcp.ToolAnnotations{Title: "Run a shell command", OpenWorldHint: ptr(true)},
	}
	t.output = &mcp.Tool{
		Name: "task_output",
		Description: fmt.Sprintf(`Read a task's output: a background task's (task_id), or a foreground command's whole output (its output_task_id). Returns the task's status, its exit code once it has ended, whether it is waiting for input, and output, at most max_output characters (default %d, at most 1048576):
- by default, what it wrote since the previous read; pending_bytes says how much more the next call returns;
- with offset, from that byte offset instead (offset, next, pending_bytes and output_bytes count bytes; max_output counts characters);
- with grep, only the lines that match a regular expression (RE2 syntax, such as (?i)error|warn), from the previous read or offset on: for logs, call it again to follow them; one call searches at most %s for at most %v, and says where the next one continues;
- with tail, the last N lines (with grep: the last N that match).
With block=true it waits until the task ends (timeout defaults to 30000 ms, at most 600000 ms) instead of polling. A finished background task leaves task_list once its output has been read to the end; its file stays readable until newer output needs the room.`, maxOutput, textfit.ByteSize(reaper.MaxScanBytes), reaper.ScanTime),
		Annotations: &mcp.ToolAnnotations{Title: "Read a task's output", ReadOnlyHint: true},
	}
	t.stop = &mcp.Tool{
		Name:        "task_stop",
		Description: fmt.Sprintf(`Stop a background task (its task_id), or what a finished foreground command left running, such as "server &" (its output_task_id; task_list lists such leftovers): the whole process tree, children and detached or escaped processes included, gets %s. Returns the final status, the exit code, and how many processes it ended. The output stays readable with task_output.`, graceText(l.Grace)),
		Annotations: &mcp.ToolAnnotations{Title: "Stop a task and what it left running", DestructiveHint: ptr(true), IdempotentHint: true},
	}
	t.list = &mcp.Tool{
		Name:        "task_list",
		Description: fmt.Sprintf("List %s's background tasks (id, command, status, exit code, times, live process count, output file, whether it waits for input) and any processes left running by finished foreground commands, with their pids as your commands see them (kill <pid> works on them).", sc.the),
		Annotations: &mcp.ToolAnnotations{Title: "List background tasks", ReadOnlyHint: true},
	}
	t.input = &mcp.Tool{
		Name: "write_stdin",
		Description: fmt.Sprintf(`Type into a background task started with stdin=true or tty=true, and return the output that follows: drive a REPL (python3 -i), answer a prompt (read -p, a confirmation, a password on a tty), an installer, a debugger.
chars is written as it is: end a line with \n (Enter); control characters are JSON escapes: \u0003 Ctrl-C, \u0004 Ctrl-D, \u001b Escape, \u001a Ctrl-Z. On a tty they act as keys do (Ctrl-C interrupts the program in the foreground, Ctrl-D at the start of a line ends its input) and the terminal echoes what is typed; on a pipe they are plain bytes, and close_stdin ends the input. Empty chars only waits and reads.
It then waits up to wait_ms (default 1000, at most 30000) and returns early when the task ends, or once the task waits for input again and its output has stayed quiet for 60 ms after that. It returns what the task wrote since the previous read (at most max_output characters, default %d), its status and waiting_for_input; rows and cols resize a tty.`, maxOutput),
		Annotations: &mcp.ToolAnnotations{Title: "Write to a task's input", OpenWorldHint: ptr(true)},
	}
	return t
}

// budgetText says what happens to output files at the session's budget.
func budgetText(l reaper.Limits, the string) string {
	return fmt.Sprintf("The output files of %s share %s (reaper's state, usually memory): when they fill it, the oldest finished commands' files are removed first, and a command whose own output does not fit keeps its head and its last %s, with a line in the file for the middle left out.", the, textfit.ByteSize(l.OutputBudget), textfit.ByteSize(l.OutputTail))
}

// addTools adds the tools of the session era (a session is the connection, or an HTTP session) to
// the session server.
func (s *Server) addTools(l reaper.Limits) {
	t := taskTools(l, s.maxOutput, scope{in: "this session", the: "the session",
		ends: fmt.Sprintf(" (over HTTP, also after %v without requests)", s.opts.IdleTimeout)})
	addTool(s.mcp, t.bash, inSession(s, s.bash))
	addTool(s.mcp, t.output, inSession(s, s.taskOutput))
	addTool(s.mcp, t.stop, inSession(s, s.taskStop))
	addTool(s.mcp, t.list, inSession(s, s.taskList))
	addTool(s.mcp, t.input, inSession(s, s.writeStdin))
}

// inSession adapts a tool handler to the session era: the session is the one the call came on. Over
// stdio the call is cut short when the client's input ends, and not begun after (see untilInputEnds).
func inSession[In, Out any](s *Server, h func(context.Context, *mcp.CallToolRequest, *session, In) (*mcp.CallToolResult, Out, error)) func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error) {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var none Out
		ctx, release, err := untilInputEnds(ctx)
		if err != nil {
			return nil, none, err
		}
		defer release()
		st, err := s.track(req.Session, owner(req), requestVersion(req)), errShuttingDown // made at its first request, normally
		if st != nil {
			err = s.open(ctx, st)
		}
		if errors.Is(context.Cause(ctx), errInputEnded) {
			return nil, none, fmt.Errorf("not run: %w", errInputEnded) // the input ended while its session opened
		}
		if err != nil {
			return nil, none, err
		}
		res, out, err := h(ctx, req, st, in)
		if err != nil && errors.Is(context.Cause(ctx), errInputEnded) {
			err = fmt.Errorf("cut short: %w", errInputEnded)
		}
		return res, out, nextStep(err)
	}
}

// nextStep adds to a tool's error what the agent can do about it, where reaper's own error does not
// say it in the tools' terms.
func nextStep(err error) error {
	if errors.Is(err, reaper.ErrUnknownTask) {
		return fmt.Errorf("%w; task_list lists the ids of the tasks there are, and of the commands that left processes running", err)
	}
	return err
}

func (s *Server) taskStop(ctx context.Context, req *mcp.CallToolRequest, st *session, in TaskStopInput) (*mcp.CallToolResult, TaskStopOutput, error) {
	ti, rep, err := st.rs.Stop(ctx, in.TaskID)
	if ti.ID == "" {
		return nil, TaskStopOutput{}, err
	}
	out := TaskStopOutput{TaskID: ti.ID, Status: string(ti.Status), Killed: rep.Total()}
	if ti.Status.Terminal() {
		out.ExitCode = ptr(ti.ExitCode)
	}
	msg := stopText(ti, rep.Total())
	if err != nil {
		msg += " Warning: " + err.Error()
	}
	return text(msg), out, nil
}

// stopText says what task_stop did to ti, ending killed processes, and where its output is.
func stopText(ti reaper.TaskInfo, killed int) string {
	var b strings.Builder
	what, ended := "Task", "had ended"
	switch {
	case ti.Background && ti.Status == reaper.Killed:
		fmt.Fprintf(&b, "Task %s stopped; %d process(es) ended.", ti.ID, killed)
	case !ti.Background:
		what, ended = "Command", "had exited"
		fallthrough
	default:
		fmt.Fprintf(&b, "%s %s %s (%s, exit code %d); ", what, ti.ID, ended, ti.Status, ti.ExitCode)
		if killed == 0 {
			b.WriteString("nothing it started was running.")
		} else {
			fmt.Fprintf(&b, "%d process(es) it left running ended.", killed)
		}
	}
	fmt.Fprintf(&b, " Its output stays readable with task_output task_id=%s.", ti.ID)
	return b.String()
}

func (s *Server) taskList(ctx context.Context, req *mcp.CallToolRequest, st *session, _ TaskListInput) (*mcp.CallToolResult, TaskListOutput, error) {
	l := st.rs.List()
	out := TaskListOutput{Tasks: []TaskEntry{}, Leftovers: []LeftoverEntry{}}
	var b strings.Builder
	for _, t := range l.Tasks {
		e := TaskEntry{
			TaskID: t.ID, Command: t.Command, Description: t.Description, Status: string(t.Status),
			Started: t.Started.UTC().Format(time.RFC3339), Processes: t.Processes, OutputBytes: t.OutputBytes,
			OutputFile: t.File.Path, Input: t.Input, WaitingForInput: t.WaitingForInput,
		}
		if t.Status.Terminal() {
			e.ExitCode = ptr(t.ExitCode)
			e.Ended = t.Ended.UTC().Format(time.RFC3339)
		}
		out.Tasks = append(out.Tasks, e)
		fmt.Fprintf(&b, "%s  %-9s  %d proc  %s\n", t.ID, t.Status, t.Processes, oneLine(t.Command))
		if t.WaitingForInput {
			fmt.Fprintf(&b, "    waiting for input on its %s: answer with write_stdin\n", inputName(t.Input))
		}
		if t.File.Path != "" && !t.File.Removed {
			fmt.Fprintf(&b, "    output (%d bytes): %s\n", t.OutputBytes, t.File.Path)
		}
	}
	for _, lo := range l.Leftovers {
		out.Leftovers = append(out.Leftovers, LeftoverEntry{TaskID: lo.TaskID, Command: lo.Command, Pids: append([]int{}, lo.Pids...)})
		fmt.Fprintf(&b, "left running by %s (%s): pids %v; task_stop task_id=%s stops them\n", lo.TaskID, oneLine(lo.Command), lo.Pids, lo.TaskID)
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

func instructions(l reaper.Limits, maxOutput int, idle time.Duration) string {
	return fmt.Sprintf("reaper runs shell commands for this session with the bash tool, in the foreground or as background tasks (task_output, task_stop, task_list), and drives interactive programs on a pipe or a terminal (bash with stdin or tty, then write_stdin). "+
		"Every process the session starts is killed when the session ends (over HTTP, also after %v without requests), including detached ones; do not rely on anything outliving the session. "+
		"At most %d background tasks run at once. A result holds at most %d characters of output (max_output changes it); the whole output of every command is kept in a file that task_output reads (offset, grep, tail), within %s for the session.", idle, l.MaxTasks, maxOutput, textfit.ByteSize(l.OutputBudget))
}
