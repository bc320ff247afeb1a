package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// The proof: every way a process tries to outlive its session (the rows), against every way a
// session ends (the columns), in both containment modes. Each scenario runs every row at once in one
// session, ends it one way and checks each row on its own: every process it recorded, and every
// process carrying its mark, is gone (not running, not a zombie) within the column's budget; no
// cgroup of the session is left; and reaper, where it still runs, serves another session. The suite
// prints the table (a cell is the time until the row was all dead, FAIL with what survived, LIMIT with
// the reason where a mode cannot hold it, ALIVE where a row is expected to survive and did, or n/a)
// and writes it to $E2E_MATRIX_OUT. Reaper runs with its default --pid-namespace (auto: on as root);
// the ends where reaper itself dies also run with --pid-namespace=off, where what survives is stated.

// matrixGrace is the grace period of every scenario.
const matrixGrace = time.Second

// escape is one row: a shell snippet (bash) that starts its processes in the background. Each process
// to watch appends "<row> <pid>" to {F} once it is ready; lines is how many it appends. {M} is the
// scenario's mark prefix: a process started with E2E_ROW={M}<row> carries the row's mark.
type escape struct {
	row    string
	lines  int
	script string
	root   bool // needs root
	cgroup bool // means something only in cgroup containment
}

var escapes = []escape{
	{row: "&", lines: 1, script: `E2E_ROW={M}\& sleep 1000 & echo "& $!" >> {F}`},
	{row: "nohup", lines: 1, script: `E2E_ROW={M}nohup nohup sleep 1000 >/dev/null 2>&1 & echo "nohup $!" >> {F}`},
	{row: "setsid", lines: 1, script: `E2E_ROW={M}setsid setsid sh -c 'echo "setsid $$" >> {F}; exec sleep 1000' &`},
	{row: "double-fork", lines: 1, script: `(E2E_ROW={M}double-fork sh -c 'echo "double-fork $$" >> {F}; exec sleep 1000' &)`},
	{row: "disown", lines: 1, script: `E2E_ROW={M}disown sleep 1000 & disown; echo "disown $!" >> {F}`},
	{row: "own-pgroup", lines: 1, script: `E2E_ROW={M}own-pgroup TESTUTIL_HELPER=setpgid E2E_ROWS={F} "$E2E_SELF" &`},
	{row: "ignores-term", lines: 1, script: `E2E_ROW={M}ignores-term sh -c 'trap "" TERM; echo "ignores-term $$" >> {F}; exec sleep 1000' &`},
	{row: "forks-on-term", lines: 1, script: `E2E_ROW={M}forks-on-term sh -c 'trap "sleep 1000 & echo \"forks-on-term \$!\" >> {F}" TERM; echo "forks-on-term $$" >> {F}; while :; do sleep 0.1; done' &`},
	{row: "stopped", lines: 1, script: `E2E_ROW={M}stopped sh -c 'echo "stopped $$" >> {F}; kill -STOP $$; exec sleep 1000' &`},
	{row: "fork-loop", lines: 1, script: `E2E_ROW={M}fork-loop sh -c 'i=0; while [ $i -lt 200 ]; do sleep 1000 & i=$((i+1)); done; echo "fork-loop $$" >> {F}; wait' &`},
	{row: "holds-pipe", lines: 1, script: `(E2E_ROW={M}holds-pipe sh -c 'echo "holds-pipe $$" >> {F}; while :; do echo tick; sleep 0.2; done' &)`},
	{row: "daemon", lines: 1, script: `(E2E_ROW={M}daemon sh -c 'exec </dev/null >/dev/null 2>&1; (env -i /bin/sh -c "echo \"daemon \$\$\" >> {F}; exec /bin/sleep 1000" &)' &)`},
	{row: "pid-ns", lines: 1, root: true, script: `E2E_ROW={M}pid-ns unshare --pid --fork sleep 1000 & echo "pid-ns $!" >> {F}`},
	// A parent that never waits: its 20 children stay zombies ("zombie" lines) until someone reaps them.
	{row: "zombies", lines: 21, script: `E2E_ROW={M}zombies sh -c 'i=0; while [ $i -lt 20 ]; do true & echo "zombie $!" >> {F}; i=$((i+1)); done; echo "zombies $$" >> {F}; exec sleep 1000' &`},
	{row: "listens", lines: 1, script: `E2E_ROW={M}listens TESTUTIL_HELPER=listen E2E_ROWS={F} "$E2E_SELF" &`},
	{row: "leaves-cgroup", lines: 1, root: true, cgroup: true, script: `E2E_ROW={M}leaves-cgroup sh -c 'echo "leaves-cgroup $$" >> {F}; echo $$ > {P}; exec sleep 1000' &`},
	// In the end "a root task kills reaper", this row is that task: it waits for {GO}, leaves its
	// cgroup and writes 1 to the cgroup.kill of the cgroup holding reaper's two processes ({THEN}).
	// Otherwise it leaves its cgroup at once ({LEAVE}) and sleeps. The killer leaves only once told
	// to: reaper looks for processes outside their slice every 2 s and kills them, and this one would
	// not be there to kill reaper. Both rows that leave record themselves first: one killed after it
	// left and before it recorded would be waited for in vain (seen under an emulated CPU); the test
	// waits until they have left (see awaitLeft).
	{row: "no-trail", lines: 1, root: true, script: `(setsid env -i /bin/sh -c 'echo "no-trail $$" >> {F}; {LEAVE}{THEN}' &)`},
	// Last: the task's own shell becomes the process to watch.
	{row: "exec", lines: 1, script: `echo "exec $$" >> {F}; exec env E2E_ROW={M}exec sleep {EXEC}`},
}

