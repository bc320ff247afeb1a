package e2e

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
)

// What agents need from a shell (issue 19), through the real binary and the go-sdk client: programs
// driven through write_stdin on a terminal and a pipe, results sized for a model with the whole
// output in a file, and the working directory kept across exec, traps and removal.

// pidLine is shell code a task prints first: its pid and PID namespace, for taskProcs.
const pidLine = `echo "PID $$ $(readlink /proc/$$/ns/pid)"; `

// started starts a background task (with the extra bash arguments given) and returns its id.
func started(t testing.TB, c mcptest.Caller, command string, extra ...any) string {
	t.Helper()
	r := bash(t, c, command, append([]any{"run_in_background", true}, extra...)...)
	if r.TaskID == "" || r.Status != "running" {
		t.Fatalf("%q did not start: %+v", command, r)
	}
	return r.TaskID
}

// awaitInput polls task_output until the task waits for input and has printed prompt (the pump
// may read a prompt after the task went to wait), and returns all it printed so far.
func awaitInput(t testing.TB, c mcptest.Caller, id, prompt string) string {
	t.Helper()
	var out mcptest.OutputResult
	testutil.Eventually(t, "task "+id+" waiting for input after "+strconv.Quote(prompt), func() bool {
		res := callTool(t, c, "task_output", map[string]any{"task_id": id, "offset": 0})
		out = mcptest.OutputResult{}
		mcptest.Decode(t, res, &out)
		return out.WaitingForInput && strings.Contains(out.Output, prompt)
	})
	return out.Output
}

// answer types chars into a task and returns what follows, reading on until it holds want or the task
// ends: write_stdin's early return is a guess (the task waits for input again, its output quiet for
// a moment), and on a loaded machine the rest of an answer may come in a later read.
func answer(t testing.TB, c mcptest.Caller, id, chars, want string) mcptest.OutputResult {
	t.Helper()
	out := mcptest.WriteStdin(t, c, id, chars)
	for i := 0; i < 50 && !strings.Contains(out.Output, want) && out.Status == "running"; i++ {
		next := mcptest.WriteStdin(t, c, id, "", "wait_ms", 200)
		next.Output = out.Output + next.Output
		out = next
	}
	return out
}

// taskProcs returns the process a task's pidLine names.
func taskProcs(t testing.TB, text string) []testutil.Proc {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		i := strings.Index(line, "PID ") // after a prompt, on a terminal
		if i < 0 {
			continue
		}
		if f := strings.Fields(strings.TrimSuffix(line[i:], "\r")); len(f) == 3 {
			return testutil.PidsInNS(t, f[2], f[1])
		}
	}
	t.Fatalf("no pid line in %q", text)
	return nil
}

// TestInteractivePrograms drives, through write_stdin, a python3 REPL on a terminal (a value computed
// across three writes), a read -p prompt, a program that insists on a terminal and reads a password
// with echo off, and an interactive shell whose loop Ctrl-C interrupts; a pipe too. Everything they
// started, in sessions of their own and deaf to SIGHUP as well, dies with the session: in both
// containment modes, with PID namespaces and without, over stdio and, for workspaces, HTTP.
func TestInteractivePrograms(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("skipped: no python3 here")
	}
	for _, mode := range []string{"cgroup", "process"} {
		for _, ns := range []string{"on", "off"} {
			t.Run(mode+"/pidns="+ns, func(t *testing.T) {
				if ns == "on" {
					needPIDNamespaces(t)
				}
				p := place(t, mode)
				s := startStdio(t, append(p.args(), "--pid-namespace", ns)...)
				procs := drive(t, s.cs)
				s.stdin.Close() // the client goes: the session ends
				select {
				case <-s.done:
				case <-time.After(30 * time.Second):
					t.Fatalf("reaper did not exit after its input closed\n%s", s.stderr)
				}
				testutil.AssertDead(t, procs)
				assertNothingLeft(t, p)
			})
		}
	}
}

