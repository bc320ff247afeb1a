package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hostile neighbours (docs/security.md): another local user, a flood of connections, wide JSON and
// a crowd of sessions, each against the real binary. Each test asserts the bound, that nothing of
// the victim's was touched, and that the server still serves and still ends clean.

// asUser runs a bash script as the test user tu, with env added, and returns its output; it is
// killed after a minute (stretched by Slow), which fails the test.
func asUser(t testing.TB, tu testutil.TestUser, script string, env ...string) string {
	t.Helper()
	out, err := runAsUser(tu, script, env...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runAsUser is asUser for a goroutine other than the test's: it returns why the script failed to
// start or to end within a minute (stretched by Slow), with its process group killed, instead of
// failing the test.
func runAsUser(tu testutil.TestUser, script string, env ...string) (string, error) {
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = "/"
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + tu.Home}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(tu.Uid), Gid: uint32(tu.Gid)}, Setpgid: true}
	// Once bash has ended, a process outside its group (timeout(1) makes a group of its own) that
	// holds the output open does not hold Wait: the output is cut after this.
	cmd.WaitDelay = testutil.Slow(10 * time.Second)
	var out testutil.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("as %s, %q: %w", tu.Name, script, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(testutil.Slow(time.Minute)):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return out.String(), fmt.Errorf("as %s, %q did not end within a minute:\n%s", tu.Name, script, &out)
	}
	return out.String(), nil
}

// rawPost is a bash function that sends one HTTP POST of $2 to 127.0.0.1:$PORT/mcp with the extra
// header lines in $1 (each ended by \r\n) on a connection of its own, and prints the response.
const rawPost = `post() { exec 3<>/dev/tcp/127.0.0.1/$PORT || return; printf 'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%bContent-Length: %d\r\nConnection: close\r\n\r\n%s' "$1" "${#2}" "$2" >&3; timeout 20 cat <&3; exec 3<&-; }; `

