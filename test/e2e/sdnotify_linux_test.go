package e2e

import (
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServiceManagerNotification runs the binary as systemd runs a Type=notify service: with
// NOTIFY_SOCKET naming a unix datagram socket. reaper must say READY=1 once it serves (and not
// before: its MCP endpoint must answer by then), STOPPING=1 when told to stop, and must not hand the
// socket to the commands it runs.
func TestServiceManagerNotification(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	read := func() string {
		sock.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 4096)
		n, err := sock.Read(buf)
		if err != nil {
			t.Fatalf("no notification from reaper: %v", err)
		}
		return string(buf[:n])
	}
	t.Setenv("NOTIFY_SOCKET", addr)
	p := start(t, append([]string{"serve", "--http", "127.0.0.1:0"}, cgroupArgs(t)...), nil, nil)
	if got := read(); got != "READY=1" {
		t.Fatalf("first notification %q, want READY=1\n%s", got, p.stderr)
	}
	// reaper chose its port, and names it in a line it may log after READY=1: what it listens on at
	// READY=1 is read from /proc, and must be the endpoint it then names.
	ports := listeningPorts(t, serverOf(t, p.cmd.Process.Pid))
	if len(ports) == 0 {
		t.Fatal("READY=1 came before reaper listened: its server holds no listening TCP socket")
	}
	p.awaitServing(t)
	if u, err := url.Parse(p.url); err != nil || !slices.Contains(ports, u.Port()) {
		t.Fatalf("reaper serves %s, but listened on %v at READY=1 (%v)", p.url, ports, err)
	}
	cs := p.connect(t)
	if r := bash(t, cs, "echo ${NOTIFY_SOCKET-unset}"); r.Output != "unset\n" {
		t.Errorf("a command sees NOTIFY_SOCKET: %q", r.Output)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if got := read(); got != "STOPPING=1" {
		t.Errorf("notification after SIGTERM %q, want STOPPING=1", got)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("reaper did not exit after SIGTERM\n%s", p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "reaper stopped") {
		t.Errorf("reaper's log does not end with its stop:\n%s", p.stderr)
	}
}