// end is one column: a way a session ends.
type end struct {
	name   string
	budget time.Duration // from the end to every process dead
	// transport is how the session is reached: "stdio", "http", "client" (a separate client
	// process), "run" (reaper run).
	transport string
	// signal, if set, is sent to reaper (its guard) to end the session.
	signal syscall.Signal
	// reaperLives: reaper still runs after the end and must serve another session.
	reaperLives bool
	// limits says why a cell cannot hold: by row, or by "mode/row" for one mode.
	limits map[string]string
	// pidNS, if set, is reaper's --pid-namespace.
	pidNS string
	// survives says why a row is expected to outlive the end, as limits does ("*": every row): such a
	// row is not a failure when it is still alive at the budget's end.
	survives map[string]string
	// killer: the no-trail row's process ends the session by killing reaper's guard and server.
	killer bool
	// noRestart: reaper dies and nothing starts again; the test sweeps up after it once the rows are
	// checked.
	noRestart bool
}

var ends = []end{
	{name: "stdio close", transport: "stdio", budget: matrixGrace + time.Second},
	{name: "stdio TS-SDK close", transport: "stdio", budget: 2 * time.Second},
	{name: "stdio client killed", transport: "stdio", budget: matrixGrace + time.Second},
	{name: "SIGTERM stdio", transport: "stdio", signal: syscall.SIGTERM, budget: matrixGrace + time.Second},
	{name: "SIGTERM http", transport: "http", signal: syscall.SIGTERM, budget: matrixGrace + time.Second},
	{name: "SIGINT stdio", transport: "stdio", signal: syscall.SIGINT, budget: matrixGrace + time.Second},
	{name: "SIGINT http", transport: "http", signal: syscall.SIGINT, budget: matrixGrace + time.Second},
	{name: "SIGHUP stdio", transport: "stdio", signal: syscall.SIGHUP, budget: matrixGrace + time.Second},
	{name: "SIGHUP http", transport: "http", signal: syscall.SIGHUP, budget: matrixGrace + time.Second},
	{name: "SIGKILL reaper", transport: "http", budget: time.Second},
	{name: "restart after both killed", transport: "http", budget: matrixGrace + time.Second, reaperLives: true, limits: map[string]string{
		"process/daemon": "it cleared its environment, and the processes it descends from died with reaper and its guard",
		"no-trail":       "it cleared its environment and left its cgroup, and the processes it descends from died with reaper and its guard",
		"zombies":        "their reaper and its guard are dead: the zombies are PID 1's to reap",
	}},
	{name: "DELETE", transport: "http", budget: matrixGrace + time.Second, reaperLives: true},
	{name: "DELETE during a 60 s call", transport: "http", budget: matrixGrace + time.Second, reaperLives: true},
	{name: "idle timeout, client killed", transport: "client", budget: 2*time.Second + matrixGrace + time.Second, reaperLives: true},
	// Three pings unanswered in a row, each given an interval: about four intervals of 500 ms, and
	// two more for a loaded machine.
	{name: "keepalive, client stopped", transport: "client", budget: 6*500*time.Millisecond + matrixGrace + time.Second, reaperLives: true},
	{name: "task_stop", transport: "http", budget: matrixGrace + time.Second, reaperLives: true, limits: map[string]string{
		"process/no-trail": noTrailLimit,
	}},
	{name: "foreground timeout", transport: "http", budget: matrixGrace + time.Second, reaperLives: true, limits: map[string]string{
		"process/no-trail": noTrailLimit,
	}},
	{name: "reaper run", transport: "run", budget: matrixGrace + time.Second},
	// Workspaces (protocol 2026-07-28 over HTTP; see viaWorkspace). Expiry: a lease of 2 s from the last call.
	{name: "workspace_close", transport: "workspace", budget: matrixGrace + time.Second, reaperLives: true},
	{name: "workspace expiry", transport: "workspace", budget: 2*time.Second + matrixGrace + time.Second, reaperLives: true},
	{name: "workspace restart", transport: "workspace", budget: matrixGrace + time.Second, reaperLives: true, limits: map[string]string{
		"process/daemon": "it cleared its environment, and the processes it descends from died with reaper and its guard",
		"no-trail":       "it cleared its environment and left its cgroup, and the processes it descends from died with reaper and its guard",
		"zombies":        "their reaper and its guard are dead: the zombies are PID 1's to reap",
	}},
	// Reaper itself dies, with nothing left of it to act: only the kernel can end the sessions (their
	// PID namespaces die with their inits), and where sessions have none, nothing does.
	{name: "guard and server SIGKILLed together, no restart", transport: "http", budget: time.Second, noRestart: true},
	{name: "a root task with no trail SIGKILLs guard and server", transport: "http", budget: time.Second, killer: true, noRestart: true},
	{name: "restart after both killed, --pid-namespace=off", transport: "http", pidNS: "off", budget: matrixGrace + time.Second, reaperLives: true, limits: map[string]string{
		"process/daemon": "it cleared its environment, and the processes it descends from died with reaper and its guard",
		"no-trail":       "it cleared its environment and left its cgroup, and the processes it descends from died with reaper and its guard",
		"zombies":        "their reaper and its guard are dead: the zombies are PID 1's to reap",
	}},
	{name: "guard and server SIGKILLed together, no restart, --pid-namespace=off", transport: "http", pidNS: "off", budget: time.Second,
		noRestart: true, survives: map[string]string{"*": noKernelHelp}},
	{name: "a root task with no trail SIGKILLs guard and server, --pid-namespace=off", transport: "http", pidNS: "off", budget: time.Second,
		killer: true, noRestart: true, survives: map[string]string{"*": noKernelHelp}},
}