// portOf is the port of an endpoint URL.
func portOf(t testing.TB, url string) string {
	t.Helper()
	_, rest, _ := strings.Cut(url, "://")
	host, _, _ := strings.Cut(rest, "/")
	_, port, err := net.SplitHostPort(host)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// startOwnToken starts `reaper serve --http` with no token of the test's: reaper makes its own.
func startOwnToken(t testing.TB, args ...string) *reaperProc {
	t.Helper()
	cmd := reaperCmd(append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "REAPER_TOKEN=") // none: reaper's own
	p := startCmd(t, cmd, nil, nil)
	p.awaitServing(t)
	return p
}

// TestLocalUserWithoutTheToken: the default listener runs nothing for a local user who lacks the
// token: reaper keeps its own token in its state directory, mode 0600, which that user cannot read,
// and says where in its first log line; a request without it gets 401 and its connection closed;
// the token's holder runs commands.
func TestLocalUserWithoutTheToken(t *testing.T) {
	tu := testutil.User(t)
	pl := place(t, "")
	file := filepath.Join(pl.stateDir, instance.TokenFile)
	t.Cleanup(func() { os.Remove(file) }) // kept across restarts, by design; the placement checks for leftovers
	p := startOwnToken(t, pl.args()...)
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("reaper's own token: %v %v", fi, err)
	}
	line, _ := testutil.LogLine(p.stderr.String(), testutil.ServingHTTP)
	if !strings.Contains(line["auth"], file) {
		t.Errorf("the start-up line does not say where the token is: %q", line["auth"])
	}
	b, _ := os.ReadFile(file)
	token := strings.TrimSpace(string(b))
	if strings.Contains(p.stderr.String(), token) {
		t.Error("reaper logged its token")
	}
	marker := filepath.Join(t.TempDir(), "ran")
	call := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	out := asUser(t, tu, rawPost+`cat "$TOKEN_FILE" 2>&1; post "" "$BODY"; post "Authorization: s3cret\r\n" "$BODY"; post "Authorization: Bearer guess\r\n" "$BODY"`,
		"PORT="+portOf(t, p.url), "TOKEN_FILE="+file, "BODY="+call)
	if !strings.Contains(out, "Permission denied") || strings.Count(out, "HTTP/1.1 401") != 3 || strings.Count(out, "Connection: close") < 3 {
		t.Errorf("a local user without the token:\n%s", out)
	}
	for _, want := range []string{`send the header "Authorization: Bearer <token>"`, `must be "Bearer <token>"`, "not one this server accepts"} {
		if !strings.Contains(out, want) {
			t.Errorf("the 401s do not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Mcp-Session-Id") || strings.Contains(p.stderr.String(), "session started") {
		t.Errorf("a session was made for a client without the token:\n%s\n%s", out, p.stderr)
	}
	cs := connectHTTP(t, p.url, token)
	bash(t, cs, "touch "+marker)
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the token's holder ran nothing: %v", err)
	}
	// Tasks never see a token: not in their environment, not in a descriptor.
	r := bash(t, cs, `env | grep -c -i token; ls -l /proc/self/fd | grep -c token`)
	if r.Output != "0\n0\n" {
		t.Errorf("a task sees a token: %q", r.Output)
	}
}

// TestInsecureNoAuth: --insecure-no-auth is loopback only, warns first, and /readyz says so; each
// client is then its peer (its uid on loopback), so a local user neither sees nor reaches root's
// workspaces.
func TestInsecureNoAuth(t *testing.T) {
	if out, code := runOnce(t, nil, "serve", "--http", "0.0.0.0:0", "--insecure-no-auth"); code != 2 || !strings.Contains(out, "refusing --insecure-no-auth on 0.0.0.0:0") {
		t.Errorf("--insecure-no-auth off loopback: exit %d\n%s", code, out)
	}
	tu := testutil.User(t)
	p := startHTTP(t, append(cgroupArgs(t), "--insecure-no-auth", "--admin", "127.0.0.1:0")...)
	if line := firstLine(p.stderr.String()); !strings.Contains(line, "level=WARN") || !strings.Contains(line, "--insecure-no-auth") {
		t.Errorf("the first log line does not warn: %s", line)
	}
	if code, body := testutil.Get(t, p.admin+"/readyz", ""); code != http.StatusOK || !strings.HasPrefix(body, "ready: WARNING: no authentication") {
		t.Errorf("/readyz: %d %q", code, body)
	}
	root := mcptest.ConnectHTTP(t, p.url, mcptest.Options{Protocol: mcptest.Workspaces, Token: p.token})
	w, opened := mcptest.OpenWorkspace(t, root)
	handle := opened.Workspace
	bash(t, w, "echo root-secret")
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"}}`
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workspace_list","arguments":{},` + meta + `}}`
	run := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"workspace":"` + handle + `","command":"id"},` + meta + `}}`
	hdr := `MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n`
	out := asUser(t, tu, rawPost+`post "$HDR"'Mcp-Name: workspace_list\r\n' "$LIST"; post "$HDR"'Mcp-Name: bash\r\n' "$RUN"`, "PORT="+portOf(t, p.url), "HDR="+hdr, "LIST="+list, "RUN="+run)
	if !strings.Contains(out, "No open workspaces") || strings.Contains(out, handle+" ") || !strings.Contains(out, "no open workspace of yours has this handle") || strings.Contains(out, "uid=0") {
		t.Errorf("a local user reached root's workspace:\n%s", out)
	}
}

// firstLine is a log's first line.
func firstLine(log string) string {
	line, _, _ := strings.Cut(log, "\n")
	return line
}

// TestConnectionFlood: a local user who opens connections without the token holds at most
// --max-connections-per-peer of them; the rest are answered 503 at once; a client with the token
// still connects and runs commands meanwhile, and the refusals are counted.
func TestConnectionFlood(t *testing.T) {
	tu := testutil.User(t)
	p := startHTTP(t, append(cgroupArgs(t), "--max-connections", "200", "--max-connections-per-peer", "8", "--admin", "127.0.0.1:0")...)
	// 60 connections that send nothing, held open for 15 s, then one read of each: the first 8 were
	// accepted and wait for their headers (closed by the server after 10 s, without an answer); the
	// rest were answered 503 and closed.
	script := `for i in $(seq 60); do exec {fd}<>/dev/tcp/127.0.0.1/$PORT || echo failed; fds+=($fd); done; sleep 15; ` +
		`for fd in "${fds[@]}"; do timeout 5 head -c 12 <&$fd; echo; done`
	done := make(chan string, 1)
	go func() { done <- asUser(t, tu, script, "PORT="+portOf(t, p.url)) }()
	time.Sleep(3 * time.Second) // the flood is in
	cs := p.connect(t)
	if r := bash(t, cs, "echo served"); r.Output != "served\n" {
		t.Errorf("during the flood: %+v", r)
	}
	out := <-done
	if n := strings.Count(out, "HTTP/1.1 503"); n != 52 {
		t.Errorf("%d of 60 connections refused, want 52 (8 allowed per peer):\n%s", n, out)
	}
	_, metrics := testutil.Get(t, p.admin+"/metrics", "")
	if !strings.Contains(metrics, `reaper_refused_total{limit="connections_peer"} 52`) {
		t.Errorf("the refusals are not counted:\n%s", grepLines(metrics, "reaper_refused_total"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// hostileCall is a tools/call of bash whose arguments hold n extra keys, each with a value of pad
// bytes: a wide object of the kind that costs a decoder hundreds of bytes a key.
func hostileCall(id, n, pad int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo hi"`, id)
	v := strings.Repeat("x", pad)
	for i := range n {
		fmt.Fprintf(&b, `,"k%d":"%s"`, i, v)
	}
	b.WriteString("}}}")
	return b.String()
}

