package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// A client that stops reading its answers: every write of a response is bounded in time (see
// httpguard.Options.WriteStall), so that such a client holds neither a connection nor reaper's
// exit.

// stalledCall sends, on a connection of its own whose receive buffer is as small as the kernel
// allows, a bash call in session sid whose result is a MiB, and never reads the answer: reaper's
// write of it stops once the buffers on both sides are full.
func stalledCall(t testing.TB, p *reaperProc, sid string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) })
	}}
	conn, err := d.Dial("tcp", "127.0.0.1:"+portOf(t, p.url))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":{"command":"head -c 3000000 /dev/zero | tr '\\0' x","max_output":1048576}}}`
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Authorization: Bearer %s\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: %d\r\n\r\n%s", p.token, sid, len(body), body)
	return conn
}

// closedByServer reads conn to its end within d and reports whether the server closed it: a
// connection whose answer was cut ends (EOF or a reset) once what the kernel held for it is read;
// one still open does not end.
func closedByServer(conn net.Conn, d time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 64<<10)
	for {
		_, err := conn.Read(buf)
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			return false
		default:
			return true
		}
	}
}

// TestStalledReader: a client that never reads a tool call's answer loses its connection once a
// write of it has waited 30 s for the client, after its session ended too; the
// server serves others meanwhile; and a second SIGTERM ends reaper at once, with such a client
// still connected.
func TestStalledReader(t *testing.T) {
	p := startHTTP(t, append(cgroupArgs(t), "--grace", "1s")...)
	cs := p.connect(t)
	conn := stalledCall(t, p, cs.ID())
	time.Sleep(3 * time.Second) // the call has run; its answer fills the buffers
	if r := bash(t, p.connect(t), "echo served"); r.Output != "served\n" {
		t.Errorf("another session, beside a stalled client: %+v", r)
	}
	if code, took := p.deleteSession(t, cs.ID()); code != 204 || took > testutil.Slow(5*time.Second) {
		t.Errorf("DELETE of the stalled client's session: %d in %v", code, took)
	}
	// Reading before the bound would let the write go on: wait past it, then read what the kernel
	// still holds for the client, to the end of the connection if the server closed it.
	time.Sleep(35 * time.Second)
	if !closedByServer(conn, testutil.Slow(30*time.Second)) {
		t.Error("the stalled connection is still open 38 s after its answer stalled (a write is allowed 30 s)")
	}

	cs = p.connect(t)
	stalledCall(t, p, cs.ID())
	time.Sleep(3 * time.Second)
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(500 * time.Millisecond)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		t.Logf("reaper exited %v after the first SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(testutil.Slow(15 * time.Second)):
		t.Errorf("reaper has not exited 15 s after two SIGTERMs, with a client that does not read:\n%s", p.stderr)
		p.cmd.Process.Signal(os.Kill)
	}
	if strings.Contains(p.stderr.String(), "panic") {
		t.Errorf("reaper panicked:\n%s", p.stderr)
	}
}

// TestStalledStdioReader: a stdio client that stops reading reaper's output (its pipe full with a
// tool call's answer) still ends its session by closing reaper's input, whose processes die and
// reaper exits within a few seconds, and, without closing it, by one SIGTERM.
func TestStalledStdioReader(t *testing.T) {
	for _, end := range []string{"eof", "sigterm"} {
		t.Run(end, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			inR, inW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			outR, outW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { inW.Close(); outR.Close() })
			cmd := reaperCmd(append([]string{"serve", "--grace", "1s"}, cgroupArgs(t)...)...)
			cmd.Stdout = outW
			p := startCmd(t, cmd, inR, nil)
			inR.Close()
			outW.Close()
			call := fmt.Sprintf(`setsid sleep 1000 & echo "$(%s) $!" > %s; head -c 3000000 /dev/zero | tr '\\0' x`, testutil.ShowNS, pidFile)
			for _, m := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":` + strconv.Quote(call) + `,"max_output":1048576}}}`,
			} {
				fmt.Fprintln(inW, m)
			}
			escapee := pidFromFile(t, pidFile)
			time.Sleep(3 * time.Second) // the call has ended; its answer fills the pipe
			start := time.Now()
			if end == "eof" {
				inW.Close()
			} else {
				p.cmd.Process.Signal(syscall.SIGTERM)
			}
			testutil.AwaitDead(t, []testutil.Proc{escapee}, 10*time.Second)
			select {
			case <-p.done:
				t.Logf("reaper exited %v after the %s", time.Since(start).Round(time.Millisecond), end)
			case <-time.After(testutil.Slow(15 * time.Second)):
				t.Errorf("reaper has not exited 15 s after the %s, with a client that does not read:\n%s", end, p.stderr)
				p.cmd.Process.Signal(os.Kill)
			}
		})
	}
}