// noKernelHelp is why, without PID namespaces, a session's processes outlive a reaper that died with
// its guard: only reaper kills them, and no reaper is left (a later start sweeps up after it).
const noKernelHelp = "without a PID namespace only reaper ends a session's processes, and reaper and its guard are dead (the next start on the same root sweeps up); " +
	"the rows that died anyway were in the task's process group, which the kernel sends SIGHUP once reaper's end leaves it orphaned with a stopped member (the stopped row)"

// noTrailLimit is why process containment cannot end the no-trail row with its task: without a
// cgroup, nothing ties it to the task once it has no marker and no parent of the task's.
const noTrailLimit = "with no cgroup, a process that cleared its environment and was re-parented cannot be told to be the task's; it dies when a session ends"

func init() {
	// own-pgroup: a process that moves itself into a process group of its own.
	helpers["setpgid"] = func() int {
		unix.Setpgid(0, 0)
		appendRow("own-pgroup")
		select {}
	}
	// listen: a server on a port.
	helpers["listen"] = func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 1
		}
		defer ln.Close()
		appendRow("listens")
		for {
			c, err := ln.Accept()
			if err != nil {
				return 0
			}
			c.Close()
		}
	}
	helpers["matrix-client"] = matrixClient
}

// appendRow appends "row pid" to the file in E2E_ROWS.
func appendRow(row string) {
	f, err := os.OpenFile(os.Getenv("E2E_ROWS"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		fmt.Fprintf(f, "%s %d\n", row, os.Getpid())
		f.Close()
	}
}

// matrixClient connects to E2E_URL (with E2E_TOKEN), runs E2E_SCRIPT as a background task, waits until the file
// E2E_ROWS has E2E_LINES lines, prints READY and waits to be killed or stopped: a client that vanishes.
func matrixClient() int {
	ctx, cancel := context.WithTimeout(context.Background(), helperDeadline)
	defer cancel()
	cs, err := mcptest.DialHTTP(ctx, os.Getenv("E2E_URL"), mcptest.Options{Token: os.Getenv("E2E_TOKEN")})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": os.Getenv("E2E_SCRIPT"), "run_in_background": true}})
	if err != nil || res.IsError {
		fmt.Println("ERR", err, textOf(res))
		return 1
	}
	// The session must not go idle before the rows all run: on a loaded machine they can take
	// longer than the idle timeout to start, and the timeout would end them half started. A ping is
	// a request, which renews the idle lease; the vanishing starts once READY is printed.
	want, _ := strconv.Atoi(os.Getenv("E2E_LINES"))
	got, last := 0, time.Now()
	for ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
		b, _ := os.ReadFile(os.Getenv("E2E_ROWS"))
		if got = bytes.Count(b, []byte{'\n'}); got >= want {
			fmt.Println("READY")
			select {}
		}
		if time.Since(last) > 250*time.Millisecond {
			if err := cs.Ping(ctx, nil); err != nil {
				fmt.Println("ERR ping while the rows start:", err)
				return 1
			}
			last = time.Now()
		}
	}
	fmt.Printf("ERR the rows did not start: %d of %d lines\n", got, want)
	return 1
}

// scenario is one column in one mode.
type scenario struct {
	t      *testing.T
	mode   string
	end    end
	p      placement
	rows   []escape
	file   string // the rows' pid file
	mark   string // the scenario's mark prefix
	start  time.Time
	ended  time.Time     // when the end began
	guard  int           // reaper's guard, where there is one
	served *reaperProc   // the reaper that lives on, for another session
	logged *reaperProc   // the reaper whose log a failure shows (HTTP ends)
	done   chan struct{} // closed when the reaper that ends has exited (nil for reaper run)
	result map[string]string
	before map[string][]testutil.Proc // the rows' processes, identified once they all ran (before the end)
	pinned bool                       // the rows' PID namespace is held open (see testutil.PinNS)
	kill   string                     // killer ends: the cgroup the test moves reaper's two processes into
	goFile string                     // killer ends: created when the no-trail row is to kill them
}

