package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/testutil"
)

// badRequest is one raw HTTP request that reaper must refuse without acting on it.
type badRequest struct {
	name    string
	method  string // POST unless set
	header  map[string]string
	body    string // a tools/call that would touch the case's file unless set
	session string // alice's session id unless set; "-" for none
	token   string // alice's unless set; "-" for none
	host    string
	want    int
	// wantText, if set, must appear in the answer (for refusals answered inside JSON-RPC).
	wantText string
}

// TestBadHTTPInput sends malformed, misdirected and hostile requests straight to the endpoint. Each
// gets an error status (or a JSON-RPC error) and has no side effect: the commands in the refused
// bodies never run, alice's processes still run, no session is made or ended, and reaper serves on.
func TestBadHTTPInput(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("alice tok-alice\nbob tok-bob\n"), 0o600)
	p, admin := startAdmin(t, append(cgroupArgs(t), "--token-file", tokens)...)
	alice := connectHTTP(t, p.url, "tok-alice")
	ps := escapees(t, alice)
	dir := t.TempDir()
	guard, _ := testutil.ProcOf(p.cmd.Process.Pid)
	server, _ := testutil.ProcOf(serverOf(t, guard.Pid))

	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch %s"}}}`
	const list = `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`
	v0618 := map[string]string{"Mcp-Protocol-Version": "2025-06-18"}
	long := strings.Repeat("A", 300)
	cases := []badRequest{
		{name: "malformed JSON", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch X"`, want: 400},
		{name: "not JSON-RPC", body: `{"command":"touch X"}`, want: 400},
		{name: "JSON-RPC 1.0", body: `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch X"}}}`, want: 400},
		{name: "an id that is an object", body: `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch X"}}}`, want: 400},
		{name: "an empty batch", body: `[]`, want: 400},
		{name: "a batch under 2025-06-18", header: v0618, body: "[" + call + "," + call + "]", want: 400},
		{name: "text/plain", header: map[string]string{"Content-Type": "text/plain"}, want: 415},
		{name: "an unsupported protocol version", header: map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, want: 400},
		{name: "an unknown session", session: "NOSUCHSESSION", want: 404},
		{name: "a session id of 300 bytes", session: long, want: 404},
		{name: "bob's POST to alice's session", token: "tok-bob", want: 403},
		{name: "bob's GET of alice's stream", method: http.MethodGet, token: "tok-bob", want: 403},
		{name: "bob's DELETE of alice's session", method: http.MethodDelete, token: "tok-bob", want: 403},
		{name: "no token", token: "-", want: 401},
		{name: "a wrong token", token: "tok-mallory", want: 401},
		{name: "a token in another scheme", token: "-", header: map[string]string{"Authorization": "Basic dG9rLWFsaWNl"}, want: 401},
		{name: "POST from a foreign Origin", header: map[string]string{"Origin": "http://evil.example"}, want: 403},
		{name: "GET from a foreign Origin", method: http.MethodGet, header: map[string]string{"Origin": "http://evil.example"}, want: 403},
		{name: "DELETE from a foreign Origin", method: http.MethodDelete, header: map[string]string{"Origin": "http://evil.example"}, want: 403},
		{name: "POST with a rebinding Host", host: "evil.example", want: 403},
		{name: "GET with a rebinding Host", method: http.MethodGet, host: "evil.example:8765", want: 403},
		{name: "DELETE with a rebinding Host", method: http.MethodDelete, host: "evil.example", want: 403},
		{name: "PUT", method: http.MethodPut, want: 405},
		{name: "a header of 2 MB", header: map[string]string{"X-Filler": strings.Repeat("a", 2<<20)}, want: 431},
		{name: "a body of 17 MiB", body: fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch X; : %s"}}}`, strings.Repeat("x", 17<<20)), want: 200, wantText: "over the limit of 1 MiB (--max-call-size)"},
		{name: "a body of 65 MiB", body: fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch X; : %s"}}}`, strings.Repeat("x", 65<<20)), want: 413,
			// refused by its length, unread: a client that waits for 100 Continue gets the answer
			header: map[string]string{"Expect": "100-continue"}},
		{name: "DELETE without a session id", method: http.MethodDelete, session: "-", want: 400},
		{name: "a tools/call without a session id", session: "-", wantText: `"error"`, want: 200},
		{name: "an unknown method", body: `{"jsonrpc":"2.0","id":9,"method":"processes/killall"}`, want: 400},
		{name: "a second initialize", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, wantText: "duplicate", want: 200},
		{name: "an unknown tool", body: `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"rm","arguments":{"command":"touch X"}}}`, wantText: "unknown tool", want: 200},
		{name: "arguments that are not an object", body: `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"bash","arguments":"touch X"}}`, wantText: `"isError":true`, want: 200},
		{name: "tools/list under an unknown session", session: "NOSUCHSESSION", body: list, want: 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			marker := filepath.Join(dir, testutil.UniqueName("ran-"))
			body := c.body
			if body == "" && (c.method == "" || c.method == http.MethodPost) {
				body = fmt.Sprintf(call, marker)
			}
			body = strings.ReplaceAll(body, "touch X", "touch "+marker)
			method := c.method
			if method == "" {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, p.url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			switch c.session {
			case "":
				req.Header.Set("Mcp-Session-Id", alice.ID())
			case "-":
			default:
				req.Header.Set("Mcp-Session-Id", c.session)
			}
			switch c.token {
			case "":
				req.Header.Set("Authorization", "Bearer tok-alice")
			case "-":
			default:
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			if c.host != "" {
				req.Host = c.host
			}
			resp, err := testutil.Do(req)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode != c.want || !strings.Contains(string(b), c.wantText) {
				t.Errorf("answered %s %.300q; want %d with %q", resp.Status, b, c.want, c.wantText)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the command in the refused request ran")
			}
			if !testutil.Running(guard) || !testutil.Running(server) {
				t.Fatalf("reaper died:\n%s", p.stderr)
			}
		})
	}

	if alive := testutil.Alive(ps); len(alive) != len(ps) {
		t.Errorf("the bad requests killed alice's processes: %d of %d left", len(alive), len(ps))
	}
	if got := bash(t, alice, "echo alice").Output; got != "alice\n" {
		t.Errorf("alice's session after the bad requests: %q", got)
	}
	awaitSample(t, admin, "reaper_sessions_active", equal(1))
	if ended, ok := sample(adminScrape(t, admin), `reaper_sessions_ended_total{reason="delete"}`); ok && ended != 0 {
		t.Errorf("a bad request ended %v sessions", ended)
	}
	bob := connectHTTP(t, p.url, "tok-bob")
	if got := bash(t, bob, "echo bob").Output; got != "bob\n" {
		t.Errorf("a new session after the bad requests: %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "ran-*")); len(left) > 0 {
		t.Errorf("commands of refused requests ran: %v", left)
	}
}

// adminScrape returns a scrape of reaper's /metrics.
func adminScrape(t testing.TB, admin string) string {
	t.Helper()
	_, body := testutil.Get(t, admin+"/metrics", "")
	return body
}
