package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostile starts, in a session, the processes that make a teardown hard: one that ignores SIGTERM,
// one whose SIGTERM handler forks a replacement and goes on, a setsid child and a double-forked one.
// Each appends its pid to a file once it is ready (the handler appends its replacements' too); the
// call returns when all four are. The file's first line is the session's PID namespace. It returns
// the file and the four processes.
func hostile(t testing.TB, cs *mcp.ClientSession) (string, []testutil.Proc) {
	t.Helper()
	return hostileAt(t, cs, filepath.Join(t.TempDir(), "pids"))
}

// hostileAt is hostile with the processes' pids in file f (in a directory the tasks' user can write).
func hostileAt(t testing.TB, cs *mcp.ClientSession, f string) (string, []testutil.Proc) {
	t.Helper()
	script := strings.NewReplacer("F", f).Replace(testutil.ShowNS+` > F
sh -c 'trap "" TERM; echo $$ >> F; exec sleep 1000' &
sh -c 'trap "sleep 1000 & echo \$! >> F" TERM; echo $$ >> F; while :; do sleep 1; done' &
setsid sh -c 'echo $$ >> F; exec sleep 1000' &
sh -c 'sh -c "echo \$\$ >> F; exec sleep 1000" &' &
`) + testutil.AwaitLines(f, 5)
	r := bash(t, cs, script)
	ps := testutil.PidsIn(t, r.Output)
	if len(ps) != 4 {
		t.Fatalf("want 4 pids, got %q", r.Output)
	}
	return f, ps
}

// survivors returns the processes listed in file (the hostile ones and the replacements their
// handler forked) that still run. One that has SIGKILL pending is given up to doomedWait to die
// first: a process SIGKILLed by its namespace's end or a cgroup kill can wait, on a busy machine, to
// be scheduled to die after its killer is done (seen: a sleep in state R with SIGKILL pending, gone
// 200 ms later). A pid first read now is identified by its start time now.
func survivors(t testing.TB, file string, known []testutil.Proc) []testutil.Proc {
	t.Helper()
	b, _ := os.ReadFile(file)
	ps := append([]testutil.Proc(nil), known...)
	hosts := testutil.HostPids(testutil.NSIn(string(b))) // empty once the namespace is gone
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		if hosts != nil {
			pid = hosts[pid]
		}
		if p, ok := testutil.ProcOf(pid); ok && pid > 0 && !containsPid(ps, pid) {
			ps = append(ps, p)
		}
	}
	deadline := time.Now().Add(doomedWait)
	for {
		alive := testutil.Alive(ps)
		if !slices.ContainsFunc(alive, func(p testutil.Proc) bool { return testutil.KillPending(p.Pid) }) ||
			time.Now().After(deadline) {
			return alive
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// doomedWait is how long survivors gives a process with SIGKILL pending to die.
const doomedWait = 10 * time.Second

// killedWait is how long a test waits for the processes of a session to die once it has killed
// reaper or asked for the session's end: they take a few hundred milliseconds at most on an idle
// machine (the tests log how long), but more than a second has been seen beside the race-built full
// suite on two cores, and how fast is for the benchmarks to say, not a test.
const killedWait = 10 * time.Second

func containsPid(ps []testutil.Proc, pid int) bool {
	for _, p := range ps {
		if p.Pid == pid {
			return true
		}
	}
	return false
}

// serverOf returns the pid of the server the guard pid started: its only child.
func serverOf(t testing.TB, guard int) int {
	t.Helper()
	var pid int
	testutil.Eventually(t, "the guard's server", func() bool {
		// A child belongs to the thread that forked it: read every thread's children.
		files, _ := filepath.Glob("/proc/" + strconv.Itoa(guard) + "/task/*/children")
		for _, file := range files {
			b, _ := os.ReadFile(file)
			if f := strings.Fields(string(b)); len(f) > 0 {
				pid, _ = strconv.Atoi(f[0])
				return true
			}
		}
		return false
	})
	return pid
}

// assertNothingLeft fails if the placement still holds a slice or a state directory.
func assertNothingLeft(t testing.TB, p placement) {
	t.Helper()
	if p.root != "" {
		entries, _ := os.ReadDir(p.root)
		for _, e := range entries {
			if e.IsDir() {
				t.Errorf("cgroup left: %s", filepath.Join(p.root, e.Name()))
			}
		}
	}
	if entries, _ := os.ReadDir(p.stateDir); len(entries) > 0 {
		t.Errorf("state left in %s: %v", p.stateDir, entries)
	}
}

// stdioServer is reaper serving over pipes this test holds, so that it can play any client.
type stdioServer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *testutil.Buffer
	done   chan struct{}
	cs     *mcp.ClientSession
}

func startStdio(t testing.TB, args ...string) *stdioServer {
	t.Helper()
	return startStdioCmd(t, reaperCmd(append([]string{"serve"}, args...)...))
}

// startStdioCmd is startStdio for a command that ends up serving over its standard input and output
// (one that starts reaper where it must run).
func startStdioCmd(t testing.TB, cmd *exec.Cmd) *stdioServer {
	t.Helper()
	s := &stdioServer{cmd: cmd, stderr: &testutil.Buffer{}, done: make(chan struct{})}
	s.cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if s.stdout, err = s.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.done
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.cs, err = mcptest.Dial(ctx, &mcp.IOTransport{Reader: s.stdout, Writer: s.stdin}, mcptest.Options{})
	if err != nil {
		t.Fatalf("connect over stdio: %v\n%s", err, s.stderr)
	}
	return s
}

// TestStdioShutdownSequence plays the TypeScript SDK client's end of a stdio server: close its
// input, SIGTERM 2 s later, SIGKILL 2 s after that. reaper must be gone before the SIGTERM, with
// nothing left, whatever its tasks do.
func TestStdioShutdownSequence(t *testing.T) {
	for _, mode := range []string{"cgroup", "process"} {
		t.Run(mode, func(t *testing.T) {
			p := place(t, mode)
			s := startStdio(t, p.args()...) // the default grace period, 5 s
			file, ps := hostile(t, s.cs)
			closed := time.Now()
			s.stdin.Close()
			select {
			case <-s.done:
				t.Logf("reaper exited %v after its input closed", time.Since(closed).Round(time.Millisecond))
			case <-time.After(2 * time.Second):
				s.cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-s.done:
				case <-time.After(2 * time.Second):
					s.cmd.Process.Kill()
				}
				t.Errorf("reaper had not exited 2 s after its input closed: the client's SIGTERM came\n%s", s.stderr)
			}
			if left := survivors(t, file, ps); len(left) > 0 {
				t.Errorf("survivors: %v", left)
			}
			assertNothingLeft(t, p)
		})
	}
}