func TestMatrix(t *testing.T) {
	out := os.Getenv("E2E_MATRIX_OUT")
	if out == "" {
		out = filepath.Join(os.TempDir(), "reaper-matrix.md")
	}
	results := map[string]map[string]map[string]string{} // mode -> end -> row -> cell
	var mu sync.Mutex
	for _, mode := range []string{"cgroup", "process"} {
		results[mode] = map[string]map[string]string{}
		for _, e := range ends {
			t.Run(mode+"/"+e.name, func(t *testing.T) {
				sc := newScenario(t, mode, e)
				sc.runAndCheck()
				mu.Lock()
				results[mode][e.name] = sc.result
				mu.Unlock()
			})
		}
	}
	table := matrixTable(results)
	t.Log("\n" + table)
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		t.Errorf("writing the matrix: %v", err)
	} else {
		t.Logf("the matrix is in %s", out)
	}
}

func newScenario(t *testing.T, mode string, e end) *scenario {
	e.budget = testutil.Slow(e.budget) // on a slow machine reaper is slow too
	sc := &scenario{t: t, mode: mode, end: e, p: place(t, mode), result: map[string]string{}}
	if e.killer {
		sc.killCgroup()
	}
	sc.file = filepath.Join(t.TempDir(), "rows")
	os.WriteFile(sc.file, nil, 0o644)
	sc.mark = testutil.UniqueName("m") + "-"
	for _, esc := range escapes {
		switch {
		case esc.root && os.Geteuid() != 0:
			sc.result[esc.row] = "n/a" // needs root
		case esc.cgroup && mode != "cgroup":
			sc.result[esc.row] = "n/a" // no cgroup to leave
		default:
			sc.rows = append(sc.rows, esc)
		}
	}
	return sc
}

// killCgroup makes the cgroup the killer ends reaper through: reaper's guard and server are moved
// there once the rows run, so that its cgroup.kill reaches them and nothing of the session. A task
// in a PID namespace of its own cannot name a process outside it (kill and pidfds refuse): writing
// cgroup.kill of a cgroup reaper sits in is how a root task kills it then, without pids. Where there is
// no writable cgroup2 the column is skipped.
func (sc *scenario) killCgroup() {
	t := sc.t
	info := cgroup.Detect(cgroup.Options{})
	if os.Geteuid() != 0 || !info.Usable() {
		t.Skipf("skipped: a task killing reaper through cgroup.kill needs root and a writable cgroup2: %s", info)
	}
	sc.kill = filepath.Join(info.Mountpoint, testutil.UniqueName("reaper-e2e-kill-"))
	if err := os.Mkdir(sc.kill, 0o755); err != nil {
		t.Fatal(err)
	}
	sc.goFile = filepath.Join(t.TempDir(), "go")
	t.Cleanup(func() { testutil.RemoveCgroup(t, sc.kill) })
}

// script is the shell script that starts every row and, last, becomes the exec row's process. Its
// first line records the session's PID namespace: the rows' pids are that namespace's.
func (sc *scenario) script(execFor string) string {
	procs := "/dev/null"
	if sc.mode == "cgroup" {
		procs = filepath.Join(cgroup.Detect(cgroup.Options{}).Mountpoint, "cgroup.procs")
	}
	var b strings.Builder
	b.WriteString(testutil.ShowNS + " >> {F}\n")
	lines := 1
	for _, esc := range sc.rows {
		if esc.row == "exec" {
			continue
		}
		b.WriteString(esc.script + "\n")
		lines += esc.lines
	}
	b.WriteString(testutil.AwaitLines(sc.file, lines) + " >/dev/null\n")
	for _, esc := range sc.rows {
		if esc.row == "exec" {
			b.WriteString(esc.script + "\n")
		}
	}
	leave, then := "echo $$ > {P} 2>/dev/null; ", "exec /bin/sleep 1000"
	if sc.end.killer {
		leave, then = "", "until [ -e {GO} ]; do /bin/sleep 0.05; done; echo $$ > {P} 2>/dev/null; echo 1 > {K}/cgroup.kill; exec /bin/sleep 1000"
	}
	script := strings.NewReplacer("{LEAVE}", leave, "{THEN}", then).Replace(b.String())
	r := strings.NewReplacer("{F}", sc.file, "{M}", sc.mark, "{P}", procs, "{EXEC}", execFor, "{GO}", sc.goFile, "{K}", sc.kill)
	return r.Replace(script)
}

func (sc *scenario) lines() int {
	n := 1 // the namespace
	for _, esc := range sc.rows {
		n += esc.lines
	}
	return n
}

// awaitRows waits until every row has reported its processes, and identifies them: once reaper has
// died, the pids of a PID namespace that died with it can no longer be told.
func (sc *scenario) awaitRows() { sc.awaitRowsRenewing(nil) }

// awaitRowsRenewing is awaitRows calling renew, if set, every 250 ms meanwhile: for an end by a lease
// (an idle timeout), which on a loaded machine could run out before the rows all started and end
// them half started.
func (sc *scenario) awaitRowsRenewing(renew func()) {
	last := time.Now()
	for deadline := time.Now().Add(testutil.Slow(30 * time.Second)); ; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(sc.file)
		if bytes.Count(b, []byte{'\n'}) >= sc.lines() {
			break
		}
		if renew != nil && time.Since(last) > 250*time.Millisecond {
			renew()
			last = time.Now()
		}
		if time.Now().After(deadline) {
			sc.t.Fatalf("the rows did not all start within %v; %d lines of %d:\n%s", testutil.Slow(30*time.Second), bytes.Count(b, []byte{'\n'}), sc.lines(), b)
		}
	}
	sc.before = sc.recorded()
	sc.awaitLeft()
}

