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

func (s *Server) bash(ctx context.Context, req *mcp.CallToolRequest, st *session, in BashInput) (*mcp.CallToolResult, BashOutput, error) {
	timeout, err := millis("timeout", in.Timeout, defaultBashTimeoutMS)
	if err != nil {
		return nil, BashOutput{}, err
	}
	budget, err := s.budgetFor(in.MaxOutput)
	if err != nil {
		return nil, BashOutput{}, err
	}
	tty, err := termSize(in.TTY, in.Rows, in.Cols)
	if err != nil {
		return nil, BashOutput{}, err
	}
	if in.RunInBackground {
		ti, err := st.rs.StartWith(in.Command, reaper.StartOptions{Description: in.Description, Stdin: in.Stdin, TTY: tty})
		if err != nil {
			return nil, BashOutput{}, err
		}
		msg := fmt.Sprintf("Started background task %s. Read its output with task_output (block=true waits for it to end); stop it with task_stop.", ti.ID)
		if ti.Input != "" {
			msg += fmt.Sprintf(" Its input is a %s: type into it with write_stdin.", inputName(ti.Input))
		}
		return text(msg), BashOutput{Status: string(ti.Status), TaskID: ti.ID, Cwd: st.rs.Cwd(), Input: ti.Input}, nil
	}
	if in.Stdin {
		return nil, BashOutput{}, fmt.Errorf("stdin needs run_in_background: a foreground command cannot be written to while the call runs (start it in the background and use write_stdin)")
	}
	opts := reaper.RunOptions{Timeout: timeout, Description: in.Description, Budget: budget, TTY: tty}
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
	if err != nil && errors.Is(context.Cause(ctx), errInputEnded) {
		res.Notice = strings.TrimPrefix(res.Notice+"; "+errInputEnded.Error(), "; ")
	}
	txt := bashText(res, timeout, s.sessionLimits())
	out := BashOutput{
		// The text starts with the output: both share one copy of it.
		Output: txt[:len(res.Output)], Status: string(res.Status), TimedOut: res.TimedOut, OOMKilled: res.OOMKilled,
		ForksRefused: res.Hits.ForksRefused, CPUThrottledPeriods: res.Hits.Throttled, CPUThrottledSeconds: res.Hits.ThrottledTime.Seconds(),
		DroppedChars: res.DroppedChars, DroppedLines: res.DroppedLines, DroppedBytes: res.Dropped,
		OutputBytes: res.Total, OutputLines: res.Lines, OutputFile: res.File.Path, OutputTaskID: res.OutputID,
		FileMissingBytes: res.File.Missing, Cwd: res.Cwd, Notice: res.Notice, TaskID: res.TaskID, Leftover: res.Leftover,
	}
	if res.Status.Terminal() {
		out.ExitCode = ptr(res.ExitCode)
	}
	return text(txt), out, nil
}

// budgetFor returns the budget of a result of at most v characters of output (nil: the server's
// default), and refuses a v below 1; above MaxOutput it counts as MaxOutput.
func (s *Server) budgetFor(v *int) (reaper.Budget, error) {
	n := s.maxOutput
	if v != nil {
		if *v < 1 {
			return reaper.Budget{}, fmt.Errorf("max_output must be at least 1 character (at most %d), got %d", MaxOutput, *v)
		}
		n = *v
	}
	return outputBudget(n), nil
}

// maxTermSide bounds a terminal's rows and columns.
const maxTermSide = 1000

// termSize returns the terminal a call asks for (nil for none), checking its size.
func termSize(tty bool, rows, cols *int) (*reaper.TermSize, error) {
	if !tty {
		if rows != nil || cols != nil {
			return nil, fmt.Errorf("rows and cols size a terminal: pass tty=true with them, or leave them out")
		}
		return nil, nil
	}
	size := reaper.TermSize{Rows: reaper.DefaultRows, Cols: reaper.DefaultCols}
	for _, side := range []struct {
		name string
		v    *int
		to   *uint16
	}{{"rows", rows, &size.Rows}, {"cols", cols, &size.Cols}} {
		if side.v == nil {
			continue
		}
		if *side.v < 1 || *side.v > maxTermSide {
			return nil, fmt.Errorf("%s must be between 1 and %d, got %d", side.name, maxTermSide, *side.v)
		}
		*side.to = uint16(*side.v)
	}
	return &size, nil
}