// TestReaperKilled: whichever of reaper's two processes is SIGKILLed (the guard, whose pid clients
// know, or the server, as an OOM kill would), every process of every session dies (promptly: the
// time is logged),
// and the slices and state go, with no restart.
func TestReaperKilled(t *testing.T) {
	for _, mode := range []string{"cgroup", "process"} {
		for _, transport := range []string{"stdio", "http"} {
			for _, victim := range []string{"guard", "server"} {
				t.Run(mode+"/"+transport+"/"+victim, func(t *testing.T) {
					p := place(t, mode)
					var guard int
					var cs *mcp.ClientSession
					var done <-chan struct{}
					if transport == "stdio" {
						s := startStdio(t, p.args()...)
						guard, cs, done = s.cmd.Process.Pid, s.cs, s.done
					} else {
						r := startHTTP(t, p.args()...)
						guard, cs, done = r.cmd.Process.Pid, r.connect(t), r.done
					}
					file, ps := hostile(t, cs)
					pid := guard
					if victim == "server" {
						pid = serverOf(t, guard)
					}
					syscall.Kill(pid, syscall.SIGKILL)
					took := testutil.AwaitDead(t, ps, killedWait)
					t.Logf("all dead %v after the %s was killed", took.Round(time.Millisecond), victim)
					select {
					case <-done:
					case <-time.After(10 * time.Second):
						t.Fatal("reaper did not exit")
					}
					if left := survivors(t, file, ps); len(left) > 0 {
						t.Errorf("survivors: %v", left)
					}
					assertNothingLeft(t, p)
				})
			}
		}
	}
}