// awaitLeft waits, in cgroup containment, until the rows that leave their cgroup at once have left
// it (or died: reaper kills what left its slice): they record themselves before they leave.
func (sc *scenario) awaitLeft() {
	if sc.mode != "cgroup" {
		return
	}
	rel := strings.TrimPrefix(sc.p.root, cgroup.Detect(cgroup.Options{}).Mountpoint)
	var leaving []testutil.Proc
	for _, row := range []string{"leaves-cgroup", "no-trail"} {
		if row != "no-trail" || !sc.end.killer {
			leaving = append(leaving, sc.before[row]...)
		}
	}
	testutil.Eventually(sc.t, "the rows that leave their cgroup to leave it", func() bool {
		for _, p := range leaving {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/cgroup")
			if testutil.Running(p) && strings.HasPrefix(strings.TrimSpace(string(b)), "0::"+rel+"/") {
				return false
			}
		}
		return true
	})
}

// reaperArgs are the flags of every reaper the scenario starts.
func (sc *scenario) reaperArgs(extra ...string) []string {
	args := append(sc.p.args(), "--grace", matrixGrace.String())
	if sc.end.pidNS != "" {
		args = append(args, "--pid-namespace", sc.end.pidNS)
	}
	return append(args, extra...)
}

func (sc *scenario) runAndCheck() {
	t := sc.t
	os.Setenv("E2E_SELF", os.Args[0]) // the helpers some rows run; reaper's tasks inherit it
	sc.start = time.Now()
	switch sc.end.transport {
	case "stdio":
		sc.viaStdio()
	case "http":
		sc.viaHTTP()
	case "client":
		sc.viaClient()
	case "run":
		sc.viaRun()
	case "workspace":
		sc.viaWorkspace()
	}
	sc.check()
	switch {
	case sc.end.reaperLives:
		sc.servesAnother()
	case sc.done != nil:
		select {
		case <-sc.done:
		case <-time.After(testutil.Slow(30 * time.Second)):
			t.Error("reaper did not exit")
		}
		if sc.end.noRestart {
			sc.sweep()
		}
		sc.awaitCleared()
		assertNothingLeft(t, sc.p)
	}
	if t.Failed() {
		b, _ := os.ReadFile(sc.file)
		t.Logf("rows:\n%s", b)
		if sc.logged != nil {
			t.Logf("reaper's log:\n%s", sc.logged.stderr)
		}
	}
}

func (sc *scenario) viaStdio() {
	s := startStdio(sc.t, sc.reaperArgs()...)
	sc.guard, sc.done = s.cmd.Process.Pid, s.done
	bash(sc.t, s.cs, sc.script("1000"), "run_in_background", true)
	sc.awaitRows()
	sc.ended = time.Now()
	switch sc.end.name {
	case "stdio close":
		s.stdin.Close()
	case "stdio TS-SDK close":
		s.stdin.Close()
		go func() {
			select {
			case <-s.done:
				return
			case <-time.After(2 * time.Second):
			}
			sc.t.Errorf("reaper had not exited 2 s after its input closed: the client's SIGTERM came")
			s.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.done:
			case <-time.After(2 * time.Second):
				s.cmd.Process.Kill()
			}
		}()
	case "stdio client killed":
		s.stdin.Close()
		s.stdout.Close()
	default:
		s.cmd.Process.Signal(sc.end.signal)
	}
}

func (sc *scenario) viaHTTP() {
	t := sc.t
	r := startHTTP(t, sc.reaperArgs()...)
	sc.guard, sc.done, sc.served, sc.logged = r.cmd.Process.Pid, r.done, r, r
	cs := r.connect(t)
	switch sc.end.name {
	case "foreground timeout":
		// Long enough for every row to start before the timeout kills the tree, on a loaded
		// machine too: with 3 s, under a full CI run with the race detector, 38 rows of 39 had
		// started when it fired, and the scenario waited for a row that would never come.
		const timeout = 10 * time.Second
		called := time.Now()
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
				"command": sc.script("1000"), "timeout": timeout.Milliseconds()}})
		}()
		sc.awaitRows()
		sc.ended = called.Add(timeout) // the timeout kills the call's whole tree
		select {
		case <-returned:
		case <-time.After(time.Minute):
			t.Error("the call that timed out did not return")
		}
		return
	case "DELETE during a 60 s call":
		bash(t, cs, sc.script("1000"), "run_in_background", true)
		sc.awaitRows()
		began := filepath.Join(t.TempDir(), "began")
		go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": "echo $$ $(" + testutil.ShowNS + ") > " + began + "; exec sleep 60", "timeout": 600000}})
		pidFromFile(t, began)
	case "task_stop":
		task := bash(t, cs, sc.script("1000"), "run_in_background", true)
		sc.awaitRows()
		sc.ended = time.Now()
		callTool(t, cs, "task_stop", map[string]any{"task_id": task.TaskID})
		return
	default:
		bash(t, cs, sc.script("1000"), "run_in_background", true)
		sc.awaitRows()
	}
	sc.ended = time.Now()
	sc.endHTTP(r, cs)
}