// drive runs the interactive programs in c and returns their processes, and what they left.
func drive(t *testing.T, c mcptest.Caller) []testutil.Proc {
	var procs []testutil.Proc
	tty := []any{"tty", true}

	// python3 -i: a value computed across three writes.
	py := started(t, c, pidLine+"exec python3 -i -q", tty...)
	procs = append(procs, taskProcs(t, awaitInput(t, c, py, ">>> "))...)
	mcptest.WriteStdin(t, c, py, "x = 6\n")
	mcptest.WriteStdin(t, c, py, "y = 7\n")
	if out := answer(t, c, py, "print(x * y)\n", "42\r\n>>> "); !strings.Contains(out.Output, "42\r\n") || !out.WaitingForInput || out.Status != "running" {
		t.Errorf("python3 -i after three writes: %+v", out)
	}

	// A read -p prompt, answered.
	rd := started(t, c, `read -p "name? " n; echo "hello $n"`, tty...)
	if before := awaitInput(t, c, rd, "name? "); !strings.HasSuffix(before, "name? ") {
		t.Errorf("before the answer: %q", before)
	}
	if out := mcptest.WriteStdin(t, c, rd, "bob\n", "wait_ms", 10000); !strings.Contains(out.Output, "hello bob") || out.Status != "completed" {
		t.Errorf("after the answer: %+v", out)
	}

	// A program that insists on a terminal, and reads a password with echo off.
	pw := started(t, c, pidLine+`exec python3 -c 'import getpass, sys
if not sys.stdin.isatty(): sys.exit("not a terminal")
print("ok" if getpass.getpass("Password: ") == "hunter2" else "wrong")'`, tty...)
	before := awaitInput(t, c, pw, "Password: ")
	procs = append(procs, taskProcs(t, before)...)
	if out := mcptest.WriteStdin(t, c, pw, "hunter2\n", "wait_ms", 10000); !strings.Contains(out.Output, "ok") || strings.Contains(out.Output, "hunter2") || out.Status != "completed" {
		t.Errorf("the password prompt: %q then %+v", before, out)
	}

	// Ctrl-C interrupts the loop an interactive shell runs, not the shell; what the shell starts in
	// a session of its own, deaf to SIGHUP, stays until the session's end.
	sh := started(t, c, pidLine+"PS1='$ ' exec bash --norc --noprofile -i", tty...)
	procs = append(procs, taskProcs(t, awaitInput(t, c, sh, "$ "))...)
	hidden := mcptest.WriteStdin(t, c, sh, `setsid sh -c 'trap "" HUP; `+pidLine+`exec sleep 1000' &`+"\n", "wait_ms", 10000)
	testutil.Eventually(t, "the hidden process's pid", func() bool {
		hidden.Output += mcptest.WriteStdin(t, c, sh, "").Output
		return strings.Count(hidden.Output, "PID ") >= 1
	})
	procs = append(procs, taskProcs(t, hidden.Output)...)
	// Each sleep of the loop long: a Ctrl-C that lands after one sleep has exited and before bash
	// has taken the terminal back goes to a process group with no one left in it, and the loop goes
	// on (bash's, and any job-control shell's, window; a loaded machine widens it).
	mcptest.WriteStdin(t, c, sh, "while :; do sleep 5; done\n", "wait_ms", 300)
	mcptest.WriteStdin(t, c, sh, "\u0003")
	if out := answer(t, c, sh, "echo alive $((6*7))\n", "alive 42"); !strings.Contains(out.Output, "alive 42") || out.Status != "running" {
		t.Errorf("after Ctrl-C: %+v", out)
	}

	// A pipe: a line in, a line out, then its end.
	cat := started(t, c, pidLine+`while read -r l; do echo "<$l>"; done; echo eof`, "stdin", true)
	procs = append(procs, taskProcs(t, awaitInput(t, c, cat, "PID "))...)
	if out := answer(t, c, cat, "a b\n", "<a b>\n"); !strings.Contains(out.Output, "<a b>\n") || !out.WaitingForInput {
		t.Errorf("a line through the pipe: %+v", out)
	}
	if out := mcptest.WriteStdin(t, c, cat, "", "close_stdin", true); !strings.Contains(out.Output, "eof\n") || out.Status != "completed" {
		t.Errorf("the pipe's end: %+v", out)
	}
	var l struct {
		Tasks []struct {
			TaskID     string `json:"task_id"`
			Input      string `json:"input"`
			Waiting    bool   `json:"waiting_for_input"`
			OutputFile string `json:"output_file"`
		} `json:"tasks"`
	}
	decode(t, callTool(t, c, "task_list", nil), &l)
	listed := false
	for _, task := range l.Tasks {
		if task.TaskID == py {
			listed = true
			if b, err := os.ReadFile(task.OutputFile); !task.Waiting || task.Input != "tty" || err != nil || !strings.Contains(string(b), "42\r\n") {
				t.Errorf("task_list says of the REPL: %+v; its file: %q (%v)", task, b, err)
			}
		}
	}
	if !listed {
		t.Errorf("the REPL %s is not in task_list: %+v", py, l.Tasks)
	}

	// Foreground commands read /dev/null unless asked, and get a terminal when asked.
	if r := bash(t, c, `read -r x; echo "read $?"; tty`); r.Output != "read 1\nnot a tty\n" {
		t.Errorf("a foreground read: %+v", r)
	}
	if r := bash(t, c, "tty", "tty", true); !strings.HasPrefix(r.Output, "/dev/pts/") {
		t.Errorf("a foreground command on a terminal: %+v", r)
	}
	return procs
}