// TestSignalsEndInTeardown: SIGHUP and SIGQUIT, like SIGTERM, end reaper with a full teardown.
func TestSignalsEndInTeardown(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := place(t, "")
			r := startHTTP(t, append(p.args(), "--grace", grace.String())...)
			file, ps := hostile(t, r.connect(t))
			endsInTeardown(t, r, sig, file, ps, p)
		})
	}
}

// endsInTeardown sends sig to r and checks that the teardown it starts kills the processes ps of the
// session whose marker is file within the grace period and a second, that reaper exits cleanly, and
// that nothing of p is left.
func endsInTeardown(t *testing.T, r *reaperProc, sig syscall.Signal, file string, ps []testutil.Proc, p placement) {
	t.Helper()
	r.cmd.Process.Signal(sig)
	testutil.AwaitDead(t, ps, grace+time.Second)
	select {
	case <-r.done:
		if r.err != nil {
			t.Errorf("reaper exited with %v after %v", r.err, sig)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("reaper did not exit after %v", sig)
	}
	if left := survivors(t, file, ps); len(left) > 0 {
		t.Errorf("survivors: %v", left)
	}
	assertNothingLeft(t, p)
}

// TestIgnoredSignals: the signals that mean nothing to reaper, asked for or not, neither end it nor
// disturb a session: it still serves, and SIGTERM still ends it with a full teardown.
func TestIgnoredSignals(t *testing.T) {
	p := place(t, "")
	r := startHTTP(t, append(p.args(), "--grace", grace.String())...)
	cs := r.connect(t)
	file, ps := hostile(t, cs)
	for _, sig := range []syscall.Signal{syscall.SIGPIPE, syscall.SIGSTKFLT, syscall.SIGUSR1, syscall.SIGUSR2,
		syscall.SIGALRM, syscall.SIGVTALRM, syscall.SIGIO, syscall.SIGXFSZ, syscall.SIGWINCH, syscall.SIGURG} {
		if err := r.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if res := bash(t, cs, "echo still here"); res.Output != "still here\n" {
			t.Fatalf("after %v: %+v", sig, res)
		}
	}
	endsInTeardown(t, r, syscall.SIGTERM, file, ps, p)
}

// TestClosedStderr: reaper's stderr is a pipe whose reader has gone (a host that read it and exited).
// The next log line must not kill reaper: it serves a tool call, then tears down on SIGTERM.
func TestClosedStderr(t *testing.T) {
	p := place(t, "")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, append([]string{"serve", "--http", "127.0.0.1:0", "--grace", grace.String()}, p.args()...), nil, pw)
	pw.Close()
	// The host reads reaper's first lines, the endpoint among them, and goes.
	r.stderr = readUntil(t, pr, testutil.ServingHTTP)
	r.awaitServing(t)
	pr.Close() // the reader is gone: every later write to reaper's stderr fails with EPIPE
	cs := r.connect(t)
	file, ps := hostile(t, cs) // logs "session started"
	if res := bash(t, cs, "echo still here"); res.Output != "still here\n" {
		t.Errorf("after a write to the closed stderr: %+v", res)
	}
	endsInTeardown(t, r, syscall.SIGTERM, file, ps, p)
}

// TestClosedStdout: a stdio client closes reaper's stdout while progress notifications are being
// written. The session ends as if the connection had closed: everything dies, reaper exits.
func TestClosedStdout(t *testing.T) {
	p := place(t, "")
	s := startStdio(t, append(p.args(), "--grace", grace.String())...)
	file, ps := hostile(t, s.cs)
	go s.cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:      "bash",
		Arguments: map[string]any{"command": "while :; do echo tick; sleep 0.05; done", "timeout": 600000},
		Meta:      mcp.Meta{"progressToken": "p1"},
	})
	time.Sleep(1500 * time.Millisecond) // not readiness: let progress notifications flow a while
	s.stdout.Close()
	testutil.AwaitDead(t, ps, 2*(grace+time.Second))
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("reaper did not exit after its stdout closed\n%s", s.stderr)
	}
	if left := survivors(t, file, ps); len(left) > 0 {
		t.Errorf("survivors: %v", left)
	}
	assertNothingLeft(t, p)
}

