package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTaskOutputReads: task_output reads a finished task's output from its file, at most max_output
// characters a call (the server's default unless the call says), each call from where the previous
// ended, nothing lost or repeated; where the result's JSON budget cannot carry that many characters
// (control characters cost six bytes each), each call says how much is pending, in the structured
// result and in the text. grep and tail select lines; a bad pattern is a clear error.
func TestTaskOutputReads(t *testing.T) {
	const size = 2000000
	_, cs := connect(t)
	// finished starts a task that runs command and waits for its end without reading it.
	finished := func(command string) string {
		t.Helper()
		var started BashOutput
		mcptest.CallInto(t, cs, "bash", map[string]any{"command": command, "run_in_background": true}, &started)
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
	read := func(args map[string]any) (TaskOutput, string) {
		t.Helper()
		var out TaskOutput
		res := mcptest.CallInto(t, cs, "task_output", args, &out)
		if res.IsError || out.Status != "completed" {
			t.Fatalf("task_output %v: %+v", args, res)
		}
		return out, res.Content[0].(*mcp.TextContent).Text
	}
	fill := func(char string, n int) string { return fmt.Sprintf("head -c %d /dev/zero | tr '\\0' '%s'", n, char) }

	// Ordinary text: the default, then the most a call may ask for.
	id := finished(fill("~", size))
	out, text := read(map[string]any{"task_id": id})
	if n := strings.Count(out.Output, "~"); n != DefaultMaxOutput || out.Next != DefaultMaxOutput || out.PendingBytes != size-DefaultMaxOutput ||
		out.OutputBytes != size || !strings.HasSuffix(out.OutputFile, id+".out") || !strings.Contains(text, "more bytes pending") {
		t.Errorf("a default read of a finished 2 MB task: %d '~', next %d, pending %d, file %q", n, out.Next, out.PendingBytes, out.OutputFile)
	}
	out, _ = read(map[string]any{"task_id": id, "max_output": 2 * MaxOutput})
	if n := strings.Count(out.Output, "~"); n != MaxOutput || out.Offset != DefaultMaxOutput || out.Next != DefaultMaxOutput+MaxOutput {
		t.Errorf("a read of max_output above the ceiling: %d '~', offset %d, next %d", n, out.Offset, out.Next)
	}

	// Control characters: a megabyte of them is six in JSON, so it takes several calls.
	id = finished(fill("\\1", 1000000))
	var next int64
	chars, calls := 0, 0
	for {
		calls++
		out, text := read(map[string]any{"task_id": id, "max_output": MaxOutput})
		if out.Offset != next || out.Next <= out.Offset || out.SkippedBytes != 0 {
			t.Fatalf("call %d after %d: offset %d, next %d, skipped %d", calls, next, out.Offset, out.Next, out.SkippedBytes)
		}
		next = out.Next
		chars += strings.Count(out.Output, "\x01")
		if out.PendingBytes == 0 {
			break
		}
		if want := fmt.Sprintf("[%d more bytes pending: call task_output again]", out.PendingBytes); !strings.Contains(text, want) {
			t.Errorf("call %d: %d bytes pending, and the text does not say %q", calls, out.PendingBytes, want)
		}
		if want := int64(1000000 - chars); out.PendingBytes != want {
			t.Errorf("call %d: %d bytes pending, want %d", calls, out.PendingBytes, want)
		}
		if calls > 20 {
			t.Fatalf("%d calls, still %d bytes pending", calls, out.PendingBytes)
		}
	}
	if chars != 1000000 || next != 1000000 || calls < 6 {
		t.Errorf("%d calls returned %d of the 1000000 bytes, ending at %d", calls, chars, next)
	}

	// Lines: grep and tail, from a task and from a foreground command's file.
	id = finished("seq 100000")
	if out, text := read(map[string]any{"task_id": id, "grep": "^9999[0-9]$|^12345$"}); out.Output != "12345\n99990\n99991\n99992\n99993\n99994\n99995\n99996\n99997\n99998\n99999\n" ||
		out.Lines != 11 || !strings.Contains(text, "[11 line(s)]") {
		t.Errorf("grep: %q, %d lines; text %q", out.Output, out.Lines, text)
	}
	if out, _ := read(map[string]any{"task_id": id, "tail": 3}); out.Output != "99998\n99999\n100000\n" || out.Lines != 3 {
		t.Errorf("tail 3: %q", out.Output)
	}
	var fg BashOutput
	mcptest.CallInto(t, cs, "bash", map[string]any{"command": "seq 100000"}, &fg)
	if fg.OutputTaskID == "" || fg.OutputFile == "" || fg.OutputBytes != 588895 || fg.OutputLines != 100000 || fg.DroppedLines == 0 {
		t.Fatalf("a foreground command of 100000 lines: %+v", fg)
	}
	if out, _ := read(map[string]any{"task_id": fg.OutputTaskID, "tail": 2, "grep": "7$"}); out.Output != "99987\n99997\n" {
		t.Errorf("the last two lines ending in 7 of a foreground command's output: %q", out.Output)
	}
	for args, want := range map[string]string{
		`{"grep": "a(b"}`:          "RE2",
		`{"tail": 0}`:              "tail must be between",
		`{"tail": 2, "offset": 3}`: "takes no offset",
		`{"max_output": 0}`:        "max_output must be at least 1",
		`{"offset": -1}`:           "offset must not be negative",
	} {
		var a map[string]any
		json.Unmarshal([]byte(args), &a)
		a["task_id"] = id
		if res := mcptest.Call(t, cs, "task_output", a); !res.IsError || !strings.Contains(mcptest.Text(res), want) {
			t.Errorf("task_output %s: %s; want an error saying %q", args, mcptest.Text(res), want)
		}
	}
}
