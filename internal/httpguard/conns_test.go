package httpguard

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// identityServer serves, on a loopback listener bounded by lim, a handler that authenticates each
// request as the identity its X-Id header names. It returns the address, the listener and the limits
// refused so far.
func identityServer(t *testing.T, lim ConnLimits) (string, *limitedListener, func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused []string
	lim.Refused = func(limit string) {
		mu.Lock()
		refused = append(refused, limit)
		mu.Unlock()
	}
	l := Limit(ln, lim).(*limitedListener)
	hs := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Authenticated(w, r, r.Header.Get("X-Id")) {
			io.WriteString(w, "ok\n")
		}
	}), Options{})
	served := make(chan struct{})
	go func() { defer close(served); hs.Serve(l) }()
	t.Cleanup(func() {
		hs.Close()
		select {
		case <-served:
		case <-time.After(testutil.Slow(time.Minute)):
			t.Error("Serve has not returned a minute after Close")
		}
	})
	return ln.Addr().String(), l, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), refused...)
	}
}

// kept is a keep-alive connection of a test's client.
type kept struct {
	net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *kept {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &kept{c, bufio.NewReader(c)}
}

// ask sends a request as id on c and returns the answer's status line, Retry-After and body.
func (c *kept) ask(t *testing.T, id string) (status, retry, body string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(testutil.Slow(10 * time.Second)))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Id: "+id+"\r\n\r\n")
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return "no answer: " + err.Error(), "", ""
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.Status, res.Header.Get("Retry-After"), string(b)
}

// closedByServer reports whether the server closed c (its next read ends).
func (c *kept) closedByServer() bool {
	c.SetReadDeadline(time.Now().Add(testutil.Slow(5 * time.Second)))
	_, err := c.br.ReadByte()
	return err == io.EOF
}

// counts is what l counts, by kind.
func (l *limitedListener) counts() (total, unauth, peers, ids int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.peers {
		peers += n
	}
	for _, n := range l.ids {
		ids += n
	}
	return l.total, l.unauth, peers, ids
}

// TestPerIdentityLimit: an identity holds at most PerIdentity authenticated connections; the
// next is answered 503 naming the limit and closed, counted as "identity", while another identity is
// served; one closed makes room. A connection that authenticated once stays its first identity's.
// Connections waiting to authenticate are still bounded per peer, and every count returns to zero.
func TestPerIdentityLimit(t *testing.T) {
	addr, l, refused := identityServer(t, ConnLimits{Total: 20, Unauthenticated: 10, PerPeer: 2, PerIdentity: 2})
	var alice []*kept
	for range 2 {
		c := dial(t, addr)
		if status, _, _ := c.ask(t, "alice"); status != "200 OK" {
			t.Fatalf("alice's connection within her limit: %s", status)
		}
		alice = append(alice, c)
	}
	// Alice's connections left her peer's count: her third is accepted, and refused as hers.
	over := dial(t, addr)
	status, retry, body := over.ask(t, "alice")
	if status != "503 Service Unavailable" || retry != "1" || !strings.Contains(body, "your identity (alice) has 2 connections open, the most one identity may (--max-connections-per-identity)") {
		t.Errorf("alice's third connection: %s (Retry-After %q) %q", status, retry, body)
	}
	if !over.closedByServer() {
		t.Error("the refused connection was not closed")
	}
	bob := dial(t, addr)
	if status, _, _ := bob.ask(t, "bob"); status != "200 OK" {
		t.Errorf("bob, with alice at her limit: %s", status)
	}
	// Bob's token on alice's connection is served, and the connection stays alice's: bob still has
	// room for a second connection of his own, and a third is refused.
	if status, _, _ := alice[0].ask(t, "bob"); status != "200 OK" {
		t.Errorf("bob on alice's connection: %s", status)
	}
	bob2 := dial(t, addr)
	if status, _, _ := bob2.ask(t, "bob"); status != "200 OK" {
		t.Errorf("bob's second connection: %s", status)
	}
	if status, _, body := dial(t, addr).ask(t, "bob"); !strings.Contains(body, "your identity (bob)") {
		t.Errorf("bob's third connection: %s %q", status, body)
	}
	// Waiting to authenticate, one peer still holds at most PerPeer.
	// The connections refused above count under their peer until the server has closed them, and a
	// connection is counted once the server accepts it, after the client's dial returns: wait for
	// each, so that the peer's count is the two idle connections'.
	awaitWaiting := func(n int) {
		t.Helper()
		for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
			if _, unauth, _, _ := l.counts(); unauth == n {
				return
			}
			if time.Since(start) > testutil.Slow(10*time.Second) {
				_, unauth, _, _ := l.counts()
				t.Fatalf("%d connections waiting to authenticate after %v, want %d", unauth, testutil.Slow(10*time.Second), n)
			}
		}
	}
	awaitWaiting(0)
	idle := []*kept{dial(t, addr), dial(t, addr)}
	awaitWaiting(2)
	if status, _, body := dial(t, addr).ask(t, "carol"); !strings.Contains(body, "(--max-connections-per-peer)") {
		t.Errorf("a third connection waiting to authenticate: %s %q", status, body)
	}
	for _, c := range idle {
		c.Close()
	}
	alice[1].Close()
	deadline := time.Now().Add(testutil.Slow(10 * time.Second))
	for {
		c := dial(t, addr)
		status, _, _ := c.ask(t, "alice")
		if status == "200 OK" {
			alice[1] = c
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room for alice after she closed a connection: %s", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := strings.Join(refused(), " "); !strings.HasPrefix(got, "identity identity peer") {
		t.Errorf("refusals told: %q", got)
	}
	for _, c := range alice {
		c.Close()
	}
	bob.Close()
	bob2.Close()
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		total, unauth, peers, ids := l.counts()
		if total == 0 && unauth == 0 && peers == 0 && ids == 0 {
			break
		}
		if time.Since(start) > testutil.Slow(10*time.Second) {
			t.Fatalf("counts after every connection closed: total %d, unauthenticated %d, by peer %d, by identity %d", total, unauth, peers, ids)
		}
	}
}
