package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxTail bounds task_output's tail. A grep pattern's bounds, and those of the search, are reaper's
// (reaper.CompilePattern, reaper.Session.Output).
const maxTail = 100000

func (s *Server) taskOutput(ctx context.Context, req *mcp.CallToolRequest, st *session, in TaskOutputInput) (*mcp.CallToolResult, TaskOutput, error) {
	wait, err := millis("timeout", in.Timeout, defaultWaitMS)
	if err != nil {
		return nil, TaskOutput{}, err
	}
	opts, err := s.readOptions(in)
	if err != nil {
		return nil, TaskOutput{}, err
	}
	if in.Block {
		if _, err := st.rs.Wait(ctx, in.TaskID, wait); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, reaper.ErrUnknownTask) {
			return nil, TaskOutput{}, err
		}
	}
	ti, c, err := st.rs.Output(ctx, in.TaskID, opts)
	if err != nil {
		return nil, TaskOutput{}, err
	}
	out, txt := s.outputResult(ti, c, in.Grep != "" || in.Tail != nil)
	return text(txt), out, nil
}

// readOptions checks task_output's arguments and makes them a read: the grep pattern compiled once.
func (s *Server) readOptions(in TaskOutputInput) (reaper.OutputOptions, error) {
	budget, err := s.budgetFor(in.MaxOutput)
	if err != nil {
		return reaper.OutputOptions{}, err
	}
	opts := reaper.OutputOptions{Budget: budget, Offset: in.Offset}
	if in.Offset != nil && *in.Offset < 0 {
		return opts, fmt.Errorf("offset must not be negative, got %d", *in.Offset)
	}
	if in.Tail != nil {
		if *in.Tail < 1 || *in.Tail > maxTail {
			return opts, fmt.Errorf("tail must be between 1 and %d lines, got %d", maxTail, *in.Tail)
		}
		if in.Offset != nil {
			return opts, fmt.Errorf("tail reads the end of the output, which takes no offset: leave offset out, or read from offset without tail")
		}
		opts.Tail = *in.Tail
	}
	if in.Grep != "" {
		if opts.Grep, err = reaper.CompilePattern(in.Grep); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// outputResult is a read of a task's output as task_output and write_stdin return it: the structured
// result, and the text, which starts with the output (both share one copy of it).
func (s *Server) outputResult(ti reaper.TaskInfo, c reaper.Chunk, lines bool) (TaskOutput, string) {
	out := TaskOutput{
		TaskID: ti.ID, Status: string(ti.Status), OOMKilled: ti.OOMKilled, WaitingForInput: ti.WaitingForInput,
		ForksRefused: ti.Hits.ForksRefused, CPUThrottledPeriods: ti.Hits.Throttled, CPUThrottledSeconds: ti.Hits.ThrottledTime.Seconds(),
		Offset: c.Offset, Next: c.Next, SkippedBytes: c.Skipped, PendingBytes: c.Pending, Lines: c.Lines,
		OutputBytes: c.Total, OutputFile: ti.File.Path, FileMissingBytes: ti.File.Missing, Input: ti.Input,
		Processes: ti.Processes,
	}
	b, note := notedText(c.Text) // a line in the text stands for skipped bytes
	switch {
	case c.Stopped != "":
		note("%d line(s); the search stopped at %s: %d more bytes after byte %d not searched: call task_output again to continue there, or use a narrower pattern", c.Lines, c.Stopped, c.Pending, c.Next)
	case lines && c.Pending > 0:
		note("%d line(s); %d more bytes after byte %d not searched or not returned: call task_output again to continue there", c.Lines, c.Pending, c.Next)
	case lines:
		note("%d line(s)", c.Lines)
	case c.Pending > 0:
		note("%d more bytes pending: call task_output again", c.Pending)
	}
	if ti.Status.Terminal() {
		out.ExitCode = ptr(ti.ExitCode)
		note("task %s %s, exit code %d", ti.ID, ti.Status, ti.ExitCode)
		for _, hit := range limitTexts(ti.OOMKilled, ti.Hits, s.sessionLimits(), "task") {
			note("%s", hit)
		}
	} else {
		note("task %s running for %v, %d process(es)%s", ti.ID, time.Since(ti.Started).Round(time.Second), ti.Processes, inputText(ti))
	}
	if ti.File.Missing > 0 {
		note("its output file lacks %d bytes of the middle: %s", ti.File.Missing, ti.File.Cut)
	}
	if ti.File.Path != "" && !ti.File.Removed {
		note("whole output (%d bytes): %s", c.Total, ti.File.Path)
	}
	txt := b.String()
	out.Output = txt[:len(c.Text)]
	return out, txt
}

// inputText says, after a running task's status, what its input is and whether it waits for it.
func inputText(ti reaper.TaskInfo) string {
	switch {
	case ti.WaitingForInput:
		return fmt.Sprintf("; waiting for input on its %s: answer with write_stdin", inputName(ti.Input))
	case ti.Input != "":
		return fmt.Sprintf("; its input is a %s (write_stdin)", inputName(ti.Input))
	}
	return ""
}

func inputName(kind string) string {
	if kind == "tty" {
		return "terminal"
	}
	return kind
}

// write_stdin's wait for an answer, in milliseconds.
const (
	defaultInputWaitMS = 1000
	maxInputWaitMS     = 30000
)

// writeStdin writes to a task's input, waits for the answer and returns it as task_output would. An
// input the task did not take whole (it stopped reading) is said in the result, not as an error: what
// the task did take, and its output, are worth having.
func (s *Server) writeStdin(ctx context.Context, req *mcp.CallToolRequest, st *session, in WriteStdinInput) (*mcp.CallToolResult, WriteStdinOutput, error) {
	wait := defaultInputWaitMS
	if in.WaitMS != nil {
		wait = *in.WaitMS
	}
	if wait < 0 || wait > maxInputWaitMS {
		return nil, WriteStdinOutput{}, fmt.Errorf("wait_ms must be between 0 and %d, got %d", maxInputWaitMS, wait)
	}
	budget, err := s.budgetFor(in.MaxOutput)
	if err != nil {
		return nil, WriteStdinOutput{}, err
	}
	opts := reaper.InputOptions{Close: in.CloseStdin, Wait: time.Duration(wait) * time.Millisecond}
	if in.Rows != nil || in.Cols != nil {
		// A size left out keeps its default: a caller that resizes says both.
		if opts.Size, err = termSize(true, in.Rows, in.Cols); err != nil {
			return nil, WriteStdinOutput{}, err
		}
	}
	// The write waits for the task to take the input within the call's wait, at least a second.
	opts.Timeout = max(opts.Wait, time.Second)
	n, err := st.rs.WriteInput(ctx, in.TaskID, []byte(in.Chars), opts)
	stalled := errors.Is(err, reaper.ErrInputStalled)
	if err != nil && !stalled {
		return nil, WriteStdinOutput{}, err
	}
	ti, c, rerr := st.rs.Output(ctx, in.TaskID, reaper.OutputOptions{Budget: budget})
	if rerr != nil {
		return nil, WriteStdinOutput{}, rerr
	}
	out, txt := s.outputResult(ti, c, false)
	if stalled {
		txt += fmt.Sprintf("[input not all written: %v]\n", err)
	}
	return text(txt), WriteStdinOutput{TaskOutput: out, Written: n}, nil
}