// endHTTP ends the session of an HTTP scenario whose rows run (but for the ends that end it as they
// start it).
func (sc *scenario) endHTTP(r *reaperProc, cs *mcp.ClientSession) {
	t := sc.t
	if sc.end.signal != 0 {
		r.cmd.Process.Signal(sc.end.signal)
	}
	switch sc.end.name {
	case "SIGKILL reaper":
		r.cmd.Process.Kill()
	case "restart after both killed", "restart after both killed, --pid-namespace=off":
		sc.killBoth(r)
		again := startHTTP(t, sc.reaperArgs()...)
		sc.done, sc.served = again.done, again
	case "guard and server SIGKILLed together, no restart", "guard and server SIGKILLed together, no restart, --pid-namespace=off":
		sc.killBoth(r)
	}
	if sc.end.killer {
		sc.letKillerKill(r)
	}
	switch sc.end.name {
	case "DELETE":
		sc.meanwhile(func() { cs.Close() })
	case "DELETE during a 60 s call":
		// The go-sdk client's Close waits for its calls in flight, so the DELETE goes out by hand,
		// as a client that ends a session while a call runs sends it.
		req, _ := http.NewRequest(http.MethodDelete, sc.served.url, nil)
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Authorization", "Bearer "+sc.served.token)
		sc.meanwhile(func() {
			resp, err := testutil.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Errorf("DELETE during a call: %s", resp.Status)
			}
		})
	}
}

// killBoth kills reaper's guard and server together: stopped first, so that neither can act on the
// other's death.
func (sc *scenario) killBoth(r *reaperProc) {
	server := serverOf(sc.t, sc.guard)
	for _, pid := range []int{sc.guard, server} {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range []int{server, sc.guard} {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-r.done
	sc.ended = time.Now()
}

// letKillerKill moves reaper's guard and server into the cgroup the no-trail row kills (the two of
// them, nothing else), tells the row to kill it, and waits for reaper to be dead.
func (sc *scenario) letKillerKill(r *reaperProc) {
	t := sc.t
	server := serverOf(t, sc.guard)
	for _, pid := range []int{sc.guard, server} {
		if err := os.WriteFile(filepath.Join(sc.kill, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(sc.goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the no-trail row did not kill reaper")
	}
	sc.ended = time.Now()
}

// sweep removes what a reaper that died and never started again left: the test's own cleanup, as
// `reaper sweep` does it for an operator.
func (sc *scenario) sweep() {
	if out, code := runOnce(sc.t, nil, append([]string{"sweep"}, sc.p.args()...)...); code != 0 {
		sc.t.Errorf("reaper sweep: exit %d\n%s", code, out)
	}
}

// awaitCleared waits, for a while, until reaper has removed its slices and state: where its guard
// was killed, its server removes them as it ends, which can come after the guard's exit and the
// rows' deaths that the test saw (seen under an emulated CPU). assertNothingLeft then says what is
// left.
func (sc *scenario) awaitCleared() {
	for deadline := time.Now().Add(testutil.Slow(10 * time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		left, _ := os.ReadDir(sc.p.stateDir)
		entries, _ := os.ReadDir(sc.p.root) // none in process containment
		for _, e := range entries {
			if e.IsDir() { // a slice; the rest are the cgroup's own files
				left = append(left, e)
			}
		}
		if len(left) == 0 {
			return
		}
	}
}

// meanwhile runs f while the scenario checks its rows; the test waits for it.
func (sc *scenario) meanwhile(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	sc.t.Cleanup(func() { <-done })
}

func (sc *scenario) viaClient() {
	t := sc.t
	extra := []string{"--idle-timeout", "2s"}
	if strings.HasPrefix(sc.end.name, "keepalive") {
		extra = []string{"--keepalive", "500ms"}
	}
	r := startHTTP(t, sc.reaperArgs(extra...)...)
	sc.guard, sc.done, sc.served = r.cmd.Process.Pid, r.done, r
	client := testutil.Helper("matrix-client", "E2E_URL="+r.url, "E2E_TOKEN="+r.token, "E2E_SCRIPT="+sc.script("1000"),
		"E2E_ROWS="+sc.file, "E2E_LINES="+strconv.Itoa(sc.lines()))
	client.Stderr = nil
	out, _ := client.StdoutPipe()
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Process.Signal(syscall.SIGCONT)
		client.Process.Kill()
		client.Wait()
	})
	if line := helperLine(t, out, "the client's task"); line != "READY" {
		t.Fatalf("the client: %s", line)
	}
	sc.before = sc.recorded()
	sc.awaitLeft()
	sc.ended = time.Now()
	if strings.HasPrefix(sc.end.name, "keepalive") {
		client.Process.Signal(syscall.SIGSTOP)
	} else {
		client.Process.Kill()
	}
}

func (sc *scenario) viaRun() {
	t := sc.t
	args := append(append([]string{"run"}, sc.reaperArgs()...), "--", "bash", "-c", sc.script("2")+"; exit 0")
	cmd := reaperCmd(args...)
	cmd.Env = os.Environ()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	sc.awaitRows()
	// The job's own process (the exec row) ends 2 s after it began: that is the end.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	testutil.Eventually(t, "the job's own process to end", func() bool {
		for _, p := range sc.recorded()["exec"] {
			if testutil.Running(p) {
				return false
			}
		}
		return true
	})
	sc.ended = time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("reaper run: %v\n%s", err, &stderr)
		}
	case <-time.After(time.Minute):
		t.Error("reaper run did not exit")
	}
	sc.done = make(chan struct{})
	close(sc.done)
}

