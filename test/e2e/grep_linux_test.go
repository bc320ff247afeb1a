package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The attack of a grep pattern: 4 KB of nested optional repetitions, over a million instructions. It
// made a task_output call take 206 s of CPU on 20 KB of output, holding the output's lock throughout.
var pathological = strings.Repeat("(a?){1000}", 409) + "z"

// slowGrep is the costliest kind of pattern reaper runs (cost 993, the limit being 1000): on lines of
// a's, several milliseconds a line, so that a grep of a few MB takes seconds of CPU until its work
// limit stops it.
var slowGrep = strings.Repeat("[ab]?", 495) + "$z"

// linesOfA is a command that prints n lines of 999 a's.
func linesOfA(n int) string {
	return "head -c " + strconv.Itoa(n*1000) + " /dev/zero | tr '\\0' a | fold -w 999 | head -n " + strconv.Itoa(n)
}

// TestGrepPatternCost: a pattern whose cost is out of bounds, the attack's above all, is refused at
// once with an error that says what to change, over stdio and HTTP; the session goes on working.
func TestGrepPatternCost(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			var cs *mcp.ClientSession
			if transport == "stdio" {
				cs, _, _ = connectStdio(t, cgroupArgs(t)...)
			} else {
				cs = startHTTP(t, cgroupArgs(t)...).connect(t)
			}
			id := bash(t, cs, "seq 100000").OutputTaskID
			for _, tc := range []struct{ grep, want string }{
				{pathological, "too costly"},
				{strings.Repeat("(a?){100}", 11), "the limit is 1000"},
				{strings.Repeat("a", 4097), "the limit is 4096"},
			} {
				start := time.Now()
				res := callTool(t, cs, "task_output", map[string]any{"task_id": id, "grep": tc.grep})
				text := textOf(res)
				if !res.IsError || !strings.Contains(text, tc.want) || strings.Contains(text, "99999") {
					t.Errorf("a grep of %.30q...: error %v, %q; want an error that says %q", tc.grep, res.IsError, text, tc.want)
				}
				t.Logf("a grep of %.30q... was refused in %v: %s", tc.grep, time.Since(start).Round(time.Millisecond), text)
			}
			var out mcptest.OutputResult
			decode(t, callTool(t, cs, "task_output", map[string]any{"task_id": id, "grep": "^9999[0-9]$"}), &out)
			if out.Lines != 10 || !strings.HasPrefix(out.Output, "99990\n") {
				t.Errorf("a grep after the refused ones: %+v", out)
			}
		})
	}
}

// grepUnderWay starts a slow grep of task id's output in cs, and returns once the server (pid) is
// searching: it has used a second of CPU since. The grep's result, or its error, arrives on the
// channel.
func grepUnderWay(t *testing.T, cs *mcp.ClientSession, pid int, id string) <-chan error {
	t.Helper()
	before := cpuTime(t, pid)
	done := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_output", Arguments: map[string]any{"task_id": id, "grep": slowGrep, "offset": 0}})
		if err == nil && res.IsError {
			err = &toolError{textOf(res)}
		}
		if err == nil {
			err = &toolResult{textOf(res)}
		}
		done <- err
	}()
	testutil.Eventually(t, "the grep under way (a second of the server's CPU)", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the grep ended before it was seen searching: %v", err)
		default:
		}
		return cpuTime(t, pid)-before > time.Second
	})
	return done
}

type toolError struct{ text string }

func (e *toolError) Error() string { return "tool error: " + e.text }

type toolResult struct{ text string }

func (r *toolResult) Error() string { return "result: " + r.text }

// searching returns the CPU the server pid uses over the next second, as a share of a core.
func searching(t *testing.T, pid int) float64 {
	before := cpuTime(t, pid)
	time.Sleep(time.Second)
	return float64(cpuTime(t, pid)-before) / float64(time.Second)
}