// post posts body to p's endpoint in the session sid with p's token, as a client at the protocol
// revision with sessions does, and returns the answer, whose body the caller closes.
func (p *reaperProc) post(t testing.TB, sid, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", mcptest.Sessions)
	resp, err := testutil.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// postJSON posts body as post does and returns the JSON-RPC response (from a JSON or an
// event-stream answer).
func postJSON(t testing.TB, p *reaperProc, sid, body string) map[string]any {
	t.Helper()
	resp := p.post(t, sid, body)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["jsonrpc"] != nil {
			return m
		}
	}
	b, _ := io.ReadAll(resp.Body)
	t.Fatalf("no JSON-RPC response (%s): %s", resp.Status, b)
	return nil
}

// TestHostileJSON: a 14.5 MB call of 1.2 million keys, a call of 12,000 keys, a ping of 100 KB,
// and a call nested 100 deep are each refused before they are decoded, with an error that names the
// limit, and the session goes on.
func TestHostileJSON(t *testing.T) {
	p := startHTTP(t, cgroupArgs(t)...)
	cs := p.connect(t)
	bash(t, cs, "cd /tmp")
	for _, tc := range []struct {
		name, body, want string
	}{
		{"14.5 MB of keys", hostileCall(11, 1200000, 1), "over the limit of 1 MiB (--max-call-size)"},
		{"12,000 keys", hostileCall(12, 12000, 0), "a message holds at most 10000 values"},
		{"100 deep", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"bash","arguments":{"command":"true","x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}}`, "nest at most 32 deep"},
		{"a ping of 100 KB", `{"jsonrpc":"2.0","id":14,"method":"ping","params":{"x":"` + strings.Repeat("y", 100000) + `"}}`, "bytes is over the limit of 64 KiB"},
	} {
		m := postJSON(t, p, cs.ID(), tc.body)
		e, _ := m["error"].(map[string]any)
		if msg, _ := e["message"].(string); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, m, tc.want)
		}
	}
	if r := bash(t, cs, "pwd"); r.Output != "/tmp\n" {
		t.Errorf("the session did not go on: %+v", r)
	}
}

// TestMemoryBoundHostileJSON: twelve wide calls at once (each a MiB in 9,000 keys of 100 bytes,
// which pass the bounds and are decoded, and each 14.5 MB in 1.2 million keys, which do not) keep
// the server below the bound stated for twelve calls.
func TestMemoryBoundHostileJSON(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped: the race detector multiplies memory use; the bound is for the shipped binary (run without -race)")
	}
	const n = 12
	p := startHTTP(t, cgroupArgs(t)...)
	cs := p.connect(t)
	bash(t, cs, "true")
	pid := serverOf(t, p.cmd.Process.Pid)
	for _, tc := range []struct {
		name string
		body func(i int) string
		ok   bool // decoded: the call runs (and fails validation: unknown arguments)
	}{
		{"decoded", func(i int) string { return hostileCall(100+i, 9000, 100) }, true},
		{"refused", func(i int) string { return hostileCall(200+i, 1200000, 1) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := make([]string, n)
			for i := range n {
				body[i] = tc.body(i)
			}
			m := burstOf(t, pid, n, func(i int) (*mcp.CallToolResult, error) {
				r := postJSON(t, p, cs.ID(), body[i])
				if _, isErr := r["error"]; isErr == tc.ok {
					return nil, fmt.Errorf("call %d: %.300v", i, r)
				}
				return &mcp.CallToolResult{}, nil
			})
			t.Logf("RSS before %d MiB, peak %d MiB (bound %d MiB), settled %d MiB", m.base>>20, m.peak>>20, memoryBound(n)>>20, m.settled>>20)
			if m.peak > memoryBound(n) {
				t.Errorf("peak RSS %d MiB over the bound of %d MiB", m.peak>>20, memoryBound(n)>>20)
			}
		})
	}
}