// sessionLimits are the per-session limits in effect, as the results name them; zero for none.
type sessionLimits struct {
	memoryMax, pidsMax int64
	cpus               float64
}

func (s *Server) sessionLimits() sessionLimits {
	l := s.opts.Reaper.Containment().Limits
	return sessionLimits{memoryMax: l.MemoryMax, pidsMax: l.PidsMax, cpus: l.CPUs}
}

// limitTexts tell the agent which of the session's limits were hit while a command (what:
// "command", "task") ran: the OOM killer struck (oom), forks failed, CPU was held back. A limit is
// the session's: another of its tasks may have been the one that hit it.
func limitTexts(oom bool, h reaper.Hits, lim sessionLimits, what string) []string {
	var notes []string
	if oom && lim.memoryMax > 0 {
		notes = append(notes, fmt.Sprintf("killed by the out-of-memory killer: this session's processes together reached its memory limit of %s", textfit.ByteSize(lim.memoryMax)))
	} else if oom {
		notes = append(notes, "killed by the out-of-memory killer")
	}
	if h.ForksRefused > 0 {
		limit := "a limit on processes above the session's own"
		if lim.pidsMax > 0 {
			limit = fmt.Sprintf("its limit of %d (--pids-max)", lim.pidsMax)
		}
		notes = append(notes, fmt.Sprintf("fork failed: the session's processes reached %s; %d fork(s) refused while this %s ran", limit, h.ForksRefused, what))
	}
	if h.Throttled > 0 {
		limit := "a CPU limit above the session's own"
		if lim.cpus > 0 {
			limit = fmt.Sprintf("its CPU limit of %g CPUs (--cpu-max)", lim.cpus)
		}
		notes = append(notes, fmt.Sprintf("throttled: the session's processes used %s and were held back in %d period(s) of 100 ms, %v in all, while this %s ran",
			limit, h.Throttled, h.ThrottledTime.Round(time.Millisecond), what))
	}
	return notes
}

// bashText is the human-readable result of a foreground command: the output, then what else the
// agent should know, in brackets. It starts with res.Output.
func bashText(res reaper.Result, timeout time.Duration, lim sessionLimits) string {
	b, note := notedText(res.Output)
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
	for _, hit := range limitTexts(res.OOMKilled, res.Hits, lim, "command") {
		note("%s", hit)
	}
	if res.Dropped > 0 {
		note("%s", cutText(res))
	}
	if res.File.Missing > 0 {
		note("output_file lacks %d bytes of the middle: %s; it keeps the head and the last part", res.File.Missing, res.File.Cut)
	}
	if res.File.NoFile != "" {
		note("the whole output is not kept: %s", res.File.NoFile)
	}
	if res.Leftover > 0 {
		note("%d process(es) started by this command still run in this session; task_stop task_id=%s stops them, and the session's end kills them", res.Leftover, res.OutputID)
	}
	if res.Notice != "" {
		note("%s", res.Notice)
	}
	note("cwd: %s", res.Cwd)
	return b.String()
}

// notedText starts a result's text with output, ending it with a newline if it has none, and
// returns it with note, which adds a line of what else the agent should know, in brackets.
func notedText(output string) (_ *strings.Builder, note func(format string, args ...any)) {
	var b strings.Builder
	b.Grow(len(output) + 512)
	b.WriteString(output)
	if output != "" && !strings.HasSuffix(output, "\n") {
		b.WriteByte('\n')
	}
	return &b, func(format string, args ...any) { fmt.Fprintf(&b, "["+format+"]\n", args...) }
}

// cutText says what a result left out of a command's output, and where the whole output is.
func cutText(res reaper.Result) string {
	s := fmt.Sprintf("output cut: %d characters (%d of %d lines) left out of the middle", res.DroppedChars, res.DroppedLines, res.Lines)
	if res.File.Path == "" || res.File.Removed {
		return s
	}
	return s + fmt.Sprintf("; the whole output (%d bytes) is in %s: read parts with task_output task_id=%s and offset, grep or tail", res.Total, res.File.Path, res.OutputID)
}
