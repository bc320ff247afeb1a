package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// helpers are modes of this test binary that tests run as separate processes.
var helpers = map[string]func() int{
	// client connects to E2E_URL, starts escapees in a background task, prints their pids on one
	// line and waits to be killed: a client that vanishes without a goodbye.
	"client": func() int {
		ctx, cancel := context.WithTimeout(context.Background(), helperDeadline)
		defer cancel()
		cs, err := mcptest.DialHTTP(ctx, os.Getenv("E2E_URL"), mcptest.Options{Token: os.Getenv("E2E_TOKEN")})
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": `setsid sh -c 'echo $$; exec sleep 1000' & echo $$; ` + testutil.ShowNS + `; exec sleep 1000`, "run_in_background": true}})
		if err != nil || res.IsError {
			fmt.Println("ERR", err, textOf(res))
			return 1
		}
		var started struct {
			TaskID string `json:"task_id"`
		}
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &started)
		var out string
		for strings.Count(out, "\n") < 3 {
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "task_output", Arguments: map[string]any{"task_id": started.TaskID}})
			if err != nil {
				fmt.Println("ERR", err)
				return 1
			}
			var o struct{ Output string }
			b, _ := json.Marshal(r.StructuredContent)
			json.Unmarshal(b, &o)
			out += o.Output
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Println("PIDS", strings.Join(strings.Fields(out), " "))
		if f := os.Getenv("E2E_PIDFILE"); f != "" {
			// Vanish in the middle of a long foreground call.
			cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
				"command": "echo $$ $(" + testutil.ShowNS + ") > " + f + "; exec sleep 1000", "timeout": 600000}})
		}
		select {} // until SIGKILL
	},
	"seccomp-serve": seccompServe,
}

func TestToolsAndSchemas(t *testing.T) {
	cs, _, _ := connectStdio(t, cgroupArgs(t)...)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{ // tool -> required arguments
		"bash":        {"command"},
		"task_output": {"task_id"},
		"task_stop":   {"task_id"},
		"task_list":   nil,
		"write_stdin": {"task_id"},
	}
	props := map[string][]string{
		"bash":        {"cols", "command", "description", "max_output", "rows", "run_in_background", "stdin", "timeout", "tty"},
		"task_output": {"block", "grep", "max_output", "offset", "tail", "task_id", "timeout"},
		"task_stop":   {"task_id"},
		"task_list":   nil,
		"write_stdin": {"chars", "close_stdin", "cols", "max_output", "rows", "task_id", "wait_ms"},
	}
	if len(res.Tools) != len(want) {
		t.Errorf("%d tools, want %d", len(res.Tools), len(want))
	}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type       string                     `json:"type"`
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		json.Unmarshal(b, &schema)
		var names []string
		for n := range schema.Properties {
			names = append(names, n)
		}
		slices.Sort(names)
		if schema.Type != "object" || !slices.Equal(schema.Required, want[tool.Name]) || !slices.Equal(names, props[tool.Name]) {
			t.Errorf("%s: schema %s; want required %v, properties %v", tool.Name, b, want[tool.Name], props[tool.Name])
		}
		mcptest.CheckPortableSchemas(t, tool)
	}
	// What each description must tell a model: when to use the tool, and what its limits are.
	tells := map[string][]string{
		"bash": {"600000", "120000", "max_output characters of it (default 30000", "64 MiB", "output_file", "write_stdin",
			"stdin=true", "tty=true", "At most 10 background tasks", "killed when the session ends"},
		"task_output": {"output_task_id", "offset", "grep", "tail", "block=true", "instead of polling", "waiting for input"},
		"task_stop":   {"whole process tree"},
		"task_list":   {"output file", "waits for input"},
		"write_stdin": {"stdin=true or tty=true", "python3 -i", "password", `\u0003 Ctrl-C`, `\u0004 Ctrl-D`, "close_stdin", "wait_ms"},
	}
	for _, tool := range res.Tools {
		for _, want := range tells[tool.Name] {
			if !strings.Contains(tool.Description, want) {
				t.Errorf("the %s tool's description does not tell agents %q", tool.Name, want)
			}
		}
	}
}

