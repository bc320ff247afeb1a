package mcpserver

import (
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/mcptest"
)

// TestWriteStdin: write_stdin types into a task's pipe and returns what follows, returning early once
// the task waits for input again; it closes the pipe when asked; task_list and task_output say when the
// task waits. Its bad arguments are clear errors, and a server's --max-output is its default.
func TestWriteStdin(t *testing.T) {
	_, cs := connectWith(t, Options{MaxOutput: 50})
	var started BashOutput
	mcptest.CallInto(t, cs, "bash", map[string]any{"command": `while read -r line; do echo "got $line"; done; echo done`, "run_in_background": true, "stdin": true}, &started)
	if started.Input != "pipe" {
		t.Fatalf("started %+v", started)
	}
	var out WriteStdinOutput
	res := mcptest.CallInto(t, cs, "write_stdin", map[string]any{"task_id": started.TaskID, "chars": "one\ntwo\n", "wait_ms": 20000}, &out)
	if out.Output != "got one\ngot two\n" || out.Written != 8 || !out.WaitingForInput || !strings.Contains(mcptest.Text(res), "waiting for input on its pipe") {
		t.Errorf("after two lines: %+v\n%s", out, mcptest.Text(res))
	}
	var l TaskListOutput
	mcptest.CallInto(t, cs, "task_list", nil, &l)
	if len(l.Tasks) != 1 || !l.Tasks[0].WaitingForInput || l.Tasks[0].Input != "pipe" || l.Tasks[0].OutputFile == "" {
		t.Errorf("task_list: %+v", l.Tasks)
	}
	out = WriteStdinOutput{}
	mcptest.CallInto(t, cs, "write_stdin", map[string]any{"task_id": started.TaskID, "chars": strings.Repeat("x", 100) + "\n", "close_stdin": true, "wait_ms": 20000}, &out)
	if out.Status != "completed" || len(out.Output) != 50 || out.PendingBytes == 0 || out.WaitingForInput {
		t.Errorf("after the close, 50 characters at most: %+v", out)
	}
	var plain BashOutput
	mcptest.CallInto(t, cs, "bash", map[string]any{"command": "sleep 60", "run_in_background": true}, &plain)
	var tty BashOutput
	mcptest.CallInto(t, cs, "bash", map[string]any{"command": "cat", "run_in_background": true, "tty": true, "rows": 10}, &tty)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"write_stdin", map[string]any{"task_id": plain.TaskID, "chars": "x"}, "its input is /dev/null"},
		{"write_stdin", map[string]any{"task_id": tty.TaskID, "close_stdin": true}, "send Ctrl-D"},
		{"write_stdin", map[string]any{"task_id": tty.TaskID, "wait_ms": 30001}, "wait_ms must be between"},
		{"write_stdin", map[string]any{"task_id": tty.TaskID, "rows": 0}, "rows must be between"},
		{"write_stdin", map[string]any{"task_id": "t-0000000000000000"}, "unknown task"},
		{"bash", map[string]any{"command": "cat", "stdin": true}, "stdin needs run_in_background"},
		{"bash", map[string]any{"command": "true", "rows": 10}, "pass tty=true"},
	} {
		if res := mcptest.Call(t, cs, tc.tool, tc.args); !res.IsError || !strings.Contains(mcptest.Text(res), tc.want) {
			t.Errorf("%s %v: %s; want an error saying %q", tc.tool, tc.args, mcptest.Text(res), tc.want)
		}
	}
	// On a terminal the line discipline echoes, and ends lines with \r\n.
	out = WriteStdinOutput{}
	mcptest.CallInto(t, cs, "write_stdin", map[string]any{"task_id": tty.TaskID, "chars": "hi\n", "wait_ms": 20000}, &out)
	if out.Output != "hi\r\nhi\r\n" || out.Input != "tty" {
		t.Errorf("cat on a terminal: %q", out.Output)
	}
}