// TestInteractiveWorkspace drives a terminal and a pipe through write_stdin in a workspace of
// protocol 2026-07-28 over HTTP; closing the workspace kills them.
func TestInteractiveWorkspace(t *testing.T) {
	p := place(t, "")
	srv := startHTTP(t, p.args()...)
	cs := mcptest.ConnectHTTP(t, srv.url, mcptest.Options{Protocol: mcptest.Workspaces, Token: srv.token})
	w, _ := mcptest.OpenWorkspace(t, cs)
	rd := started(t, w, pidLine+`read -p "name? " n; echo "hello $n"; exec sleep 1000`, "tty", true)
	procs := taskProcs(t, awaitInput(t, w, rd, "name? "))
	if out := answer(t, w, rd, "ada\n", "hello ada"); !strings.Contains(out.Output, "hello ada") {
		t.Errorf("in a workspace: %+v", out)
	}
	if res := callTool(t, cs, "workspace_close", map[string]any{"workspace": w.Handle}); res.IsError {
		t.Fatal(mcptest.Text(res))
	}
	testutil.AssertDead(t, procs)
}

// TestOutputForModels: seq 1 1000000 returns at most the default 30,000 characters, says what it
// left out, and has its whole 6.9 MB in its file, which task_output reads by grep, tail and offset; a
// gigabyte of output stops its file at the session's budget (head and tail, a line between them),
// after the older file made room, and keeps its exit code; the files go with the session (place's
// cleanup checks), and with a dead instance at the next start (TestOutputFilesOfADeadInstance).
func TestOutputForModels(t *testing.T) {
	var want []byte
	for i := 1; i <= 1000000; i++ {
		want = append(strconv.AppendInt(want, int64(i), 10), '\n')
	}
	for _, mode := range []string{"cgroup", "process"} {
		t.Run(mode, func(t *testing.T) {
			p := place(t, mode)
			cs, _, _ := connectStdio(t, p.args()...)
			r := bash(t, cs, "seq 1 1000000")
			if n := utf8.RuneCountInString(r.Output); n > 30000 || !strings.HasPrefix(r.Output, "1\n2\n") || !strings.HasSuffix(r.Output, "999999\n1000000\n") {
				t.Errorf("seq 1 1000000 returned %d characters: %.40q ... %q", n, r.Output, r.Output[max(0, len(r.Output)-20):])
			}
			if r.OutputBytes != int64(len(want)) || r.OutputLines != 1000000 || r.DroppedChars < int64(len(want))-30000 || r.DroppedLines < 990000 || r.OutputTaskID == "" {
				t.Errorf("seq 1 1000000: %d bytes, %d lines, %d characters and %d lines dropped, id %q", r.OutputBytes, r.OutputLines, r.DroppedChars, r.DroppedLines, r.OutputTaskID)
			}
			if !strings.HasPrefix(r.OutputFile, p.stateDir+"/") {
				t.Errorf("the output file %s is not in reaper's state directory %s", r.OutputFile, p.stateDir)
			}
			if b, err := os.ReadFile(r.OutputFile); err != nil || sha256.Sum256(b) != sha256.Sum256(want) {
				t.Errorf("the output file %s holds %d bytes (%v), not seq's %d", r.OutputFile, len(b), err, len(want))
			}
			var got mcptest.OutputResult
			mcptest.CallInto(t, cs, "task_output", map[string]any{"task_id": r.OutputTaskID, "grep": "^54321[0-9]$"}, &got)
			if got.Output != "543210\n543211\n543212\n543213\n543214\n543215\n543216\n543217\n543218\n543219\n" {
				t.Errorf("grep in the file: %q", got.Output)
			}
			mcptest.CallInto(t, cs, "task_output", map[string]any{"task_id": r.OutputTaskID, "offset": 6888886, "max_output": 100}, &got)
			if got.Output != "9\n1000000\n" || got.Offset != 6888886 || got.PendingBytes != 0 {
				t.Errorf("the last bytes by offset: %+v", got)
			}

			start := time.Now()
			g := bash(t, cs, "head -c 1G /dev/zero | tr '\\0' x; echo; echo the end; exit 7")
			took := time.Since(start)
			info, err := os.Stat(g.OutputFile)
			if err != nil || g.ExitCode == nil || *g.ExitCode != 7 || g.OutputBytes != 1<<30+9 || !strings.HasSuffix(g.Output, "x\nthe end\n") {
				t.Fatalf("1 GiB: exit %v, %d bytes, file %v (%v)", g.ExitCode, g.OutputBytes, info, err)
			}
			if info.Size() > 64<<20 || info.Size() < 60<<20 || g.FileMissingBytes < 1<<30-64<<20 {
				t.Errorf("the file of 1 GiB of output holds %d bytes and lacks %d: not its budget's worth", info.Size(), g.FileMissingBytes)
			}
			tail := make([]byte, 1<<20+200)
			f, _ := os.Open(g.OutputFile)
			n, _ := f.ReadAt(tail, info.Size()-int64(len(tail)))
			f.Close()
			if s := string(tail[:n]); !strings.Contains(s, "bytes of output left out here: the session's output files reached their budget of 64 MiB") || !strings.HasSuffix(s, "x\nthe end\n") {
				t.Errorf("the file's end is not a line for the middle and the tail: %q ... %q", s[:100], s[len(s)-50:])
			}
			t.Logf("1 GiB of output through a foreground call: %v", took.Round(time.Millisecond))

			// On a terminal too: 256 MiB of output stop its file at the budget, its tail kept.
			tt := bash(t, cs, "head -c 256M /dev/zero | tr '\\0' y; echo; echo the end", "tty", true)
			if info, err := os.Stat(tt.OutputFile); err != nil || info.Size() > 64<<20 || tt.FileMissingBytes < 256<<20-64<<20 || !strings.HasSuffix(tt.Output, "y\r\nthe end\r\n") {
				t.Errorf("256 MiB on a terminal: file %v (%v), %d bytes missing, output ends %q", info, err, tt.FileMissingBytes, tt.Output[max(0, len(tt.Output)-30):])
			}
			// The older file made room first.
			res := callTool(t, cs, "task_output", map[string]any{"task_id": r.OutputTaskID})
			if _, err := os.Stat(r.OutputFile); !os.IsNotExist(err) || !res.IsError || !strings.Contains(mcptest.Text(res), "removed to stay within the session's output budget") {
				t.Errorf("the older file: %v; task_output: %s", err, mcptest.Text(res))
			}
		})
	}
}

