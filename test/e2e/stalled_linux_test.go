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
	"golang.org/x/sys/unix"
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

// awaitStalledTCP waits until reaper's answer on conn (see stalledCall) has filled what the client
// takes: the client's end holds part of it unread, and the server's end holds more that it cannot
// send, the client's receive window being shut. Reaper's answer is then written as far as it goes.
func awaitStalledTCP(t testing.TB, conn net.Conn) {
	t.Helper()
	var inq, sendq int
	testutil.Eventually(t, "reaper's answer to fill the stalled client's receive buffer", func() bool {
		inq, sendq = receiveQueue(t, conn), serverSendQueue(t, conn)
		return inq > 0 && sendq > 0
	})
	t.Logf("stalled: %d bytes unread at the client, %d held at the server", inq, sendq)
}

// receiveQueue is the number of bytes received on conn and not yet read (FIONREAD).
func receiveQueue(t testing.TB, conn net.Conn) int {
	t.Helper()
	rc, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || ierr != nil {
		t.Fatalf("the receive queue of %v: %v %v", conn.LocalAddr(), err, ierr)
	}
	return n
}

// serverSendQueue is the number of bytes the server's end of conn, a loopback connection in this
// network namespace, holds unsent or unacknowledged (tx_queue in /proc/net/tcp), or 0 if it is not
// listed.
func serverSendQueue(t testing.TB, conn net.Conn) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	// Ports as /proc/net/tcp spells them: four hex digits after the address.
	server := fmt.Sprintf(":%04X", conn.RemoteAddr().(*net.TCPAddr).Port)
	client := fmt.Sprintf(":%04X", conn.LocalAddr().(*net.TCPAddr).Port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line) // sl local_address rem_address st tx_queue:rx_queue ...
		if len(f) < 5 || !strings.HasSuffix(f[1], server) || !strings.HasSuffix(f[2], client) {
			continue
		}
		tx, _, _ := strings.Cut(f[4], ":")
		n, _ := strconv.ParseInt(tx, 16, 64)
		return int(n)
	}
	return 0
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
	awaitStalledTCP(t, conn) // the call has run; its answer fills the buffers
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
	awaitStalledTCP(t, stalledCall(t, p, cs.ID()))
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	awaitFirstSignal(t, p) // a second SIGTERM sent before would be one with the first
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

// shuttingDown is the message reaper logs when it handles the first shutdown signal
// (cmd/reaper/signals_linux.go).
const shuttingDown = "shutting down: every session's processes are being killed"

// awaitFirstSignal waits until p has logged that it handled the first shutdown signal, after which
// another is a second signal of its own (signals sent before may merge into one).
func awaitFirstSignal(t testing.TB, p *reaperProc) {
	t.Helper()
	testutil.Eventually(t, "reaper's log of the first signal", func() bool {
		_, ok := testutil.LogLine(p.stderr.String(), shuttingDown)
		return ok
	})
}

// awaitFullPipe waits until the pipe whose read end is r is full, the writer at its other end
// blocked: every slot of the pipe holds a page but the first, which may hold less (what was written
// before a write of more than the pipe takes).
func awaitFullPipe(t testing.TB, r *os.File, what string) {
	t.Helper()
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n, size int
	testutil.Eventually(t, what+" to be full", func() bool {
		var nerr, serr error
		if err := rc.Control(func(fd uintptr) {
			n, nerr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
			size, serr = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
		}); err != nil || nerr != nil || serr != nil {
			t.Fatalf("%s: %v %v %v", what, err, nerr, serr)
		}
		return n > size-os.Getpagesize()
	})
	t.Logf("%s holds %d bytes, of a capacity of %d", what, n, size)
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
			awaitFullPipe(t, outR, "reaper's output pipe") // the call has ended; its answer fills the pipe
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
