package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// The proof of issue 20: the go-sdk client at 2026-07-28 and at 2025-11-25 against the same reaper,
// over HTTP and over stdio. Each era's processes include what a foreground command left (setsid,
// double fork, nohup) and a background task's escapees.

// wsLease is the workspaces' lease in these tests (--idle-timeout).
const wsLease = 3 * time.Second

// workspaceName is the name a workspace goes by in reaper's logs and reaper ps (see mcpserver).
func workspaceName(handle string) string {
	sum := sha256.Sum256([]byte(handle))
	return "ws-" + hex.EncodeToString(sum[:6])
}

// unknownHandle is what a call with a handle that is not the caller's open workspace gets, in part.
const unknownHandle = "no open workspace of yours has this handle"

// hold starts a workspace's processes: what a foreground command left, and a background task's
// escapees.
func hold(t *testing.T, w *mcptest.Workspace) []testutil.Proc {
	t.Helper()
	return append(mcptest.Leftovers(t, w), mcptest.Escapees(t, w)...)
}

func TestWorkspacesOverHTTP(t *testing.T) {
	pl := place(t, "")
	tokens := t.TempDir() + "/tokens"
	os.WriteFile(tokens, []byte("alice tok-alice\nbob tok-bob\n"), 0o600)
	args := append(pl.args(), "--grace", grace.String(), "--idle-timeout", wsLease.String(), "--token-file", tokens)
	p, base := startAdmin(t, args...)
	connect := func(t *testing.T, protocol, token string) *mcp.ClientSession {
		cs := mcptest.ConnectHTTP(t, p.url, mcptest.Options{Protocol: protocol, Token: token})
		if v := cs.InitializeResult().ProtocolVersion; v != protocol {
			t.Fatalf("asked for %s, negotiated %s", protocol, v)
		}
		return cs
	}

	t.Run("2025-11-25 session, DELETE", func(t *testing.T) {
		cs := connect(t, mcptest.Sessions, "tok-alice")
		ps := append(mcptest.Leftovers(t, cs), mcptest.Escapees(t, cs)...)
		cs.Close()
		t.Logf("dead %v after DELETE", testutil.AwaitDead(t, ps, grace+time.Second))
	})
	t.Run("2026-07-28 workspace_close", func(t *testing.T) {
		cs := connect(t, mcptest.Workspaces, "tok-alice")
		w, _ := mcptest.OpenWorkspace(t, cs)
		ps := hold(t, w)
		out, code := runOnce(t, nil, append([]string{"ps"}, pl.args()...)...)
		if code != 0 || !strings.Contains(out, workspaceName(w.Handle)) {
			t.Errorf("reaper ps (exit %d) does not name workspace %s:\n%s", code, workspaceName(w.Handle), out)
		}
		mcptest.Call(t, w, "workspace_close", nil)
		t.Logf("dead %v after workspace_close", testutil.AwaitDead(t, ps, grace+time.Second))
		if res := mcptest.Call(t, w, "task_list", nil); !res.IsError || !strings.Contains(mcptest.Text(res), unknownHandle) {
			t.Errorf("task_list after workspace_close: %s", mcptest.Text(res))
		}
		if !p.stderr.Await("workspace="+workspaceName(w.Handle)) || !p.stderr.Await("session="+workspaceName(w.Handle)+" ") {
			t.Errorf("the log does not name workspace %s:\n%s", workspaceName(w.Handle), p.stderr)
		}
	})
	t.Run("2026-07-28 expiry", func(t *testing.T) {
		cs := connect(t, mcptest.Workspaces, "tok-alice")
		w, _ := mcptest.OpenWorkspace(t, cs)
		ps := hold(t, w)
		last := time.Now()
		time.Sleep(wsLease - time.Second) // not readiness: the lease must hold this long
		if alive := testutil.Alive(ps); len(alive) != len(ps) {
			t.Fatalf("%v after the last call, before the lease of %v ran out, %d of %d processes died", time.Since(last), wsLease, len(ps)-len(alive), len(ps))
		}
		testutil.AwaitDead(t, ps, 2*time.Second+grace+time.Second)
		t.Logf("dead %v after the last call (lease %v)", time.Since(last), wsLease)
	})
	t.Run("another identity", func(t *testing.T) {
		notForOthers(t, connect(t, mcptest.Workspaces, "tok-alice"), connect(t, mcptest.Workspaces, "tok-bob"))
	})
	for series, want := range map[string]float64{
		`reaper_sessions_ended_total{reason="close"}`:                                                          1,
		`reaper_sessions_ended_total{reason="expired"}`:                                                        1,
		`reaper_sessions_ended_total{reason="delete"}`:                                                         1,
		`mcp_server_session_duration_seconds_count{mcp_protocol_version="2026-07-28",network_transport="tcp"}`: 2,
	} {
		awaitSample(t, base, series, atLeast(want))
	}
	t.Run("restart", func(t *testing.T) {
		restartEnds(t, p, connect(t, mcptest.Workspaces, "tok-alice"), args)
	})
}