// TestOutputFilesOfADeadInstance: a reaper killed with its guard leaves its sessions' output files;
// the next start sweeps them with its state.
func TestOutputFilesOfADeadInstance(t *testing.T) {
	p := place(t, "")
	dead := startHTTP(t, p.args()...)
	r := bash(t, dead.connect(t), "echo kept")
	if _, err := os.Stat(r.OutputFile); err != nil {
		t.Fatalf("the output file: %v", err)
	}
	guard := dead.cmd.Process.Pid
	server := serverOf(t, guard)
	for _, pid := range []int{guard, server} {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range []int{server, guard} {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-dead.done
	if _, err := os.Stat(r.OutputFile); err != nil {
		t.Fatalf("the dead instance's output file is gone before a restart: %v", err)
	}
	if out, code := runOnce(t, nil, append([]string{"ps"}, p.args()...)...); code != 0 || !regexp.MustCompile(`dead: its leftovers are for reaper sweep .* started \d+s ago\n`).MatchString(out) || strings.Contains(out, " up ") {
		t.Errorf("reaper ps (exit %d) of the dead instance:\n%s", code, out)
	}
	startHTTP(t, p.args()...)
	testutil.Eventually(t, "the sweep of the dead instance's output file", func() bool {
		_, err := os.Stat(r.OutputFile)
		return os.IsNotExist(err)
	})
}

// TestWorkingDirectoryKept: through the real binary, the working directory survives a command that
// ends by exec and one that sets its own EXIT trap, and is the shell's own, not that of the program
// exec starts; after one that removes it, the next command runs where the session started, and its
// result says why.
func TestWorkingDirectoryKept(t *testing.T) {
	cs, _, _ := connectStdio(t, cgroupArgs(t)...)
	dir := t.TempDir()
	for _, tc := range []struct{ command, cwd string }{
		{"mkdir -p " + dir + "/a/b && cd " + dir + "/a && exec true", dir + "/a"},
		{"cd b; trap 'echo cleaned' EXIT", dir + "/a/b"},
		// A cd inside the program exec starts is that program's, as the bash tool's description says.
		{"cd " + dir + "; exec bash -c 'cd " + dir + "/a; true'", dir},
		{"cd a/b", dir + "/a/b"},
	} {
		if r := bash(t, cs, tc.command); r.Cwd != tc.cwd {
			t.Errorf("%q: cwd %q, want %q (%+v)", tc.command, r.Cwd, tc.cwd, r)
		}
	}
	bash(t, cs, "rm -rf "+dir+"/a")
	r := bash(t, cs, "pwd")
	if r.Cwd != strings.TrimSuffix(r.Output, "\n") || !strings.Contains(r.Notice, dir+"/a/b cannot be entered (no such file or directory); the session is back in "+r.Cwd) {
		t.Errorf("after removing its directory: %+v", r)
	}
}

// TestStopWhatACommandLeft: task_stop on a foreground command's output_task_id stops what the command
// left running (as task_list lists it), and says so in words an agent can act on; an id it does not
// know gets an error that names where the ids are.
func TestStopWhatACommandLeft(t *testing.T) {
	cs, _, _ := connectStdio(t, cgroupArgs(t)...)
	r := bash(t, cs, "sleep 1000 & echo $! $("+testutil.ShowNS+")")
	if r.Leftover != 1 || r.OutputTaskID == "" {
		t.Fatalf("sleep 1000 &: %+v", r)
	}
	if text := mcptest.Text(callTool(t, cs, "task_list", nil)); !strings.Contains(text, "task_stop task_id="+r.OutputTaskID+" stops them") {
		t.Errorf("task_list does not say how to stop what the command left: %s", text)
	}
	left := testutil.PidsInNS(t, testutil.NSIn(r.Output), strings.Fields(r.Output)[0])
	var stopped struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
		Killed   int    `json:"killed"`
	}
	res := mcptest.CallInto(t, cs, "task_stop", map[string]any{"task_id": r.OutputTaskID}, &stopped)
	want := "Command " + r.OutputTaskID + " had exited (completed, exit code 0); 1 process(es) it left running ended. Its output stays readable with task_output task_id=" + r.OutputTaskID + "."
	if res.IsError || mcptest.Text(res) != want || stopped.Status != "completed" || stopped.ExitCode == nil || *stopped.ExitCode != 0 || stopped.Killed != 1 {
		t.Errorf("task_stop of what a command left: %q %+v\nwant %q", mcptest.Text(res), stopped, want)
	}
	testutil.AwaitDead(t, left, grace+5*time.Second)
	if list := mcptest.Text(callTool(t, cs, "task_list", nil)); strings.Contains(list, "left by") {
		t.Errorf("task_list after the stop: %s", list)
	}
	if _, out := mcptest.TaskOutput(t, cs, r.OutputTaskID, false); !strings.Contains(out, "pid:[") {
		t.Errorf("the output after the stop: %q", out)
	}
	res = callTool(t, cs, "task_stop", map[string]any{"task_id": "t-0123456789abcdef"})
	if !res.IsError || !strings.Contains(mcptest.Text(res), "task_list lists the ids of the tasks there are, and of the commands that left processes running") {
		t.Errorf("task_stop of an unknown id: %s", mcptest.Text(res))
	}
}

// TestResultWithinMaxOutput: a result's output holds at most max_output characters, the line that
// says what was left out of the middle included.
func TestResultWithinMaxOutput(t *testing.T) {
	cs, _, _ := connectStdio(t, cgroupArgs(t)...)
	for _, max := range []int{100, 1000, 30000} {
		r := bash(t, cs, "seq 1 100000", "max_output", max)
		if n := utf8.RuneCountInString(r.Output); n > max || n < max-20 || !strings.Contains(r.Output, "left out here") || !strings.HasSuffix(r.Output, "\n100000\n") {
			t.Errorf("max_output %d: %d characters: %.60q ... %q", max, n, r.Output, r.Output[len(r.Output)-min(len(r.Output), 30):])
		}
	}
}