// TestRestartSweepsUpAfterDeadInstance: reaper and its guard are both killed (as when a node kills a
// whole group); a second instance on the same root lives on. Without PID namespaces (this needs them
// off) the dead one's processes survive it: `reaper sweep --dry-run` lists them without killing them,
// and a new instance on the same root kills them and removes what the dead one left at start. With
// them the kernel has killed the dead one's processes already, and the restart removes its slice and
// state. Either way the live instance's sessions are left alone.
func TestRestartSweepsUpAfterDeadInstance(t *testing.T) {
	eachModeAndNamespace(t, restartAfterBothKilled)
}

func restartAfterBothKilled(t *testing.T, p placement, ns string) {
	args := append(p.args(), "--pid-namespace", ns)
	dead := startHTTP(t, args...)
	_, deadPs := hostile(t, dead.connect(t))
	live := startHTTP(t, args...)
	liveCs := live.connect(t)
	_, livePs := hostile(t, liveCs)

	// Stopped first, so that neither can act on the other's death.
	guard := dead.cmd.Process.Pid
	server := serverOf(t, guard)
	for _, pid := range []int{guard, server} {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range []int{server, guard} {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-dead.done
	if ns == "on" {
		took := testutil.AwaitDead(t, deadPs, time.Second)
		t.Logf("the dead instance's processes died with it, %v after its end", took.Round(time.Millisecond))
	}

	type sweepRep struct {
		Dead []struct {
			Name      string
			Processes []struct{ Pid int }
		}
		Live []string
	}
	dryRun := func() (sweepRep, []byte) {
		out, err := reaperCmd(append([]string{"sweep", "--dry-run", "--json"}, p.args()...)...).Output()
		if err != nil {
			t.Fatalf("reaper sweep --dry-run: %v\n%s", err, out)
		}
		var rep sweepRep
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("sweep --json printed %s: %v", out, err)
		}
		return rep, out
	}
	rep, out := dryRun()
	// With PID namespaces every process died with its namespace, but one may still be on its way
	// out of the slice (exiting) when the dry run looks: it is given a few seconds to be gone.
	deadline := time.Now().Add(10 * time.Second)
	for ns == "on" && len(rep.Dead) == 1 && len(rep.Dead[0].Processes) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		rep, out = dryRun()
	}
	if want := map[string]int{"off": 4, "on": 0}[ns]; len(rep.Dead) != 1 || len(rep.Live) != 1 || len(rep.Dead[0].Processes) < want || ns == "on" && len(rep.Dead[0].Processes) > 0 {
		t.Errorf("sweep --dry-run: %s; want one dead instance with %d processes or more (none with PID namespaces) and one live one", out, want)
	}
	if alive := testutil.Alive(deadPs); ns == "off" && len(alive) != len(deadPs) {
		t.Errorf("the dry run killed something: alive %v of %v", alive, deadPs)
	}

	restarted := startHTTP(t, args...)
	took := testutil.AwaitDead(t, deadPs, 30*time.Second)
	t.Logf("the dead instance's processes were gone %v after the restart", took.Round(time.Millisecond))
	if !restarted.stderr.Await("swept up after a dead instance") {
		t.Errorf("the restart did not log the sweep:\n%s", restarted.stderr)
	}
	if alive := testutil.Alive(livePs); len(alive) != len(livePs) {
		t.Errorf("the live instance's processes were touched: alive %v of %v", alive, livePs)
	}
	if r := bash(t, liveCs, "echo ok"); r.Output != "ok\n" {
		t.Errorf("the live instance no longer serves: %+v", r)
	}
	testutil.Eventually(t, "the dead instance's slice and state to go", func() bool {
		entries, _ := os.ReadDir(p.stateDir)
		return len(entries) == 2 // the live instance's and the restarted one's
	})
}

