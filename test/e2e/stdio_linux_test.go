package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/cgreaper/reaper/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOversizedStdioRequest: over stdio a request longer than the limit gets a JSON-RPC error that
// names the limit, and the session goes on, as over HTTP. The go-sdk client puts the id first;
// the TypeScript SDK after the params, so the second request is written by hand that way.
func TestOversizedStdioRequest(t *testing.T) {
	huge := strings.Repeat("x", mcpserver.DefaultMaxCallBytes+1<<20)
	t.Run("go-sdk client", func(t *testing.T) {
		cs, _, stderr := connectStdio(t, cgroupArgs(t)...)
		bash(t, cs, "cd /tmp")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": huge}})
		if err == nil || !strings.Contains(err.Error(), "over the limit of 1 MiB (--max-call-size)") {
			t.Fatalf("a %d-byte request: %v, want an error naming the limit\n%s", len(huge), err, stderr)
		}
		if r := bash(t, cs, "pwd"); r.Output != "/tmp\n" {
			t.Errorf("the session did not go on: %+v", r)
		}
	})
	t.Run("id after the params", func(t *testing.T) {
		cmd := reaperCmd(append([]string{"serve"}, cgroupArgs(t)...)...)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		stderr := &testutil.Buffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); cmd.Wait() })
		lines := bufio.NewReader(stdout)
		send := func(msg string) {
			t.Helper()
			if _, err := stdin.Write([]byte(msg + "\n")); err != nil {
				t.Fatal(err)
			}
		}
		reply := func(id int) map[string]any {
			t.Helper()
			for {
				line, err := lines.ReadBytes('\n')
				if err != nil {
					t.Fatalf("no reply to request %d: %v\n%s", id, err, stderr)
				}
				var m map[string]any
				if json.Unmarshal(line, &m) == nil && m["id"] == float64(id) {
					return m
				}
			}
		}
		send(`{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}},"jsonrpc":"2.0","id":1}`)
		reply(1)
		send(`{"method":"notifications/initialized","jsonrpc":"2.0"}`)
		send(`{"method":"tools/call","params":{"name":"bash","arguments":{"command":"` + huge + `"}},"jsonrpc":"2.0","id":2}`)
		m := reply(2)
		e, _ := m["error"].(map[string]any)
		if msg, _ := e["message"].(string); e["code"] != float64(-32600) || !strings.Contains(msg, "over the limit of 1 MiB (--max-call-size)") {
			t.Fatalf("reply to the oversized request: %v", m)
		}
		send(`{"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo still serving"}},"jsonrpc":"2.0","id":3}`)
		if m := reply(3); !strings.Contains(mustJSON(m["result"]), "still serving") {
			t.Errorf("after the oversized request: %v", m)
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