// recorded returns the processes each row recorded, identified now by pid and start time (zombies
// too); a pid already gone is left out. The rows print their PID namespace's pids, which are mapped to
// the host's (and can no longer be once the namespace is gone).
func (sc *scenario) recorded() map[string][]testutil.Proc {
	out := map[string][]testutil.Proc{}
	b, _ := os.ReadFile(sc.file)
	ns := testutil.NSIn(string(b))
	var hosts map[int]int
	if ns != "" && !sc.pinned {
		hosts, sc.pinned = testutil.PinNS(sc.t, ns), true // the first call comes while the rows run
	} else {
		hosts = testutil.HostPids(ns)
	}
	w := proc.NewWalker()
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		pid, _ := strconv.Atoi(f[1])
		if hosts != nil {
			if pid = hosts[pid]; pid == 0 {
				continue
			}
		}
		if st, ok := w.Stat(pid); ok {
			out[f[0]] = append(out[f[0]], testutil.Proc{Pid: pid, Start: st.Start})
		}
	}
	return out
}

// check waits, up to the column's budget from the end, for each row to be all dead: its recorded
// processes and whatever carries its mark. The recorded ones are identified before the end.
//
// What a look at /proc proves: a row seen alive by a look that began after the deadline outlived
// it, and fails; a row seen dead died before the look ended. A look takes time (tens of
// milliseconds), and on a machine loaded enough the test itself is held up for seconds, in its
// looks and in its 5 ms sleeps; reaper is held up alike, so the deadline is the budget plus the
// longest hold-up the test measured in the same check, and the table shows any such hold-up.
func (sc *scenario) check() {
	t := sc.t
	before := sc.before
	if before == nil {
		before = sc.recorded()
	}
	pending := map[string]bool{}
	for _, esc := range sc.rows {
		pending[esc.row] = true
	}
	var alive map[string][]testutil.Proc
	var heldUp time.Duration // the longest look, or oversleep of a 5 ms sleep
	for {
		began := time.Since(sc.ended)
		alive = sc.alive(before)
		took := time.Since(sc.ended)
		heldUp = max(heldUp, took-began)
		for row := range pending {
			if len(alive[row]) > 0 {
				continue
			}
			sc.result[row] = took.Round(time.Millisecond).String()
			if took > sc.end.budget {
				// Seen dead only by a look that ended past the budget: a row with a limit is not held
				// to the budget (its end is not reaper's to make); any other died within the budget
				// plus the hold-up, or it would have been seen alive after that.
				if why, limited := sc.limit(row); limited {
					sc.result[row] = "LIMIT: " + why
				} else if _, expected := sc.survives(row); expected {
					sc.result[row] += " (past the budget; expected alive)"
				} else {
					sc.result[row] += fmt.Sprintf(" (machine held the test up %v)", heldUp.Round(time.Millisecond))
				}
			}
			delete(pending, row)
		}
		if len(pending) == 0 || began > sc.end.budget+heldUp {
			break
		}
		nap := time.Now()
		time.Sleep(5 * time.Millisecond)
		heldUp = max(heldUp, time.Since(nap)-5*time.Millisecond)
	}
	for row := range pending { // seen alive by a look that began past the deadline
		if why, limited := sc.limit(row); limited {
			sc.result[row] = "LIMIT: " + why
		} else if why, expected := sc.survives(row); expected {
			sc.result[row] = "ALIVE: " + why
		} else {
			sc.result[row] = "FAIL: " + describe(alive[row])
			t.Errorf("%s: %s survived %v after the end (its budget %v, and %v the machine held the test up): %s",
				sc.mode, row, time.Since(sc.ended).Round(time.Millisecond), sc.end.budget, heldUp.Round(time.Millisecond), describe(alive[row]))
		}
		for _, p := range alive[row] {
			syscall.Kill(p.Pid, syscall.SIGKILL) // the test's own cleanup
		}
	}
}

// survives returns why row is expected to outlive the column's end, if it is.
func (sc *scenario) survives(row string) (why string, expected bool) {
	for _, k := range []string{row, sc.mode + "/" + row, "*"} {
		if why, expected = sc.end.survives[k]; expected {
			return why, true
		}
	}
	return "", false
}

// limit returns why the column's end cannot hold row in this scenario's mode, if it cannot.
func (sc *scenario) limit(row string) (why string, limited bool) {
	if why, limited = sc.end.limits[row]; !limited {
		why, limited = sc.end.limits[sc.mode+"/"+row]
	}
	return why, limited
}