func TestEchoAndWorkingDirectory(t *testing.T) {
	p := startHTTP(t, cgroupArgs(t)...)
	transports := map[string]func() *mcp.ClientSession{
		"stdio": func() *mcp.ClientSession { cs, _, _ := connectStdio(t, cgroupArgs(t)...); return cs },
		"http":  func() *mcp.ClientSession { return p.connect(t) },
	}
	for name, connect := range transports {
		t.Run(name, func(t *testing.T) {
			cs := connect()
			r := bash(t, cs, "echo hello")
			if cs.ID() != "" {
				// The MCP session id authorizes requests; it must not leak into tasks.
				if env := bash(t, cs, "env").Output; strings.Contains(env, cs.ID()) {
					t.Errorf("the session id %s is in the tasks' environment", cs.ID())
				}
			}
			if r.Output != "hello\n" || r.ExitCode == nil || *r.ExitCode != 0 || r.Status != "completed" {
				t.Errorf("echo hello: %+v", r)
			}
			dir := t.TempDir()
			bash(t, cs, "cd "+dir)
			if r := bash(t, cs, "pwd; exit 4"); r.Output != dir+"\n" || r.Cwd != dir || *r.ExitCode != 4 {
				t.Errorf("cwd not kept: %+v", r)
			}
			start := time.Now()
			if r := bash(t, cs, "sleep 3 & echo started"); r.Output != "started\n" || time.Since(start) > 2*time.Second {
				t.Errorf("a background child held the call for %v: %+v", time.Since(start), r)
			}
		})
	}
}

// TestHTTPSessionsAreSeparate: two HTTP sessions at once keep their own working directories, cannot
// reach each other's tasks, and (with PID namespaces) cannot see each other's processes.
func TestHTTPSessionsAreSeparate(t *testing.T) {
	p := startHTTP(t, cgroupArgs(t)...)
	a, b := p.connect(t), p.connect(t)
	da, db := t.TempDir(), t.TempDir()
	// Both sessions at once, as parallel subtests (a helper that fails the test must run in a test's
	// own goroutine); the group returns when both are done.
	t.Run("at once", func(t *testing.T) {
		for name, s := range map[string]struct {
			cs  *mcp.ClientSession
			dir string
		}{"a": {a, da}, "b": {b, db}} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				for range 5 {
					bash(t, s.cs, "cd "+s.dir)
					if r := bash(t, s.cs, "pwd"); r.Output != s.dir+"\n" {
						t.Errorf("session saw cwd %q, want %q", r.Output, s.dir)
					}
				}
			})
		}
	})
	task := bash(t, a, "sleep 1000", "run_in_background", true)
	for _, tool := range []string{"task_output", "task_stop"} {
		if res := callTool(t, b, tool, map[string]any{"task_id": task.TaskID}); !res.IsError || !strings.Contains(textOf(res), "unknown task") {
			t.Errorf("%s of another session's task: %s", tool, textOf(res))
		}
	}
	if res := callTool(t, b, "task_list", nil); strings.Contains(textOf(res), task.TaskID) {
		t.Errorf("another session's task is listed: %s", textOf(res))
	}
	// With PID namespaces, b's processes do not even see a's: ps lists b's init, its shell and ps.
	if pidNamespaces() == "" {
		if r := bash(t, b, "ps -e -o pid=,comm="); len(strings.Split(strings.TrimSpace(r.Output), "\n")) != 3 || strings.Contains(r.Output, "sleep") {
			t.Errorf("ps in session b lists:\n%s", r.Output)
		}
	}
}

// grace is the grace period the session-end tests run reaper with; "dead within the grace period
// plus a second" is what they check.
const grace = time.Second

