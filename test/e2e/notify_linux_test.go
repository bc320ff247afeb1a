package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestProgressAndTaskEndNotifications(t *testing.T) {
	p := startHTTP(t, cgroupArgs(t)...)
	var mu sync.Mutex
	var progress []string
	logged := make(chan map[string]any, 4)
	handlers := &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		},
		//lint:ignore SA1019 the task-end notification is a log message for 2025-11-25 clients (mcpserver.Server.taskEnded)
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			if m, ok := req.Params.Data.(map[string]any); ok {
				logged <- m
			}
		},
	}
	ctx := context.Background()
	cs, err := mcptest.DialHTTP(ctx, p.url, mcptest.Options{Client: handlers, Token: p.token})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "for i in 1 2 3; do echo step$i; sleep 0.6; done"}}
	params.SetProgressToken("build-1")
	if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatal(err, textOf(res))
	}
	mu.Lock()
	got := strings.Join(progress, " | ")
	mu.Unlock()
	if len(progress) == 0 || !strings.Contains(got, "step") || !strings.Contains(got, "lines") {
		t.Errorf("progress notifications for a 2 s command: %q", got)
	}

	// A background task's end is announced once the client has asked for log messages.
	//lint:ignore SA1019 as above: a client that wants the notification sets a logging level
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	task := bash(t, cs, "sleep 0.2; exit 3", "run_in_background", true, "description", "short job")
	select {
	case m := <-logged:
		if m["task_id"] != task.TaskID || m["status"] != "failed" || m["exit_code"] != float64(3) {
			t.Errorf("task-end notification %v, want task %s failed with 3", m, task.TaskID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no notification when the background task ended")
	}
}

func TestCrossOriginAndRebinding(t *testing.T) {
	p := startHTTP(t, cgroupArgs(t)...)
	for _, tc := range []struct {
		name   string
		header map[string]string
		host   string
	}{
		{"cross-site browser request", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, ""},
		{"DNS rebinding", nil, "evil.example:8765"},
	} {
		req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := testutil.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", tc.name, resp.Status)
		}
	}
}

func TestKeepAliveEndsUnresponsiveClient(t *testing.T) {
	p := startHTTP(t, append(cgroupArgs(t), "--grace", grace.String(), "--keepalive", "500ms", "--idle-timeout", "10m")...)
	client, ps := startClient(t, p)
	// A stopped client keeps its connections open but answers no ping.
	client.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	testutil.AwaitDead(t, ps, 15*time.Second)
	t.Logf("dead %v after the client stopped answering (keepalive 500ms)", time.Since(stopped))
}

func TestSecondSignalSkipsTheGracePeriod(t *testing.T) {
	p := startHTTP(t, append(cgroupArgs(t), "--grace", "60s")...)
	cs := p.connect(t)
	pid := filepath.Join(t.TempDir(), "pid")
	r := bash(t, cs, `sh -c 'trap "" TERM; echo $$ > `+pid+`; exec sleep 1000' & `+testutil.AwaitLines(pid, 1)+"; "+testutil.ShowNS)
	ps := testutil.PidsIn(t, r.Output)
	p.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond) // not readiness: the process must still run a while into the grace period
	if !testutil.Running(ps[0]) {
		t.Fatal("the SIGTERM-ignoring process died before the grace period ended")
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	testutil.AwaitDead(t, ps, 5*time.Second)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("reaper exited with %v", p.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reaper did not exit after the second signal")
	}
}
