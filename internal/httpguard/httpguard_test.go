package httpguard

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// start serves h with opts on a loopback listener and returns its address.
func start(t *testing.T, h http.Handler, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewServer(h, opts)
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// closedWithin writes what write writes (slowly, in the background) to a new connection to addr and
// returns how long the server took to close it; it fails the test if the server did not within
// limit.
func closedWithin(t *testing.T, addr string, limit time.Duration, write func(net.Conn)) time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	go write(c)
	c.SetReadDeadline(time.Now().Add(limit))
	_, err = io.Copy(io.Discard, c) // until the server closes it
	took := time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server still held the connection after %v", limit)
	}
	return took
}

// trickle writes s one byte every 100 ms until the connection fails.
func trickle(s string) func(net.Conn) {
	return func(c net.Conn) {
		for i := 0; i < len(s); i++ {
			if _, err := c.Write([]byte{s[i]}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	io.WriteString(w, "ok\n")
})

// TestSlowClientsAreCut: headers that never end, a body that never ends (read by the handler, or
// refused unread as an unauthenticated request is), and an idle keep-alive connection are each cut
// off within their bound.
func TestSlowClientsAreCut(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusUnauthorized) })
	opts := Options{ReadHeaderTimeout: 500 * time.Millisecond, BodyTimeout: 500 * time.Millisecond, IdleTimeout: 500 * time.Millisecond}
	body := "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n"
	for _, c := range []struct {
		name  string
		h     http.Handler
		write func(net.Conn)
	}{
		{"headers", ok, trickle("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + strings.Repeat("a", 1000))},
		{"body read by the handler", ok, func(c net.Conn) { io.WriteString(c, body); trickle(strings.Repeat("x", 1000))(c) }},
		{"body of a refused request", refuse, func(c net.Conn) { io.WriteString(c, body); trickle(strings.Repeat("x", 1000))(c) }},
		{"idle keep-alive connection", ok, func(c net.Conn) { io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			took := closedWithin(t, start(t, c.h, opts), 5*time.Second, c.write)
			t.Logf("closed after %v", took.Round(time.Millisecond))
			if took < 400*time.Millisecond {
				t.Errorf("closed after %v, before its bound", took)
			}
		})
	}
}

// TestLongHandlerKeepsItsConnection: once the body is read, the handler may take far longer than
// the body's bound: its request's context is not cancelled, its answer arrives, and the connection
// serves the next request.
func TestLongHandlerKeepsItsConnection(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case <-time.After(2 * time.Second): // four times the body's bound
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusInternalServerError)
			return
		}
		w.Write(b)
	})
	addr := start(t, slow, Options{BodyTimeout: 500 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := range 2 {
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello")
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "hello" {
			t.Errorf("request %d: %s %q", i, res.Status, b)
		}
	}
}

// TestWriteTimeoutBoundsTheResponse: with WriteTimeout set, a client that does not read holds the
// handler's writes for that long at most, however long WriteStall is (the admin server's bound).
func TestWriteTimeoutBoundsTheResponse(t *testing.T) {
	failed := make(chan error, 1)
	flood := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				failed <- err
				return
			}
		}
	})
	addr := start(t, flood, Options{WriteTimeout: 500 * time.Millisecond, WriteStall: time.Hour})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") // and never read the answer
	select {
	case err := <-failed:
		t.Logf("the handler's write failed: %v", err)
	case <-time.After(testutil.Slow(30 * time.Second)):
		t.Fatal("a client that does not read held the handler's writes past WriteTimeout")
	}
}

func TestHeadersTooLarge(t *testing.T) {
	addr := start(t, ok, Options{MaxHeaderBytes: 1 << 10})
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 8<<10))
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("8 KiB of headers with a bound of 1 KiB: %s", res.Status)
	}
}

// TestChecks: a loopback listener answers only loopback Host names, and no request from a page of
// another origin.
func TestChecks(t *testing.T) {
	h := CheckHost(CheckOrigin(ok))
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
	pod := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 80}
	for _, c := range []struct {
		local          net.Addr
		host, origin   string
		fetchSite      string
		want           int
		name, explains string
	}{
		{loop, "127.0.0.1:80", "", "", 200, "loopback", ""},
		{loop, "localhost:80", "", "", 200, "localhost", ""},
		{loop, "[::1]:80", "", "", 200, "IPv6 loopback", ""},
		{loop, "evil.example:80", "", "", 403, "rebound name", "DNS rebinding"},
		{loop, "10.0.0.7", "", "", 403, "another address", ""},
		{pod, "10.0.0.7:80", "", "", 200, "pod address", "any Host off loopback"},
		{loop, "127.0.0.1:80", "http://127.0.0.1:80", "", 200, "same origin", ""},
		{loop, "127.0.0.1:80", "http://evil.example", "", 403, "other origin", ""},
		{loop, "127.0.0.1:80", "null", "", 403, "opaque origin", ""},
		{loop, "127.0.0.1:80", "", "cross-site", 403, "cross-site fetch", ""},
		{loop, "127.0.0.1:80", "", "same-origin", 200, "same-origin fetch", ""},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = c.host
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.fetchSite != "" {
			req.Header.Set("Sec-Fetch-Site", c.fetchSite)
		}
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, c.local))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, rec.Code, c.want)
		}
	}
}