func TestSessionEndKillsEverything(t *testing.T) {
	t.Run("stdio close", func(t *testing.T) {
		cs, cmd, stderr := connectStdio(t, append(cgroupArgs(t), "--grace", grace.String())...)
		ps := escapees(t, cs)
		cs.Close() // closes stdin (EOF) and waits for reaper to exit
		took := testutil.AwaitDead(t, ps, grace+time.Second)
		t.Logf("dead %v after the client closed", took)
		if st := cmd.ProcessState; st == nil || st.ExitCode() != 0 {
			t.Errorf("reaper exited with %v after EOF\n%s", st, stderr)
		}
	})
	t.Run("http delete", func(t *testing.T) {
		p := startHTTP(t, append(cgroupArgs(t), "--grace", grace.String())...)
		cs := p.connect(t)
		ps := escapees(t, cs)
		cs.Close() // sends DELETE, and returns with its answer
		// The answer comes once the processes are dead (the cgroup and files may still be going).
		if alive := testutil.Alive(ps); len(alive) > 0 {
			t.Errorf("running when the DELETE was answered: %v", alive)
		}
		t.Logf("dead %v after DELETE", testutil.AwaitDead(t, ps, grace+time.Second))
		if !p.stderr.Await(`reason=delete`) {
			t.Errorf("the session end was not logged with its reason:\n%s", p.stderr)
		}
	})
	t.Run("idle timeout with a killed client", func(t *testing.T) {
		idle := 2 * time.Second
		p := startHTTP(t, append(cgroupArgs(t), "--grace", grace.String(), "--idle-timeout", idle.String())...)
		client, ps := startClient(t, p)
		client.Process.Signal(syscall.SIGKILL)
		killed := time.Now()
		testutil.AwaitDead(t, ps, idle+grace+time.Second)
		t.Logf("dead %v after the client was killed (idle timeout %v)", time.Since(killed), idle)
	})
	t.Run("idle timeout with a client killed during a long call", func(t *testing.T) {
		idle := 2 * time.Second
		p := startHTTP(t, append(cgroupArgs(t), "--grace", grace.String(), "--idle-timeout", idle.String())...)
		pidFile := t.TempDir() + "/pid"
		client, ps := startClient(t, p, "E2E_PIDFILE="+pidFile)
		ps = append(ps, pidFromFile(t, pidFile))
		client.Process.Signal(syscall.SIGKILL)
		killed := time.Now()
		testutil.AwaitDead(t, ps, idle+grace+time.Second)
		t.Logf("dead %v after the client was killed mid-call (idle timeout %v)", time.Since(killed), idle)
	})
	t.Run("idle timeout with a live idle client", func(t *testing.T) {
		idle := 2 * time.Second
		p := startHTTP(t, append(cgroupArgs(t), "--grace", grace.String(), "--idle-timeout", idle.String())...)
		cs := p.connect(t) // keeps its stream for server messages (GET) open
		ps := escapees(t, cs)
		idleSince := time.Now()
		testutil.AwaitDead(t, ps, idle+grace+time.Second)
		t.Logf("dead %v after the last request (idle timeout %v)", time.Since(idleSince), idle)
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_list"}); err == nil && !res.IsError {
			t.Error("the idle session still answers")
		}
	})
	t.Run("sigterm", func(t *testing.T) {
		p := startHTTP(t, append(cgroupArgs(t), "--grace", grace.String())...)
		ps := escapees(t, p.connect(t))
		p.cmd.Process.Signal(syscall.SIGTERM)
		t.Logf("dead %v after SIGTERM", testutil.AwaitDead(t, ps, grace+time.Second))
		select {
		case <-p.done:
			if p.err != nil {
				t.Errorf("reaper exited with %v after SIGTERM", p.err)
			}
		case <-time.After(10 * time.Second):
			t.Error("reaper did not exit after SIGTERM")
		}
	})
}

func TestDeleteDuringLongCall(t *testing.T) {
	p := startHTTP(t, cgroupArgs(t)...)
	cs := p.connect(t)
	bash(t, cs, "true") // the reaper session exists from the first call
	returned := make(chan time.Time, 1)
	pidFile := t.TempDir() + "/pid"
	go func() {
		cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": "echo $$ $(" + testutil.ShowNS + ") > " + pidFile + "; exec sleep 60", "timeout": 600000}})
		returned <- time.Now()
	}()
	ps := []testutil.Proc{pidFromFile(t, pidFile)}
	if code, took := p.deleteSession(t, cs.ID()); code != http.StatusNoContent || took > time.Second {
		t.Errorf("DELETE during a long call: %d after %v", code, took)
	}
	testutil.AwaitDead(t, ps, killedWait)
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Error("the long call did not return after DELETE")
	}
}

func TestBadInput(t *testing.T) {
	p := startHTTP(t, cgroupArgs(t)...)
	cs := p.connect(t)
	other := p.connect(t)
	otherTask := bash(t, other, "sleep 1000", "run_in_background", true).TaskID
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"bash", map[string]any{}, "command"},
		{"bash", map[string]any{"command": 42}, "command"},
		{"bash", map[string]any{"command": "true", "timeout": "soon"}, "timeout"},
		{"bash", map[string]any{"command": "true", "timeout": 0}, "between 1 and 600000"},
		{"bash", map[string]any{"command": "true", "timeout": 600001}, "between 1 and 600000"},
		{"bash", map[string]any{"command": strings.Repeat("x", 900<<10)}, "limit"},
		{"task_output", map[string]any{}, "task_id"},
		{"task_output", map[string]any{"task_id": "t-0123456789abcdef"}, "unknown task"},
		{"task_output", map[string]any{"task_id": otherTask}, "unknown task"},
		{"task_output", map[string]any{"task_id": otherTask, "block": true, "timeout": -5}, "between 1 and 600000"},
		{"task_stop", map[string]any{"task_id": otherTask}, "unknown task"},
		{"bash", map[string]any{"command": "true", "run_in_background": true, "description": strings.Repeat("d", 900<<10)}, "the limit is 1024"},
		{"task_output", map[string]any{"task_id": "t-" + strings.Repeat("0", 900<<10)}, "unknown task"},
	} {
		res := callTool(t, cs, tc.tool, tc.args)
		if len(textOf(res)) > 1000 {
			t.Errorf("%s(%.60v): an error of %d bytes: it repeats the input", tc.tool, tc.args, len(textOf(res)))
		}
		if !res.IsError || !strings.Contains(textOf(res), tc.want) {
			t.Errorf("%s(%.60v): error=%v %q; want an error result mentioning %q", tc.tool, tc.args, res.IsError, textOf(res), tc.want)
		}
	}
	if r := bash(t, cs, "echo still serving"); r.Output != "still serving\n" {
		t.Errorf("after bad input: %+v", r)
	}
	if status, _ := taskOutput(t, other, otherTask, false); status != "running" {
		t.Errorf("the other session's task was touched: %s", status)
	}
}