// TestWorkspacesOverStdio: over stdio a connection of 2026-07-28 is one implicit workspace, as one of
// 2025-11-25 is one session: the session's tools, no handle, and everything dies when the client
// closes the connection.
func TestWorkspacesOverStdio(t *testing.T) {
	for _, protocol := range []string{mcptest.Workspaces, mcptest.Sessions} {
		t.Run(protocol, func(t *testing.T) {
			cmd := reaperCmd(append([]string{"serve", "--grace", grace.String()}, cgroupArgs(t)...)...)
			stderr := &testutil.Buffer{}
			cmd.Stderr = stderr
			cs := mcptest.ConnectCommand(t, cmd, mcptest.Options{Protocol: protocol})
			if v := cs.InitializeResult().ProtocolVersion; v != protocol {
				t.Fatalf("asked for %s, negotiated %s", protocol, v)
			}
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, []string{"bash", "task_list", "task_output", "task_stop", "write_stdin"}) {
				t.Errorf("tools over stdio: %v", names)
			}
			ps := append(mcptest.Leftovers(t, cs), mcptest.Escapees(t, cs)...)
			cs.Close() // closes reaper's input and waits for it to exit
			t.Logf("dead %v after the client closed", testutil.AwaitDead(t, ps, grace+time.Second))
			if st := cmd.ProcessState; st == nil || st.ExitCode() != 0 {
				t.Errorf("reaper exited with %v after EOF\n%s", st, stderr)
			}
		})
	}
}

// notForOthers: bob can neither use, list nor close alice's workspace, and learns nothing from trying
// that an unknown handle would not tell him.
func notForOthers(t *testing.T, alice, bob *mcp.ClientSession) {
	w, _ := mcptest.OpenWorkspace(t, alice)
	ps := mcptest.Escapees(t, w)
	unknown := mcptest.Text(mcptest.Call(t, bob, "task_list", map[string]any{"workspace": "ws_UNKNOWN"}))
	for tool, args := range map[string]map[string]any{
		"bash": {"command": "echo never"}, "task_list": {}, "task_output": {"task_id": "t-1"},
		"task_stop": {"task_id": "t-1"}, "workspace_close": {},
	} {
		args["workspace"] = w.Handle
		if res := mcptest.Call(t, bob, tool, args); !res.IsError || mcptest.Text(res) != unknown {
			t.Errorf("bob's %s in alice's workspace: %s; want what an unknown handle gets: %s", tool, mcptest.Text(res), unknown)
		}
	}
	var listed struct{ Workspaces []struct{ Workspace string } }
	mcptest.Decode(t, mcptest.Call(t, bob, "workspace_list", nil), &listed)
	if len(listed.Workspaces) != 0 {
		t.Errorf("bob lists %+v", listed)
	}
	if alive := testutil.Alive(ps); len(alive) != len(ps) {
		t.Errorf("alice's processes died of bob's calls")
	}
	if r := mcptest.Bash(t, w, "echo mine"); r.Output != "mine\n" {
		t.Errorf("alice after bob: %+v", r)
	}
}

// restartEnds kills reaper (p) and its guard, both stopped first so that neither acts on the other's
// death, starts reaper again with args and checks that a workspace opened through cs ended with it:
// the new instance's sweep kills its processes, and its handle is unknown.
func restartEnds(t *testing.T, p *reaperProc, cs *mcp.ClientSession, args []string) {
	w, _ := mcptest.OpenWorkspace(t, cs)
	ps := hold(t, w)
	guard := p.cmd.Process.Pid
	server := serverOf(t, guard)
	for _, pid := range []int{guard, server} {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range []int{server, guard} {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-p.done
	restarted := time.Now()
	again := startHTTP(t, args...)
	testutil.AwaitDead(t, ps, grace+time.Second)
	t.Logf("dead %v after the restart", time.Since(restarted))
	cs = mcptest.ConnectHTTP(t, again.url, mcptest.Options{Protocol: mcptest.Workspaces, Token: "tok-alice"})
	if res := mcptest.Call(t, cs, "task_list", map[string]any{"workspace": w.Handle}); !res.IsError || !strings.Contains(mcptest.Text(res), unknownHandle) {
		t.Errorf("the old handle after a restart: %s", mcptest.Text(res))
	}
}

// TestSetLoggingLevel: logging/setLevel, which 2026-07-28 no longer has and the go-sdk client sends
// all the same, without the _meta that 2026-07-28 asks of every request, succeeds over HTTP in both
// eras and over stdio, and the connection goes on.
func TestSetLoggingLevel(t *testing.T) {
	p := startHTTP(t, place(t, "process").args()...)
	stdio, _, _ := connectStdio(t, place(t, "process").args()...)
	for name, c := range map[string]*mcp.ClientSession{
		"HTTP " + mcptest.Workspaces: mcptest.ConnectHTTP(t, p.url, mcptest.Options{Protocol: mcptest.Workspaces, Token: p.token}),
		"HTTP " + mcptest.Sessions:   mcptest.ConnectHTTP(t, p.url, mcptest.Options{Protocol: mcptest.Sessions, Token: p.token}),
		"stdio":                      stdio,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		//lint:ignore SA1019 the test is of what a client that still sends logging/setLevel gets
		if err := c.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Errorf("%s: logging/setLevel info: %v", name, err)
		}
		cancel()
		if _, err := c.ListTools(context.Background(), nil); err != nil {
			t.Errorf("%s: tools/list after logging/setLevel: %v", name, err)
		}
	}
}
