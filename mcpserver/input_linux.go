package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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