// TestDeleteDuringGrep: a DELETE of a session whose grep is searching is answered as soon as any
// other (within a second); the session's processes die within its grace period, the grep stops, and
// the server serves on.
func TestDeleteDuringGrep(t *testing.T) {
	p := place(t, "")
	r := startHTTP(t, append(p.args(), "--grace", grace.String())...)
	server := serverOf(t, r.cmd.Process.Pid)
	cs := r.connect(t)
	file, ps := hostile(t, cs)
	id := bash(t, cs, linesOfA(3000)).OutputTaskID
	grepped := grepUnderWay(t, cs, server, id)

	code, took := r.deleteSession(t, cs.ID())
	t.Logf("the DELETE during the grep: %d after %v", code, took.Round(time.Millisecond))
	if code != http.StatusNoContent || took > time.Second {
		t.Errorf("the DELETE during a grep: %d after %v, want it answered within a second", code, took)
	}
	testutil.AwaitDead(t, ps, grace+time.Second)
	if left := survivors(t, file, ps); len(left) > 0 {
		t.Errorf("survivors: %v", left)
	}
	select {
	case err := <-grepped:
		t.Logf("the grep, once its session ended: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the grep of a deleted session had not returned a minute later")
	}
	if share := searching(t, server); share > 0.5 {
		t.Errorf("the server used %.0f%% of a core after the session ended: the grep searches on", share*100)
	}
	if res := bash(t, r.connect(t), "echo still here"); res.Output != "still here\n" {
		t.Errorf("a new session after the DELETE: %+v", res)
	}
}

// TestSIGTERMDuringGrep: SIGTERM while a session's grep searches ends reaper with a full teardown,
// on time: the processes within the grace period, reaper within seconds.
func TestSIGTERMDuringGrep(t *testing.T) {
	p := place(t, "")
	r := startHTTP(t, append(p.args(), "--grace", grace.String())...)
	cs := r.connect(t)
	file, ps := hostile(t, cs)
	id := bash(t, cs, linesOfA(3000)).OutputTaskID
	grepUnderWay(t, cs, serverOf(t, r.cmd.Process.Pid), id)
	start := time.Now()
	endsInTeardown(t, r, syscall.SIGTERM, file, ps, p)
	t.Logf("reaper exited %v after SIGTERM, during a grep", time.Since(start).Round(time.Millisecond))
}

// TestOutputFlowsDuringGrep: while a grep searches a task's output, the task's output goes on being
// read: the task writes 20 MB more (three hundred pipes' worth) and ends before the grep does. The
// grep then stops at its limit and says where the next call continues.
func TestOutputFlowsDuringGrep(t *testing.T) {
	cs, cmd, _ := connectStdio(t, cgroupArgs(t)...)
	server := serverOf(t, cmd.Process.Pid)
	bash(t, cs, "true")
	gate := filepath.Join(t.TempDir(), "go")
	script := linesOfA(3000) + "; while [ ! -e " + gate + " ]; do sleep 0.05; done; head -c 20000000 /dev/zero | tr '\\0' x; echo; echo done"
	id := taskID(t, callTool(t, cs, "bash", map[string]any{"command": script, "run_in_background": true}))
	read := func() mcptest.OutputResult {
		var out mcptest.OutputResult
		decode(t, callTool(t, cs, "task_output", map[string]any{"task_id": id, "offset": 0, "max_output": 1}), &out)
		return out
	}
	testutil.Eventually(t, "the task's first 3 MB", func() bool { return read().OutputBytes >= 3000*1000 })
	grepped := grepUnderWay(t, cs, server, id)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the task's end while the grep searches", func() bool {
		select {
		case err := <-grepped:
			t.Fatalf("the grep ended (%v) before the task did: its output was held up", err)
		default:
		}
		return read().Status == "completed"
	})
	if n := read().OutputBytes; n != 3000*1000+20000000+6 {
		t.Errorf("the task's output: %d bytes", n)
	}
	select {
	case err := <-grepped:
		res, ok := err.(*toolResult)
		if !ok || !strings.Contains(res.text, "the search stopped at its") || !strings.Contains(res.text, "call task_output again to continue there") {
			t.Errorf("the slow grep: %v; want a result that says where it stopped", err)
		}
		t.Logf("the slow grep: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the grep had not returned within two minutes")
	}
}
