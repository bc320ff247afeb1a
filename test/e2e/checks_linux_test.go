package e2e

import (
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// refused sends a request with alice's session id that must be refused with want, and reports
// whether it was.
type refusal struct {
	name    string
	method  string
	token   string
	host    string
	version string
	want    int
}

func (rf refusal) send(t testing.TB, url, session string) {
	t.Helper()
	var body *strings.Reader
	if rf.method == http.MethodPost {
		body = strings.NewReader(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"bash","arguments":{"command":"true"}}}`)
	} else {
		body = strings.NewReader("")
	}
	req, _ := http.NewRequest(rf.method, url, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Authorization", "Bearer "+rf.token)
	if rf.host != "" {
		req.Host = rf.host
	}
	if rf.version != "" {
		req.Header.Set("Mcp-Protocol-Version", rf.version)
	}
	resp, err := testutil.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", rf.name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != rf.want {
		t.Errorf("%s: %s, want %d", rf.name, resp.Status, rf.want)
	}
}

// TestRefusedRequestsHaveNoEffect: every check (Host, Origin, token, protocol version, owner) comes
// before any side effect. A refused DELETE tears nothing down, and refused requests, however many,
// are no activity: the session still ends when its own client has been idle for the idle timeout.
func TestRefusedRequestsHaveNoEffect(t *testing.T) {
	tokens := t.TempDir() + "/tokens"
	os.WriteFile(tokens, []byte("alice tok-alice\nbob tok-bob\n"), 0o600)
	const idle = 3 * time.Second
	p := startHTTP(t, append(cgroupArgs(t), "--token-file", tokens, "--idle-timeout", idle.String(), "--grace", "0")...)
	alice := connectHTTP(t, p.url, "tok-alice")
	ps := escapees(t, alice)
	refusals := []refusal{
		{"DELETE with a rebinding Host", http.MethodDelete, "tok-alice", "evil.example:80", "", http.StatusForbidden},
		{"DELETE with an unsupported protocol version", http.MethodDelete, "tok-alice", "", "1999-01-01", http.StatusBadRequest},
		{"bob's DELETE", http.MethodDelete, "tok-bob", "", "", http.StatusForbidden},
		{"POST with a rebinding Host", http.MethodPost, "tok-alice", "evil.example", "", http.StatusForbidden},
		{"bob's POST", http.MethodPost, "tok-bob", "", "", http.StatusForbidden},
		{"bob's GET", http.MethodGet, "tok-bob", "", "", http.StatusForbidden},
		{"a wrong token", http.MethodPost, "tok-mallory", "", "", http.StatusUnauthorized},
	}
	for _, rf := range refusals {
		rf.send(t, p.url, alice.ID())
	}
	if alive := testutil.Alive(ps); len(alive) != len(ps) {
		t.Fatalf("refused requests killed alice's processes: %d of %d left", len(alive), len(ps))
	}
	// Alice is idle from now on; the refusals go on, every 200 ms, until her processes die.
	last := time.Now()
	for len(testutil.Alive(ps)) > 0 {
		if time.Since(last) > idle+10*time.Second {
			t.Fatalf("alice's session outlived %v of idleness by %v: the refused requests kept it alive", idle, time.Since(last)-idle)
		}
		for _, rf := range refusals[3:] {
			rf.send(t, p.url, alice.ID())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("alice's processes died %v after her last request, with refused requests all along", time.Since(last))
}

// TestKeepAliveToleratesABusyClient: a client that does not answer for about two intervals (stopped,
// as a client stalls in a long garbage collection or a laptop sleeps) keeps its session; the SDK's own
// keepalive ended it at the first ping not answered within half an interval.
func TestKeepAliveToleratesABusyClient(t *testing.T) {
	const every = time.Second
	p := startHTTP(t, append(cgroupArgs(t), "--keepalive", every.String())...)
	client, ps := startClient(t, p)
	time.Sleep(every) // not readiness: a ping or two answered first
	client.Process.Signal(syscall.SIGSTOP)
	time.Sleep(2 * every) // not readiness: the client is unresponsive for two intervals
	client.Process.Signal(syscall.SIGCONT)
	time.Sleep(3 * every) // not readiness: the session must survive well past its recovery
	if alive := testutil.Alive(ps); len(alive) != len(ps) {
		t.Fatalf("the session of a client busy for %v ended (keepalive %v): %d of %d processes left\n%s", 2*every, every, len(alive), len(ps), p.stderr)
	}
	if strings.Contains(p.stderr.String(), "keepalive") {
		t.Errorf("a session ended by keepalive:\n%s", p.stderr)
	}
}
