package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
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

// stdinEndRuns is how often TestStdinEndAnswered pipes its requests into reaper: before, an
// initialize so piped was answered about 15 times in 20.
const stdinEndRuns = 40

// TestStdinEndAnswered: every request read before reaper's input ends is answered, every time (see
// docs/signals.md): piped in at once, initialize, tools/list and ping get their results, a line that
// is no JSON-RPC message a parse error, and a tool call an answer that says it was not run; reaper
// exits 0 and logs no error. A tool call whose command runs when the input ends is cut short and
// answered, and its command is killed.
func TestStdinEndAnswered(t *testing.T) {
	pl := place(t, "")
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`hello`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 1000"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
	}, "\n") + "\n"
	for i := range stdinEndRuns {
		cmd := reaperCmd(append([]string{"serve"}, pl.args()...)...)
		cmd.Stdin = strings.NewReader(in)
		stderr := &testutil.Buffer{}
		cmd.Stderr = stderr
		out, err := cmd.Output()
		if err != nil || strings.Contains(stderr.String(), "level=ERROR") {
			t.Fatalf("run %d: %v\n%s", i, err, stderr)
		}
		answers := map[string]map[string]any{}
		for line := range strings.Lines(string(out)) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("run %d: not JSON on stdout: %q", i, line)
			}
			answers[mustJSON(m["id"])] = m
		}
		for _, id := range []string{"1", "2", "4"} {
			if answers[id]["result"] == nil {
				t.Errorf("run %d: request %s: %v\n%s", i, id, answers[id], out)
			}
		}
		if e, _ := answers["null"]["error"].(map[string]any); e["code"] != float64(-32700) {
			t.Errorf("run %d: the line that is not JSON: %v", i, answers["null"])
		}
		if r := mustJSON(answers["3"]["result"]); !strings.Contains(r, "the client closed reaper's input") {
			t.Errorf("run %d: the tool call: %s", i, r)
		}
		if t.Failed() {
			return
		}
	}

	t.Run("a call running at the end", func(t *testing.T) {
		cmd := reaperCmd(append([]string{"serve"}, pl.args()...)...)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		stderr := &testutil.Buffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); cmd.Wait() })
		pidFile := t.TempDir() + "/pid"
		fmt.Fprintln(stdin, strings.Split(in, "\n")[0])
		fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo started; echo $$ $(`+testutil.ShowNS+`) > `+pidFile+`; exec sleep 1000"}}}`)
		var line []byte
		testutil.Eventually(t, "the call's command writing its pid", func() bool {
			line, _ = os.ReadFile(pidFile)
			return bytes.HasSuffix(line, []byte("\n"))
		})
		pids := testutil.PidsIn(t, string(line))
		ended := time.Now()
		stdin.Close()
		var answer map[string]any
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] == float64(5) {
				answer = m
			}
		}
		if err := cmd.Wait(); err != nil || time.Since(ended) > 2*time.Second {
			t.Errorf("reaper exited %v after its input ended: %v\n%s", time.Since(ended), err, stderr)
		}
		if r := mustJSON(answer["result"]); !strings.Contains(r, "started") || !strings.Contains(r, "[killed]") || !strings.Contains(r, "the client closed reaper's input") {
			t.Errorf("the call running at the end: %v", answer)
		}
		testutil.AssertDead(t, pids)
	})
}
