package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/cgreaper/reaper/reaper"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect runs a Server over in-memory transports, with a Reaper in process containment so that
// the test needs neither root nor cgroups (the binary's tests in test/e2e cover both), and returns
// the client's session. Cleanup closes everything.
func connect(t testing.TB) (*Server, *mcp.ClientSession) {
	t.Helper()
	return connectWith(t, Options{})
}

// connectWith is connect with opts for the Server (its Reaper is set here).
func connectWith(t testing.TB, opts Options) (*Server, *mcp.ClientSession) {
	t.Helper()
	srv := newTestServer(t, opts)
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx, st) }()
	t.Cleanup(func() { // after the client's session is closed (cleanups run last first)
		cancel()
		<-ran
	})
	return srv, mcptest.Connect(t, ct, mcptest.Options{})
}

// newTestServer returns a Server with opts, its Reaper set here (process containment, as connect's);
// cleanup closes both, after what the test registered later.
func newTestServer(t testing.TB, opts Options) *Server {
	t.Helper()
	r, err := reaper.New(reaper.Options{Containment: reaper.ContainProcess, Grace: new(200 * time.Millisecond), WorkDir: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	opts.Reaper = r
	srv, err := New(opts)
	if err != nil {
		r.Close(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close(context.Background())
		r.Close(context.Background())
	})
	return srv
}

func TestTaskLifecycleThroughTools(t *testing.T) {
	_, cs := connect(t)
	var started BashOutput
	mcptest.CallInto(t, cs, "bash", map[string]any{"command": "echo one; sleep 0.3; echo two; exit 2", "run_in_background": true, "description": "count"}, &started)
	if started.TaskID == "" || started.Status != "running" {
		t.Fatalf("background start: %+v", started)
	}
	var listed TaskListOutput
	mcptest.CallInto(t, cs, "task_list", nil, &listed)
	if len(listed.Tasks) != 1 || listed.Tasks[0].TaskID != started.TaskID || listed.Tasks[0].Description != "count" {
		t.Errorf("task_list: %+v", listed)
	}
	var out TaskOutput
	res := mcptest.CallInto(t, cs, "task_output", map[string]any{"task_id": started.TaskID, "block": true, "timeout": 30000}, &out)
	if out.Status != "failed" || out.ExitCode == nil || *out.ExitCode != 2 || out.Output != "one\ntwo\n" {
		t.Errorf("task_output after the end: %+v", out)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "exit code 2") {
		t.Errorf("text result %q does not say how the task ended", text)
	}
	var long BashOutput
	mcptest.CallInto(t, cs, "bash", map[string]any{"command": "sleep 1000", "run_in_background": true}, &long)
	var stopped TaskStopOutput
	mcptest.CallInto(t, cs, "task_stop", map[string]any{"task_id": long.TaskID}, &stopped)
	if stopped.Status != "killed" || stopped.Killed < 1 {
		t.Errorf("task_stop: %+v", stopped)
	}
	mcptest.CallInto(t, cs, "task_list", nil, &listed)
	for _, task := range listed.Tasks {
		if task.TaskID == long.TaskID && (task.Status != "killed" || task.Processes != 0) {
			t.Errorf("after task_stop: %+v", task)
		}
	}
}

func TestForegroundResultText(t *testing.T) {
	_, cs := connect(t)
	res := mcptest.CallInto(t, cs, "bash", map[string]any{"command": "printf 'no newline'; sleep 5 & exit 1", "timeout": 10000}, nil)
	text := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"no newline\n", "[exit code 1]", "still run in this session", "[cwd: "} {
		if !strings.Contains(text, want) {
			t.Errorf("text result %q lacks %q", text, want)
		}
	}
	res = mcptest.CallInto(t, cs, "bash", map[string]any{"command": "sleep 10", "timeout": 100}, nil)
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "timed out after 100ms") {
		t.Errorf("timeout result %q", text)
	}
}

