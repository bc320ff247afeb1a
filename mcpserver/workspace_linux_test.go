package mcpserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveWith runs a Server with opts (its Reaper is set here, in process containment) behind an
// httptest server with hopts, and returns it and its URL.
func serveWith(t *testing.T, opts Options, hopts HTTPOptions) (*Server, string) {
	t.Helper()
	r, err := reaper.New(reaper.Options{Containment: reaper.ContainProcess, Grace: new(200 * time.Millisecond), WorkDir: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	opts.Reaper = r
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	hs := httptest.NewServer(srv.HTTPHandler(hopts))
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

// taskCalls returns valid arguments, but for the workspace, of every tool that acts on a workspace.
func taskCalls() map[string]map[string]any {
	return map[string]map[string]any{
		"bash":            {"command": "echo never"},
		"task_output":     {"task_id": "t-1"},
		"task_stop":       {"task_id": "t-1"},
		"task_list":       {},
		"write_stdin":     {"task_id": "t-1", "chars": "x"},
		"workspace_close": {},
	}
}

// workspaceError is what every call with a handle that is not the caller's open workspace says.
const workspaceError = "no open workspace of yours has this handle"

// TestBothErasOnOneEndpoint: a client of 2025-11-25 gets a session and the session's tools; a client
// of 2026-07-28 on the same endpoint gets no session, and tools that take a workspace.
func TestBothErasOnOneEndpoint(t *testing.T) {
	_, url := serveWith(t, Options{}, HTTPOptions{Unauthenticated: true})
	old := mcptest.ConnectHTTP(t, url, mcptest.Options{})
	cur := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces})
	if v := old.InitializeResult().ProtocolVersion; v != mcptest.Sessions || old.ID() == "" {
		t.Errorf("the 2025-11-25 client: version %s, session %q", v, old.ID())
	}
	if v := cur.InitializeResult().ProtocolVersion; v != mcptest.Workspaces || cur.ID() != "" {
		t.Errorf("the 2026-07-28 client: version %s, session %q", v, cur.ID())
	}
	for _, tc := range []struct {
		cs       *mcp.ClientSession
		tools    []string
		required string // what bash requires
	}{
		{old, []string{"bash", "task_list", "task_output", "task_stop", "write_stdin"}, "command"},
		{cur, []string{"bash", "task_list", "task_output", "task_stop", "workspace_close", "workspace_list", "workspace_open", "write_stdin"}, "command workspace"},
	} {
		res, err := tc.cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			if tool.Name == "bash" {
				req := tool.InputSchema.(map[string]any)["required"].([]any)
				var got []string
				for _, r := range req {
					got = append(got, r.(string))
				}
				slices.Sort(got)
				if strings.Join(got, " ") != tc.required {
					t.Errorf("bash requires %v, want %s", got, tc.required)
				}
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, tc.tools) {
			t.Errorf("tools %v, want %v", names, tc.tools)
		}
	}
	if r := mcptest.Bash(t, old, "echo session"); r.Output != "session\n" {
		t.Errorf("the session's bash: %+v", r)
	}
	w, _ := mcptest.OpenWorkspace(t, cur)
	if r := mcptest.Bash(t, w, "echo workspace"); r.Output != "workspace\n" {
		t.Errorf("the workspace's bash: %+v", r)
	}
}

// TestWorkspaceLife opens a workspace, keeps its working directory and tasks across calls (each a
// request of its own), closes it and checks that everything it started is dead and its handle gone.
func TestWorkspaceLife(t *testing.T) {
	_, url := serveWith(t, Options{}, HTTPOptions{Unauthenticated: true})
	cs := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces})
	w, opened := mcptest.OpenWorkspace(t, cs)
	if len(w.Handle) < 26 || opened.LeaseSeconds != int(DefaultIdleTimeout/time.Second) || opened.ExpiresAt == "" {
		t.Errorf("workspace_open: %+v", opened)
	}
	dir := t.TempDir()
	mcptest.Bash(t, w, "cd "+dir)
	if r := mcptest.Bash(t, w, "pwd"); r.Output != dir+"\n" {
		t.Errorf("the working directory did not persist: %+v", r)
	}
	ps := mcptest.Escapees(t, w)
	var listed WorkspaceListOutput
	mcptest.CallInto(t, cs, "workspace_list", nil, &listed)
	if len(listed.Workspaces) != 1 || listed.Workspaces[0].Workspace != w.Handle || listed.Workspaces[0].Tasks != 1 || listed.Workspaces[0].Cwd != dir {
		t.Errorf("workspace_list: %+v", listed)
	}
	var closed WorkspaceCloseOutput
	mcptest.CallInto(t, w, "workspace_close", nil, &closed)
	if closed.Status != "closed" {
		t.Errorf("workspace_close: %+v", closed)
	}
	testutil.AwaitDead(t, ps, 5*time.Second)
	for tool, args := range taskCalls() {
		if res := mcptest.Call(t, w, tool, args); !res.IsError || !strings.Contains(mcptest.Text(res), workspaceError) {
			t.Errorf("%s after close: %s", tool, mcptest.Text(res))
		}
	}
	mcptest.CallInto(t, cs, "workspace_list", nil, &listed)
	if len(listed.Workspaces) != 0 {
		t.Errorf("a closed workspace is listed: %+v", listed)
	}
}