// alive returns, by row, the processes that still run: those identified before the end, those
// recorded since, and those carrying the row's mark. The zombies row counts its zombies too, until
// they are reaped. It reads each process's environment once.
func (sc *scenario) alive(before map[string][]testutil.Proc) map[string][]testutil.Proc {
	out := map[string][]testutil.Proc{}
	seen := map[int]bool{}
	add := func(row string, p testutil.Proc) {
		if !seen[p.Pid] && testutil.Running(p) {
			seen[p.Pid] = true
			out[row] = append(out[row], p)
		}
	}
	now := sc.recorded()
	for row, ps := range before {
		for _, p := range ps {
			add(row, p)
		}
	}
	for row, ps := range now {
		for _, p := range ps {
			add(row, p)
		}
	}
	prefix := []byte("E2E_ROW=" + sc.mark)
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/environ")
		i := bytes.Index(b, prefix)
		if err != nil || i < 0 || (i > 0 && b[i-1] != 0) {
			continue
		}
		row, _, _ := bytes.Cut(b[i+len(prefix):], []byte{0})
		pid, _ := strconv.Atoi(filepath.Base(d))
		if p, ok := testutil.ProcOf(pid); ok {
			add(string(row), p)
		}
	}
	w := proc.NewWalker()
	zombies := map[testutil.Proc]bool{}
	for _, p := range append(before["zombie"], now["zombie"]...) {
		if st, ok := w.Stat(p.Pid); ok && st.Start == p.Start && !zombies[p] {
			zombies[p] = true
			out["zombies"] = append(out["zombies"], p) // not reaped yet
		}
	}
	return out
}

func describe(ps []testutil.Proc) string {
	var s []string
	for _, p := range ps {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/comm")
		s = append(s, fmt.Sprintf("%s (pid %d)", strings.TrimSpace(string(b)), p.Pid))
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// servesAnother checks, where reaper lives on after the end, that the ended session left no cgroup
// (where the session did end) and that reaper serves a new session.
func (sc *scenario) servesAnother() {
	t := sc.t
	if sc.end.name != "task_stop" && sc.end.name != "foreground timeout" && sc.p.root != "" {
		testutil.Eventually(t, "the ended session's cgroup to go", func() bool {
			left, _ := filepath.Glob(filepath.Join(sc.p.root, "r*", "s-*"))
			return len(left) == 0
		})
	}
	cs := sc.served.connect(t)
	if r := bash(t, cs, "echo still serving"); r.Output != "still serving\n" {
		t.Errorf("reaper no longer serves a new session: %+v", r)
	}
}

// matrixTable renders the results as one Markdown table per mode: a row per way a session ends, a
// column per escape.
func matrixTable(results map[string]map[string]map[string]string) string {
	var b strings.Builder
	b.WriteString("# reaper: every escape against every way a session ends\n\n")
	b.WriteString("A cell is the time from the session's end until every process of the escape was dead (not running, not a zombie), ")
	b.WriteString("FAIL with what survived the budget, LIMIT with why a mode cannot hold it (below the table), ")
	b.WriteString("ALIVE where the row was expected to survive and did, with why (below the table), ")
	b.WriteString("with how long the machine held the test up when a time is past the budget (the deadline moves by as much), ")
	b.WriteString("or n/a: a row that needs root, or that leaves its cgroup, in process containment. ")
	b.WriteString("Reaper runs with its default --pid-namespace (auto: here, as root, each session in a PID namespace of its own) ")
	b.WriteString("but in the ends named with --pid-namespace=off, which repeat the ends where reaper itself dies without it. ")
	b.WriteString("The escapes are described in test/e2e/matrix_linux_test.go.\n")
	for _, mode := range []string{"cgroup", "process"} {
		fmt.Fprintf(&b, "\n## %s containment\n\n| end (budget) |", mode)
		for _, esc := range escapes {
			fmt.Fprintf(&b, " %s |", esc.row)
		}
		b.WriteString("\n| --- |")
		for range escapes {
			b.WriteString(" --- |")
		}
		b.WriteString("\n")
		var notes []string // the reasons of LIMIT cells, numbered
		for _, e := range ends {
			fmt.Fprintf(&b, "| %s (%v) |", e.name, testutil.Slow(e.budget))
			for _, esc := range escapes {
				cell := results[mode][e.name][esc.row]
				for _, kind := range []string{"LIMIT", "ALIVE"} {
					if why, ok := strings.CutPrefix(cell, kind+": "); ok {
						note := fmt.Sprintf("%s, %s: %s.", e.name, esc.row, why)
						if e.survives["*"] == why {
							note = fmt.Sprintf("%s, every row: %s.", e.name, why)
						}
						if n := slices.Index(notes, note); n >= 0 {
							cell = fmt.Sprintf("%s %d", kind, n+1)
						} else {
							notes = append(notes, note)
							cell = fmt.Sprintf("%s %d", kind, len(notes))
						}
					}
				}
				if cell == "" {
					cell = "not run"
				}
				fmt.Fprintf(&b, " %s |", cell)
			}
			b.WriteString("\n")
		}
		if len(notes) > 0 {
			b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
		}
	}
	return b.String()
}
