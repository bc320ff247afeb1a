package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// Connections per identity (docs/security.md, "Every bound"): once a request on a connection
// authenticates, the connection counts for that identity until it closes, and one identity holds at
// most --max-connections-per-identity of them, so that it cannot leave the others none.

// heldConn is a keep-alive connection to reaper's endpoint, kept open by the test.
type heldConn struct {
	net.Conn
	br *bufio.Reader
}

// holdConn opens a connection to p's endpoint; cleanup closes it.
func holdConn(t testing.TB, p *reaperProc) *heldConn {
	t.Helper()
	c, err := net.Dial("tcp", "127.0.0.1:"+portOf(t, p.url))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &heldConn{c, bufio.NewReader(c)}
}

// get sends a GET of the endpoint with token on c and returns the answer's status code, Retry-After
// and body. A GET without a session is answered 400 by the SDK, once its token has passed: enough to
// authenticate the connection, which stays open.
func (c *heldConn) get(t testing.TB, token string) (int, string, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(testutil.Slow(30 * time.Second)))
	io.WriteString(c, "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer "+token+"\r\n\r\n")
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Retry-After"), string(b)
}

// refusedMetric is reaper_refused_total{limit} as p's admin endpoint shows it, or -1.
func refusedMetric(t testing.TB, p *reaperProc, limit string) int {
	_, metrics := testutil.Get(t, p.admin+"/metrics", "")
	prefix := `reaper_refused_total{limit="` + limit + `"} `
	for _, l := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

// TestConnectionsPerIdentity: with two identities and --max-connections 40, alice holds at most 10
// connections (the default: a quarter); her next is answered 503 naming the limit and closed, the
// refusal is counted, bob is still served, bob's token on one of alice's connections is served
// (the connection stays hers), and a connection alice closes makes room for her.
func TestConnectionsPerIdentity(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte("alice tok-alice\nbob tok-bob\n"), 0o600)
	p := startHTTP(t, append(cgroupArgs(t), "--token-file", file, "--max-connections", "40", "--admin", "127.0.0.1:0")...)
	var alice []*heldConn
	for i := range 10 {
		c := holdConn(t, p)
		if code, _, body := c.get(t, "tok-alice"); code != http.StatusBadRequest {
			t.Fatalf("alice's connection %d, within her share: %d %q", i+1, code, body)
		}
		alice = append(alice, c)
	}
	over := holdConn(t, p)
	code, retry, body := over.get(t, "tok-alice")
	if code != http.StatusServiceUnavailable || retry != "1" || !strings.Contains(body, "your identity (alice) has 10 connections open, the most one identity may (--max-connections-per-identity)") {
		t.Errorf("alice's 11th connection: %d (Retry-After %q) %q", code, retry, body)
	}
	over.SetReadDeadline(time.Now().Add(testutil.Slow(10 * time.Second)))
	if _, err := over.br.ReadByte(); err != io.EOF {
		t.Errorf("the refused connection is still open: %v", err)
	}
	if n := refusedMetric(t, p, "connections_identity"); n != 1 {
		t.Errorf("reaper_refused_total{limit=\"connections_identity\"} is %d, want 1", n)
	}
	bob := connectHTTP(t, p.url, "tok-bob")
	if r := bash(t, bob, "echo served"); r.Output != "served\n" {
		t.Errorf("bob, with alice at her limit: %+v", r)
	}
	if code, _, body := alice[0].get(t, "tok-bob"); code != http.StatusBadRequest {
		t.Errorf("bob's token on alice's connection: %d %q", code, body)
	}
	for _, c := range alice[:5] {
		c.Close()
	}
	testutil.Eventually(t, "room for alice", func() bool {
		c := holdConn(t, p)
		defer c.Close()
		code, _, _ := c.get(t, "tok-alice")
		return code == http.StatusBadRequest
	})
	if r := bash(t, connectHTTP(t, p.url, "tok-alice"), "echo served"); r.Output != "served\n" {
		t.Errorf("alice, once she closed connections: %+v", r)
	}
}

// TestConnectionsPerPeerIdentity: with --insecure-no-auth each peer is an identity (on loopback, the
// uid that owns the socket): a local user holds at most a quarter of --max-connections once its
// requests are served, its next is refused with its identity named, and root, another peer, is
// still served.
func TestConnectionsPerPeerIdentity(t *testing.T) {
	tu := testutil.User(t)
	// The local user's script, run by a goroutine of the test's, ends once reaper has stopped (it holds
	// a connection until reaper closes it): a cleanup registered before reaper's stop, and so run
	// after it, waits for the goroutine, whether or not the test waited for it itself.
	var scriptDone chan struct{} // closed when the goroutine has returned; nil until it starts
	t.Cleanup(func() {
		if scriptDone == nil {
			return
		}
		select {
		case <-scriptDone:
		case <-time.After(testutil.Slow(2 * time.Minute)):
			t.Error("the local user's script has not returned 2 minutes after reaper stopped")
		}
	})
	p := startHTTP(t, append(cgroupArgs(t), "--insecure-no-auth", "--max-connections", "40", "--admin", "127.0.0.1:0")...)
	// 12 connections, one after the other, each with a request whose status line is printed, then the
	// body of the last (refused); the first is held until reaper stops.
	script := `for i in $(seq 12); do exec {fd}<>/dev/tcp/127.0.0.1/$PORT || echo failed; fds+=($fd); ` +
		`printf 'GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n\r\n' >&$fd; ` +
		`read -t 20 -r line <&$fd; echo "$line"; done; timeout 5 cat <&${fds[11]}; echo; timeout 50 cat <&${fds[0]} >/dev/null`
	port := portOf(t, p.url)
	var out string
	var scriptErr error
	scriptDone = make(chan struct{})
	go func() {
		defer close(scriptDone)
		out, scriptErr = runAsUser(tu, script, "PORT="+port)
	}()
	testutil.Eventually(t, "the local user's refusals", func() bool { return refusedMetric(t, p, "connections_identity") >= 2 })
	cs := connectHTTP(t, p.url, "")
	if r := bash(t, cs, "echo served"); r.Output != "served\n" {
		t.Errorf("root, with a local user at its limit: %+v", r)
	}
	if n := refusedMetric(t, p, "connections_identity"); n != 2 {
		t.Errorf("refusals counted: %d, want 2", n)
	}
	cs.Close()
	p.stop(t) // closes the connection the local user's script waits on
	select {
	case <-scriptDone:
	case <-time.After(testutil.Slow(2 * time.Minute)):
		t.Fatal("the local user's script has not returned 2 minutes after reaper stopped")
	}
	if scriptErr != nil {
		t.Fatal(scriptErr)
	}
	if n := strings.Count(out, "HTTP/1.1 400"); n != 10 || strings.Count(out, "HTTP/1.1 503") != 2 ||
		!strings.Contains(out, "your identity (peer uid "+strconv.Itoa(tu.Uid)+") has 10 connections open") {
		t.Errorf("a local user's 12 connections, 10 allowed (%d served):\n%s", n, out)
	}
}
