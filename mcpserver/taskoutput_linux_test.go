package mcpserver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTaskOutputReads: task_output returns a finished task's output, up to the output limit, in one
// call: its head, a line for the dropped middle, its tail. Where the result's budget cannot carry
// it all (control characters cost six bytes each in JSON), each call says how much is pending, in
// the structured result and in the text, and the calls that follow return the rest, each from where
// the previous one ended, nothing lost or repeated.
func TestTaskOutputReads(t *testing.T) {
	const size, kept = 2000000, 1 << 20 // the default output limit keeps 1 MiB
	_, cs := connect(t)
	// finished starts a task that prints size bytes of char and waits for its end without reading it.
	finished := func(char string) string {
		t.Helper()
		var started BashOutput
		mcptest.CallInto(t, cs, "bash", map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' '%s'", size, char), "run_in_background": true}, &started)
		testutil.Eventually(t, "the task's end", func() bool {
			var l TaskListOutput
			mcptest.CallInto(t, cs, "task_list", nil, &l)
			for _, task := range l.Tasks {
				if task.TaskID == started.TaskID {
					return task.Status == "completed"
				}
			}
			t.Fatalf("task %s is not listed: %+v", started.TaskID, l)
			return false
		})
		return started.TaskID
	}
	read := func(id string) (TaskOutput, string) {
		t.Helper()
		var out TaskOutput
		res := mcptest.CallInto(t, cs, "task_output", map[string]any{"task_id": id}, &out)
		if res.IsError || out.Status != "completed" {
			t.Fatalf("task_output %s: %+v", id, res)
		}
		return out, res.Content[0].(*mcp.TextContent).Text
	}
	notice := fmt.Sprintf("[... %d bytes of output dropped ...]", size-kept)

	// Ordinary text: one call.
	out, text := read(finished("~"))
	if n := strings.Count(out.Output, "~"); n != kept || out.SkippedBytes != size-kept || out.Offset != 0 ||
		out.Next != size || out.PendingBytes != 0 || strings.Contains(text, "pending") || !strings.Contains(out.Output, notice) {
		t.Errorf("one read of a finished 2 MB task: %d '~', offset %d, next %d, skipped %d, pending %d",
			n, out.Offset, out.Next, out.SkippedBytes, out.PendingBytes)
	}

	// Control characters: a megabyte of them is six in JSON, so it takes several calls.
	id := finished("\\1")
	var next, skipped int64
	chars, calls := 0, 0
	for {
		calls++
		out, text := read(id)
		if out.Offset != next || out.Next <= out.Offset {
			t.Fatalf("call %d after %d: offset %d, next %d", calls, next, out.Offset, out.Next)
		}
		next = out.Next
		skipped += out.SkippedBytes
		chars += strings.Count(out.Output, "\x01")
		if out.PendingBytes == 0 {
			break
		}
		if want := fmt.Sprintf("[%d more bytes pending: call task_output again]", out.PendingBytes); !strings.Contains(text, want) {
			t.Errorf("call %d: %d bytes pending, and the text does not say %q", calls, out.PendingBytes, want)
		}
		if want := int64(kept - chars); out.PendingBytes != want {
			t.Errorf("call %d: %d bytes pending, want %d", calls, out.PendingBytes, want)
		}
		if calls > 20 {
			t.Fatalf("%d calls, still %d bytes pending", calls, out.PendingBytes)
		}
	}
	if chars != kept || skipped != size-kept || next != size || calls < 6 {
		t.Errorf("%d calls returned %d of the %d bytes kept and skipped %d, ending at %d of %d", calls, chars, kept, skipped, next, size)
	}
}