func TestAuthentication(t *testing.T) {
	tokens := t.TempDir() + "/tokens"
	os.WriteFile(tokens, []byte("# two identities\nalice tok-alice-123\nbob tok-bob-456\n"), 0o600)
	p := startHTTP(t, append(cgroupArgs(t), "--token-file", tokens)...)

	post := func(token, session string) int {
		req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := testutil.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code := post("tok-mallory", ""); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	alice := connectHTTP(t, p.url, "tok-alice-123")
	ps := escapees(t, alice)
	if code := post("tok-bob-456", alice.ID()); code != http.StatusForbidden {
		t.Errorf("bob using alice's session: %d, want 403", code)
	}
	req, _ := http.NewRequest(http.MethodDelete, p.url, nil)
	req.Header.Set("Mcp-Session-Id", alice.ID())
	req.Header.Set("Authorization", "Bearer tok-bob-456")
	resp, err := testutil.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob deleting alice's session: %s, want 403", resp.Status)
	}
	for _, p := range ps {
		if !testutil.Running(p) {
			t.Errorf("alice's process %d died after bob's DELETE", p.Pid)
		}
	}
	if r := bash(t, alice, "echo mine"); r.Output != "mine\n" {
		t.Errorf("alice after bob's attempts: %+v", r)
	}
	bob := connectHTTP(t, p.url, "tok-bob-456")
	if r := bash(t, bob, "echo bob"); r.Output != "bob\n" {
		t.Errorf("bob in his own session: %+v", r)
	}
}

func TestCommandLine(t *testing.T) {
	run := func(env []string, args ...string) (string, int) { return runOnce(t, env, args...) }
	out, code := run(nil, "serve", "--help")
	for _, flag := range []string{"-http", "-token", "-token-file", "-idle-timeout", "-keepalive", "-grace", "-bg-timeout", "-max-tasks", "-containment", "-cgroup-root", "REAPER_"} {
		if code != 0 || !strings.Contains(out, flag) {
			t.Errorf("serve --help (exit %d) does not list %s", code, flag)
		}
	}
	if out, code := run(nil, "version"); code != 0 || !strings.HasPrefix(out, "reaper ") {
		t.Errorf("version: %d %q", code, out)
	}
	if out, code := run(nil, "serve", "--http", "0.0.0.0:0", "--insecure-no-auth"); code != 2 || !strings.Contains(out, "refusing --insecure-no-auth") {
		t.Errorf("a public address without authentication: exit %d, %q", code, out)
	}
	if out, code := run([]string{"REAPER_MAX_TASKS=zero"}, "serve"); code != 2 || !strings.Contains(out, "REAPER_MAX_TASKS") {
		t.Errorf("a bad environment value: exit %d, %q", code, out)
	}
	if out, code := run(nil, "serve", "--containment", "magic"); code != 2 || !strings.Contains(out, "magic") {
		t.Errorf("a bad containment: exit %d, %q", code, out)
	}

	// The environment sets what flags do not; a flag wins.
	cmd := reaperCmd(append([]string{"serve", "--max-tasks", "3"}, cgroupArgs(t)...)...)
	cmd.Env = append(os.Environ(), "REAPER_MAX_TASKS=7", "REAPER_IDLE_TIMEOUT=42s")
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == "bash" && (!strings.Contains(tool.Description, "At most 3 background") || !strings.Contains(tool.Description, "42s")) {
			t.Errorf("flag and environment not applied: %s", tool.Description)
		}
	}
	stderr.Await("\n")
	first, _, _ := strings.Cut(stderr.String(), "\n")
	if !strings.Contains(first, "stdio") || !strings.Contains(first, "containment=") {
		t.Errorf("first log line %q should name the transport and the containment", first)
	}
}