// TestProcessContainmentRemembers: in process containment a session whose task table is empty still
// kills, at its end, what its finished commands left.
func TestProcessContainmentRemembers(t *testing.T) {
	p := place(t, "process")
	r := startHTTP(t, append(p.args(), "--grace", grace.String())...)
	cs := r.connect(t)
	out := bash(t, cs, "setsid sleep 1000 & echo $!; "+testutil.ShowNS).Output
	left := testutil.PidsIn(t, out)
	bash(t, cs, "true") // the first command's task is cleared now
	// As the session sees it: what $! printed.
	if res := callTool(t, cs, "task_list", nil); !strings.Contains(textOf(res), "pids ["+strings.Fields(out)[0]+"]") {
		t.Errorf("task_list does not show the leftover: %s", textOf(res))
	}
	cs.Close() // DELETE
	testutil.AwaitDead(t, left, grace+time.Second)
}

// TestDeleteAnsweredWithinASecond: a DELETE is answered within a second even when a task ignores
// SIGTERM; the teardown goes on, the session id is refused meanwhile, and the processes die at the
// end of the grace period.
func TestDeleteAnsweredWithinASecond(t *testing.T) {
	g := 3 * time.Second
	p := place(t, "")
	r := startHTTP(t, append(p.args(), "--grace", g.String())...)
	cs := r.connect(t)
	file, ps := hostile(t, cs)
	id := cs.ID()
	start := time.Now()
	if err := cs.Close(); err != nil { // sends DELETE
		t.Errorf("the client's Close: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the DELETE was answered after %v", took)
	}
	req, _ := http.NewRequest(http.MethodPost, r.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := testutil.Do(req); err != nil {
		t.Error(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("a request on the deleted session during its teardown: %s, want 404", resp.Status)
		}
	}
	// Two of the four ignore SIGTERM (one by a trap that forks a replacement).
	if len(testutil.Alive(ps)) < 2 {
		t.Error("the SIGTERM-ignoring processes died before the grace period ended")
	}
	testutil.AwaitDead(t, ps, g+time.Second)
	if left := survivors(t, file, ps); len(left) > 0 {
		t.Errorf("survivors: %v", left)
	}
}

// TestTasksInheritNoDescriptors: a descriptor reaper inherits from whatever started it (a CI runner's
// pipe, a shell's) reaches neither its server nor its tasks, where it could be read or hold a pipe
// open that its owner waits on: marked close-on-exec by close_range(2), and where the kernel has no
// close_range (before Linux 5.9, simulated by a seccomp filter), one by one.
func TestTasksInheritNoDescriptors(t *testing.T) {
	for _, tc := range []struct{ name, seccomp string }{
		{"close_range", ""},
		{"without close_range", "close_range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := place(t, "")
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			var st syscall.Stat_t
			if err := syscall.Fstat(int(pw.Fd()), &st); err != nil {
				t.Fatal(err)
			}
			pipe := "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"
			args := append([]string{"serve", "--http", "127.0.0.1:0"}, p.args()...)
			cmd := reaperCmd(args...)
			if tc.seccomp != "" {
				cmd = testutil.Helper("seccomp-serve", "E2E_BIN="+staticBin, "E2E_SECCOMP="+tc.seccomp,
					"E2E_ARGS="+strings.Join(args, " "))
			}
			null, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			cmd.ExtraFiles = []*os.File{null, null, pw} // fd 5 of the guard, inheritable (3 is the guard's own)
			r := startCmd(t, cmd, nil, nil)
			pw.Close()
			r.awaitServing(t)
			cs := r.connect(t)
			out := bash(t, cs, `grep '^Seccomp:' /proc/self/status; for f in /proc/$$/fd/*; do readlink "$f"; done; for f in /proc/$PPID/fd/*; do readlink "$f"; done`).Output
			if tc.seccomp != "" && !strings.Contains(out, "Seccomp:\t2") {
				t.Fatalf("the task is not under the filter:\n%s", out)
			}
			if strings.Contains(out, pipe) {
				t.Errorf("a task holds the descriptor reaper inherited (%s):\n%s", pipe, out)
			}
			server := serverOf(t, cmd.Process.Pid)
			links, _ := filepath.Glob("/proc/" + strconv.Itoa(server) + "/fd/*")
			for _, l := range links {
				if target, _ := os.Readlink(l); target == pipe {
					t.Errorf("the server holds the descriptor the guard inherited: %s", l)
				}
			}
		})
	}
}