// TestWorkspaceArgumentErrors: a task tool without a handle says to call workspace_open; a handle
// that never was gets the one error.
func TestWorkspaceArgumentErrors(t *testing.T) {
	_, url := serveWith(t, Options{}, HTTPOptions{Unauthenticated: true})
	cs := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces})
	for _, args := range []map[string]any{{"command": "true"}, {"command": "true", "workspace": ""}, {"command": "true", "workspace": nil}} {
		res := mcptest.Call(t, cs, "bash", args)
		if !res.IsError || !strings.Contains(mcptest.Text(res), "call workspace_open first") {
			t.Errorf("bash(%v): %s", args, mcptest.Text(res))
		}
	}
	for _, handle := range []string{"ws_NOTAHANDLE", strings.Repeat("x", 512<<10)} {
		res := mcptest.Call(t, cs, "task_list", map[string]any{"workspace": handle})
		if !res.IsError || !strings.Contains(mcptest.Text(res), workspaceError) || len(mcptest.Text(res)) > 1000 {
			t.Errorf("task_list of an unknown handle: %.300s", mcptest.Text(res))
		}
	}
}

// TestWorkspaceErrorsHaveResultType: over HTTP at 2026-07-28 a tool error is a result like any
// other, with the resultType the revision requires (the MCP Inspector refuses a result without one):
// a call without a handle, with an unknown handle, with an argument of the wrong type.
func TestWorkspaceErrorsHaveResultType(t *testing.T) {
	_, url := serveWith(t, Options{}, HTTPOptions{Unauthenticated: true})
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, args := range []string{`{"command":"pwd"}`, `{"command":"pwd","workspace":"ws_NOTAHANDLE"}`, `{"command":7,"workspace":"ws_NOTAHANDLE"}`} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":` + args + `,` + meta + `}}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", mcptest.Workspaces)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "bash")
		resp, err := testutil.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"isError":true`) || !strings.Contains(string(b), `"resultType":"complete"`) {
			t.Errorf("bash(%s) at 2026-07-28: %s", args, b)
		}
	}
}

// TestWorkspacesOfAnotherIdentity: bob can neither use, list nor close alice's workspace, and learns
// nothing from trying that an unknown handle would not tell him.
func TestWorkspacesOfAnotherIdentity(t *testing.T) {
	_, url := serveWith(t, Options{}, HTTPOptions{Tokens: map[string]string{"tok-alice": "alice", "tok-bob": "bob"}})
	alice := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces, Token: "tok-alice"})
	bob := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces, Token: "tok-bob"})
	w, _ := mcptest.OpenWorkspace(t, alice)
	ps := mcptest.Escapees(t, w)
	unknown := mcptest.Text(mcptest.Call(t, bob, "task_list", map[string]any{"workspace": "ws_UNKNOWN"}))
	for tool, args := range taskCalls() {
		args["workspace"] = w.Handle
		res := mcptest.Call(t, bob, tool, args)
		if !res.IsError || mcptest.Text(res) != unknown {
			t.Errorf("bob's %s of alice's workspace: %s; want the error an unknown handle gets: %s", tool, mcptest.Text(res), unknown)
		}
	}
	var listed WorkspaceListOutput
	mcptest.CallInto(t, bob, "workspace_list", nil, &listed)
	if len(listed.Workspaces) != 0 {
		t.Errorf("bob lists alice's workspaces: %+v", listed)
	}
	if alive := testutil.Alive(ps); len(alive) != len(ps) {
		t.Errorf("alice's processes died of bob's calls: %d of %d left", len(alive), len(ps))
	}
	if r := mcptest.Bash(t, w, "echo mine"); r.Output != "mine\n" {
		t.Errorf("alice after bob's attempts: %+v", r)
	}
}

// TestWorkspaceLimit: an identity cannot hold more than MaxWorkspaces open; closing one makes room;
// another identity has its own count.
func TestWorkspaceLimit(t *testing.T) {
	_, url := serveWith(t, Options{MaxWorkspaces: 2}, HTTPOptions{Tokens: map[string]string{"tok-alice": "alice", "tok-bob": "bob"}})
	alice := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces, Token: "tok-alice"})
	bob := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces, Token: "tok-bob"})
	first, _ := mcptest.OpenWorkspace(t, alice)
	mcptest.OpenWorkspace(t, alice)
	res := mcptest.Call(t, alice, "workspace_open", nil)
	if !res.IsError || !strings.Contains(mcptest.Text(res), "2 workspaces are open for your identity") {
		t.Fatalf("a third workspace_open: %s", mcptest.Text(res))
	}
	mcptest.OpenWorkspace(t, bob)
	mcptest.Call(t, first, "workspace_close", nil)
	mcptest.OpenWorkspace(t, alice)
}

// TestWorkspaceExpires: a workspace unused for its lease ends with everything it started; a call
// that runs longer than the lease holds it.
func TestWorkspaceExpires(t *testing.T) {
	const lease = 500 * time.Millisecond
	rec := &recorder{}
	_, url := serveWith(t, Options{IdleTimeout: lease, Observer: rec}, HTTPOptions{Unauthenticated: true})
	cs := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces})
	w, _ := mcptest.OpenWorkspace(t, cs)
	if r := mcptest.Bash(t, w, "sleep 1.5; echo held"); r.Output != "held\n" {
		t.Fatalf("a call three leases long: %+v", r)
	}
	ps := mcptest.Escapees(t, w)
	used := time.Now()
	took := testutil.AwaitDead(t, ps, lease+5*time.Second)
	t.Logf("dead %v after the last call (lease %v)", time.Since(used), lease)
	if took < lease/2 {
		t.Errorf("dead %v after the last call: before the lease of %v ran out", took, lease)
	}
	if res := mcptest.Call(t, w, "task_list", nil); !res.IsError || !strings.Contains(mcptest.Text(res), workspaceError) {
		t.Errorf("task_list after expiry: %s", mcptest.Text(res))
	}
	testutil.Eventually(t, "the workspace's end observed", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return slices.ContainsFunc(rec.sessions, func(si SessionInfo) bool {
			return si.Transport == "tcp" && si.ProtocolVersion == mcptest.Workspaces
		})
	})
	op, ok := rec.find("tools/call", "workspace_open")
	if !ok || op.Transport != "tcp" || op.ProtocolVersion != mcptest.Workspaces {
		t.Errorf("workspace_open observed as %+v, %v", op, ok)
	}
}

// TestCloseEndsWorkspaces: the server's Close ends every workspace.
func TestCloseEndsWorkspaces(t *testing.T) {
	srv, url := serveWith(t, Options{}, HTTPOptions{Unauthenticated: true})
	cs := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces})
	w, _ := mcptest.OpenWorkspace(t, cs)
	ps := mcptest.Escapees(t, w)
	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.AssertDead(t, ps)
}

// TestWorkspaceProgress: a stateless call still carries progress notifications, on its own response
// stream; a background task's end is not announced (there is no stream between calls).
func TestWorkspaceProgress(t *testing.T) {
	_, url := serveWith(t, Options{}, HTTPOptions{Unauthenticated: true})
	var mu sync.Mutex
	var progress []string
	logged := make(chan struct{}, 1)
	cs := mcptest.ConnectHTTP(t, url, mcptest.Options{Protocol: mcptest.Workspaces, Client: &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Message)
		},
		//lint:ignore SA1019 a workspace must send no task-end notification, which 2025-11-25 clients get as a log message
		LoggingMessageHandler: func(context.Context, *mcp.LoggingMessageRequest) { logged <- struct{}{} },
	}})
	w, _ := mcptest.OpenWorkspace(t, cs)
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "for i in 1 2 3; do echo step$i; sleep 0.6; done"}}
	params.SetProgressToken("build-1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if res, err := w.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatal(err, mcptest.Text(res))
	}
	mu.Lock()
	got := strings.Join(progress, " | ")
	mu.Unlock()
	if !strings.Contains(got, "step") {
		t.Errorf("progress notifications of a 2 s command in a workspace: %q", got)
	}
	task := mcptest.Bash(t, w, "exit 3", "run_in_background", true)
	if status, _ := mcptest.TaskOutput(t, w, task.TaskID, true); status != "failed" {
		t.Errorf("task_output block=true: %s", status)
	}
	select {
	case <-logged:
		t.Error("a log notification reached a client of 2026-07-28")
	case <-time.After(200 * time.Millisecond):
	}
}