func TestVerifier(t *testing.T) {
	v := verifier(map[string]string{"secret-a": "alice", "secret-b": "bob"})
	for token, want := range map[string]string{"secret-a": "alice", "secret-b": "bob"} {
		if ti, err := v(context.Background(), token, nil); err != nil || ti.UserID != want {
			t.Errorf("token %s: %+v, %v", token, ti, err)
		}
	}
	for _, bad := range []string{"", "secret", "secret-a ", "secret-c"} {
		if _, err := v(context.Background(), bad, nil); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("token %q: %v, want ErrInvalidToken", bad, err)
		}
	}
}

func TestMillis(t *testing.T) {
	for _, tc := range []struct {
		v    *int
		want time.Duration
		ok   bool
	}{{nil, 2 * time.Second, true}, {ptr(1), time.Millisecond, true}, {ptr(600000), 10 * time.Minute, true}, {ptr(0), 0, false}, {ptr(600001), 0, false}, {ptr(-3), 0, false}} {
		got, err := millis("timeout", tc.v, 2000)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("millis(%v) = %v, %v", tc.v, got, err)
		}
	}
}

// serveHTTP runs a Server behind an httptest server, with a Reaper in process containment.
func serveHTTP(t *testing.T) (*Server, string) {
	t.Helper()
	r, err := reaper.New(reaper.Options{Containment: reaper.ContainProcess, Grace: new(200 * time.Millisecond), WorkDir: t.TempDir(), StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	srv, err := New(Options{Reaper: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	hs := httptest.NewServer(srv.HTTPHandler(HTTPOptions{Unauthenticated: true}))
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

func connectHTTP(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	return mcptest.ConnectHTTP(t, url, mcptest.Options{})
}

// TestDeleteAnswers204 ends HTTP sessions by DELETE, many times over: each DELETE must be answered
// 204 after the processes died. (The teardown once closed the MCP session itself, racing the SDK's
// DELETE handler, which then sometimes answered 404 for a session it had just ended.)
func TestDeleteAnswers204(t *testing.T) {
	_, url := serveHTTP(t)
	for i := range 30 {
		cs := connectHTTP(t, url)
		var out BashOutput
		mcptest.CallInto(t, cs, "bash", map[string]any{"command": "sleep 1000 & echo $!; " + testutil.ShowNS}, &out)
		sleep := testutil.PidsIn(t, out.Output)
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		req.Header.Set("Mcp-Session-Id", cs.ID())
		resp, err := testutil.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE %d of a session with a tool call: %s, want 204", i, resp.Status)
		}
		if len(sleep) != 1 || len(testutil.Alive(sleep)) != 0 {
			t.Errorf("DELETE %d: the session's sleep (%q) still runs", i, out.Output)
		}
	}
}

// TestCallAfterEndIsRefused makes a tool call in the moment between a session's teardown (an idle
// timeout, say) and the close of its MCP session: it must be refused, not given a fresh reaper
// session that nobody would end.
func TestCallAfterEndIsRefused(t *testing.T) {
	srv, url := serveHTTP(t)
	cs := connectHTTP(t, url)
	mcptest.CallInto(t, cs, "bash", map[string]any{"command": "true"}, nil)
	srv.mu.Lock()
	st := srv.sessions[key{kind: kindHTTP, id: cs.ID()}]
	if st != nil {
		// As while a DELETE waits: the end leaves the MCP session open.
		st.deleteWaits = true
	}
	srv.mu.Unlock()
	if st == nil || st.rs == nil {
		t.Fatal("no reaper session after a tool call")
	}
	if err := srv.end(context.Background(), st, endIdle); err != nil {
		t.Fatal(err)
	}
	res := mcptest.CallInto(t, cs, "task_list", nil, nil)
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "session has ended (idle for") {
		t.Errorf("task_list after the teardown: error=%v %+v", res.IsError, res.Content[0])
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, other := range srv.sessions {
		if other != st {
			t.Errorf("a second session was opened after the only one ended: %+v", other)
		}
	}
}
