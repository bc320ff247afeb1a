package container

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSidecarInPod runs reaper as an HTTP sidecar in a pod, the go-sdk client on the host reaching it
// over the pod's network (the host's), and ends its sessions, and reaper itself, every way a sidecar's
// end comes: the client's DELETE, the idle timeout, `podman stop` and `podman kill`.
func TestSidecarInPod(t *testing.T) {
	needPods(t)
	pod := createPod(t)

	t.Run("DELETE", func(t *testing.T) {
		s := startSidecar(t, serveOpts{pod: pod})
		cs := s.connect(t)
		ps := escapees(t, cs, s.container)
		if err := cs.Close(); err != nil { // sends DELETE
			t.Errorf("closing the client: %v", err)
		}
		s.sessionEnd(t, ps)
	})

	// An agent container beside the sidecar reaches it on the pod's loopback: here busybox wget
	// sending MCP's initialize.
	t.Run("client container", func(t *testing.T) {
		s := startSidecar(t, serveOpts{pod: pod})
		initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wget","version":"1"}}}`
		out, err := suite.pm.run("run", "--rm", "--pull=never", "--pod", pod, suite.base,
			"wget", "-q", "-O", "-", "--header", "Content-Type: application/json", "--header", "Authorization: Bearer "+s.token,
			"--header", "Accept: application/json, text/event-stream", "--post-data", initialize, s.url)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, `"serverInfo":{"name":"reaper"`) {
			t.Errorf("initialize from a container in the pod answered %q", out)
		}
	})

	// The Kubernetes pod's probes: the admin endpoint on every address (the kubelet probes the pod's
	// IP), allowed because an admin token comes from the environment, as the Secret gives it.
	t.Run("probes as in the Kubernetes pod", func(t *testing.T) {
		token := testutil.UniqueName("admin-token-")
		s := startSidecar(t, serveOpts{pod: pod, podman: []string{"-e", "REAPER_ADMIN_TOKEN=" + token},
			reaper: []string{"--admin", ":0"}})
		_, port, err := net.SplitHostPort(strings.TrimPrefix(s.admin, "http://"))
		if err != nil {
			t.Fatalf("reaper's start-up line names admin endpoint %q: %v", s.admin, err)
		}
		base := "http://127.0.0.1:" + port
		probe := func(path, token string) (int, string) {
			req, _ := http.NewRequest(http.MethodGet, base+path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			res, err := testutil.Do(req)
			if err != nil {
				return 0, err.Error()
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return res.StatusCode, string(b)
		}
		var code int
		var body string
		testutil.Eventually(t, "/readyz to answer 200", func() bool {
			code, body = probe("/readyz", "")
			return code == http.StatusOK
		})
		if !strings.Contains(body, "containment "+s.containment) {
			t.Errorf("/readyz says %q; reaper logged containment %s", body, s.containment)
		}
		if code, body = probe("/healthz", ""); code != http.StatusOK {
			t.Errorf("/healthz: %d %q", code, body)
		}
		if code, _ = probe("/metrics", ""); code != http.StatusUnauthorized {
			t.Errorf("/metrics without the admin token: %d, want 401", code)
		}
		if code, body = probe("/metrics", token); code != http.StatusOK || !strings.Contains(body, "reaper_sessions_active 0") {
			t.Errorf("/metrics with the admin token: %d\n%s", code, body)
		}
	})

	// Without an admin token, reaper refuses an admin endpoint beyond loopback before it serves.
	t.Run("admin beyond loopback without a token", func(t *testing.T) {
		name := testutil.UniqueName("reaper-ctest-")
		t.Cleanup(func() { removeContainer(t, name, &container{}) })
		out, err := suite.pm.run("run", "--name", name, "--pull=never", "--pod", pod, suite.image,
			"serve", "--http", "127.0.0.1:0", "--admin", ":0")
		if err == nil || !strings.Contains(out+err.Error(), "admin token") {
			t.Errorf("reaper with --admin :PORT and no admin token: %v\n%s", err, out)
		}
	})

	t.Run("idle timeout", func(t *testing.T) {
		idle := 2 * time.Second
		s := startSidecar(t, serveOpts{pod: pod, reaper: []string{"--idle-timeout", idle.String()}})
		cs := s.connect(t) // stays open, sends nothing more
		ps := escapees(t, cs, s.container)
		s.sessionEnd(t, ps)
		if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "task_list"}); err == nil && !res.IsError {
			t.Errorf("the idle session still answers: %v", res.Content)
		}
	})

	t.Run("podman stop", func(t *testing.T) {
		s := startSidecar(t, serveOpts{pod: pod})
		ps := escapees(t, s.connect(t), s.container)
		if code := s.stop(t); code != 0 {
			t.Errorf("reaper exited with status %d on podman stop, not 0: it did not finish its teardown\n%s", code, logs(s.name))
		}
		testutil.AwaitDead(t, without(ps), within)
	})

	t.Run("podman kill", func(t *testing.T) {
		s := startSidecar(t, serveOpts{pod: pod})
		ps := escapees(t, s.connect(t), s.container)
		if _, err := suite.pm.run("kill", s.name); err != nil {
			t.Fatal(err)
		}
		if code, err := suite.pm.run("wait", s.name); err != nil || code != "137" {
			t.Errorf("after podman kill: exit status %s (%v), want 137 (SIGKILL)", code, err)
		}
		testutil.AwaitDead(t, without(ps), within)
		if s.sigtermRecorded() {
			t.Log("the escapee that records SIGTERM got one, though reaper was killed")
		}
	})
}
