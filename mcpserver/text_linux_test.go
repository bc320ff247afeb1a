package mcpserver

import (
	"testing"

	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
	"github.com/cgreaper/reaper/reaper"
)

// TestStopText: what task_stop says, for a foreground command, a stopped task and a task that had
// ended, with and without processes to end.
func TestStopText(t *testing.T) {
	const tail = " Its output stays readable with task_output task_id=t1."
	for _, c := range []struct {
		ti     reaper.TaskInfo
		killed int
		want   string
	}{
		{reaper.TaskInfo{ID: "t1", Status: reaper.Completed}, 0, "Command t1 had exited (completed, exit code 0); nothing it started was running."},
		{reaper.TaskInfo{ID: "t1", Status: reaper.Killed, ExitCode: 137}, 2, "Command t1 had exited (killed, exit code 137); 2 process(es) it left running ended."},
		{reaper.TaskInfo{ID: "t1", Background: true, Status: reaper.Killed}, 3, "Task t1 stopped; 3 process(es) ended."},
		{reaper.TaskInfo{ID: "t1", Background: true, Status: reaper.Failed, ExitCode: 1}, 0, "Task t1 had ended (failed, exit code 1); nothing it started was running."},
		{reaper.TaskInfo{ID: "t1", Background: true, Status: reaper.Completed}, 1, "Task t1 had ended (completed, exit code 0); 1 process(es) it left running ended."},
	} {
		if got := stopText(c.ti, c.killed); got != c.want+tail {
			t.Errorf("stopText(%+v, %d) = %q, want %q", c.ti, c.killed, got, c.want+tail)
		}
	}
}

// TestArgumentsText: a refusal names the required arguments first, each in the order of its name.
func TestArgumentsText(t *testing.T) {
	want := "bash takes command (required), workspace (required), cols, description, max_output, rows, run_in_background, stdin, timeout, tty; its input schema gives their types and meaning"
	if got := argumentsText("bash", sdkfix.SchemaFor[WorkspaceBashInput]()); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := argumentsText("task_list", sdkfix.SchemaFor[TaskListInput]()); got != "task_list takes no arguments" {
		t.Errorf("got %q", got)
	}
}
