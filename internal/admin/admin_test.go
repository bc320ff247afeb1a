package admin

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/cgreaper/reaper/internal/testutil"
)

func serve(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(opts)
	s.Serve(ln)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		s.Close() // idempotent
	})
	return s, "http://" + ln.Addr().String()
}

func TestProbes(t *testing.T) {
	s, base := serve(t, Options{})
	if code, body := testutil.Get(t, base+"/healthz", ""); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := testutil.Get(t, base+"/readyz", ""); code != 503 || !strings.Contains(body, "starting") {
		t.Errorf("/readyz before ready: %d %q", code, body)
	}
	s.SetReady(true, "containment cgroup (cgroup.kill)")
	if code, body := testutil.Get(t, base+"/readyz", ""); code != 200 || body != "ready: containment cgroup (cgroup.kill)\n" {
		t.Errorf("/readyz when ready: %d %q", code, body)
	}
	s.SetReady(false, "shutting down")
	if code, body := testutil.Get(t, base+"/readyz", ""); code != 503 || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz when stopping: %d %q", code, body)
	}
	if code, _ := testutil.Get(t, base+"/metrics", ""); code != 404 {
		t.Errorf("/metrics without a metrics handler: %d", code)
	}
	if code, _ := testutil.Get(t, base+"/mcp", ""); code != 404 {
		t.Errorf("/mcp on the admin endpoint: %d", code)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/healthz", nil)
	res, err := testutil.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %d", res.StatusCode)
	}
}

func TestMetricsToken(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reaper_up 1\n") })
	_, open := serve(t, Options{Metrics: metrics})
	if code, body := testutil.Get(t, open+"/metrics", ""); code != 200 || body != "reaper_up 1\n" {
		t.Errorf("/metrics without a token configured: %d %q", code, body)
	}

	_, locked := serve(t, Options{Metrics: metrics, Token: "s3cret"})
	for _, tok := range []string{"", "wrong", "s3cret-and-more", "s3cre"} {
		if code, body := testutil.Get(t, locked+"/metrics", tok); code != 401 || strings.Contains(body, "reaper_up") {
			t.Errorf("/metrics with token %q: %d %q", tok, code, body)
		}
	}
	if code, body := testutil.Get(t, locked+"/metrics", "s3cret"); code != 200 || body != "reaper_up 1\n" {
		t.Errorf("/metrics with the token: %d %q", code, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := testutil.Get(t, locked+path, ""); code == 401 {
			t.Errorf("%s needs the token: probes must not", path)
		}
	}
}

// TestBrowserRequestsRefused: a page of another site cannot read the endpoint, through a name that
// resolves to 127.0.0.1 (DNS rebinding) or from another origin.
func TestBrowserRequestsRefused(t *testing.T) {
	s, base := serve(t, Options{})
	s.SetReady(true, "containment cgroup")
	for _, c := range []struct{ name, host, origin string }{
		{"rebound name", "evil.example", ""},
		{"other origin", "", "http://evil.example"},
	} {
		req, _ := http.NewRequest(http.MethodGet, base+"/readyz", nil)
		if c.host != "" {
			req.Host = c.host
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		res, err := testutil.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden || strings.Contains(string(b), "containment") {
			t.Errorf("%s: %s %q", c.name, res.Status, b)
		}
	}
}

// TestReadyzDetailsOffLoopback: off loopback, /readyz gives its status code to anyone (for probes)
// and its details only with the admin token.
func TestReadyzDetailsOffLoopback(t *testing.T) {
	var ip net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			ip = n.IP
			break
		}
	}
	if ip == nil {
		t.Skip("skipped: this host has no IPv4 address but loopback")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Token: "s3cret"})
	s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	s.SetReady(true, "containment cgroup")
	base := "http://" + ln.Addr().String()
	if code, body := testutil.Get(t, base+"/readyz", ""); code != 200 || strings.Contains(body, "containment") {
		t.Errorf("/readyz off loopback without the token: %d %q", code, body)
	}
	if code, body := testutil.Get(t, base+"/readyz", "s3cret"); code != 200 || !strings.Contains(body, "containment cgroup") {
		t.Errorf("/readyz off loopback with the token: %d %q", code, body)
	}
	if code, body := testutil.Get(t, base+"/healthz", ""); code != 200 || body != "ok\n" {
		t.Errorf("/healthz off loopback: %d %q", code, body)
	}
}