// TestSessionCaps: --max-sessions bounds the sessions of all identities, and
// --max-sessions-per-identity one identity's, with an error that says which; ending one makes room.
func TestSessionCaps(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte("alice tok-alice\nbob tok-bob\ncarol tok-carol\n"), 0o600)
	p := startHTTP(t, append(cgroupArgs(t), "--token-file", file, "--max-sessions", "4", "--max-sessions-per-identity", "2", "--admin", "127.0.0.1:0")...)
	dial := func(token string) error {
		cs, err := mcptest.DialHTTP(t.Context(), p.url, mcptest.Options{Token: token})
		if err == nil {
			t.Cleanup(func() { cs.Close() })
		}
		return err
	}
	a1 := connectHTTP(t, p.url, "tok-alice")
	connectHTTP(t, p.url, "tok-alice")
	if err := dial("tok-alice"); err == nil || !strings.Contains(err.Error(), "your identity holds 2 sessions and workspaces, the most one identity may (--max-sessions-per-identity)") {
		t.Errorf("alice's third session: %v", err)
	}
	connectHTTP(t, p.url, "tok-bob")
	bob := connectHTTP(t, p.url, "tok-bob")
	if err := dial("tok-carol"); err == nil || !strings.Contains(err.Error(), "reaper holds 4 sessions and workspaces, the most it allows (--max-sessions)") {
		t.Errorf("carol's session with four held: %v", err)
	}
	bash(t, bob, "echo still")
	a1.Close()
	testutil.Eventually(t, "room for carol", func() bool { return dial("tok-carol") == nil })
	_, metrics := testutil.Get(t, p.admin+"/metrics", "")
	for _, want := range []string{`reaper_refused_total{limit="identity_sessions"} 1`, `reaper_refused_total{limit="sessions"} `} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(metrics, "reaper_refused_total"))
		}
	}
}

// TestOutputBudgetAcrossSessions: sessions that each stay within --output-budget cannot together
// take more of the state directory than --output-budget-total; the output the total cut says so, and
// the gauges show the total held and its budget.
func TestOutputBudgetAcrossSessions(t *testing.T) {
	pl := place(t, "")
	p := startHTTP(t, append(pl.args(), "--output-budget", "1M", "--output-budget-total", "2M", "--admin", "127.0.0.1:0")...)
	var texts []string
	for range 4 {
		res := callTool(t, p.connect(t), "bash", map[string]any{"command": "head -c 900000 /dev/zero | tr '\\0' x; echo"})
		texts = append(texts, textOf(res))
	}
	var size int64
	files, _ := filepath.Glob(filepath.Join(pl.stateDir, "reaper-*", "s-*", "*.out"))
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			size += fi.Size()
		}
	}
	if len(files) < 3 || size > 2<<20 {
		t.Errorf("the sessions' output files take %d bytes in %d files; --output-budget-total is 2 MiB", size, len(files))
	}
	for i, text := range texts[2:] {
		if !strings.Contains(text, "the output files of all sessions together reached their budget of 2 MiB (--output-budget-total)") {
			t.Errorf("session %d's output, cut by the total: %.500s", i+3, text)
		}
	}
	_, metrics := testutil.Get(t, p.admin+"/metrics", "")
	if !strings.Contains(metrics, "reaper_output_budget_bytes 2.097152e+06") || !strings.Contains(metrics, "reaper_output_bytes 2.097152e+06") {
		t.Errorf("the output gauges:\n%s", grepLines(metrics, "reaper_output"))
	}
}
