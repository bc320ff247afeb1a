package main

import (
	"crypto/rand"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listenNotify opens a unix datagram socket at addr, as systemd does for NOTIFY_SOCKET.
func listenNotify(t *testing.T, addr string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readDatagram(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

func TestSdNotify(t *testing.T) {
	for _, addr := range []string{filepath.Join(t.TempDir(), "notify"), "@reaper-test-notify-" + rand.Text()[:10]} {
		c := listenNotify(t, addr)
		t.Setenv("NOTIFY_SOCKET", addr)
		for _, state := range []string{"READY=1", "STOPPING=1"} {
			if err := sdNotify(state); err != nil {
				t.Fatalf("sdNotify(%q) to %s: %v", state, addr, err)
			}
			if got := readDatagram(t, c); got != state {
				t.Errorf("%s received %q, want %q", addr, got, state)
			}
		}
	}
}

func TestSdNotifyWithoutSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := sdNotify("READY=1"); err != nil {
		t.Errorf("without NOTIFY_SOCKET: %v, want nil", err)
	}
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "nobody-listens"))
	if err := sdNotify("READY=1"); err == nil || !strings.Contains(err.Error(), "READY=1") {
		t.Errorf("to a socket nobody listens on: %v, want an error naming the state", err)
	}
	t.Setenv("NOTIFY_SOCKET", "vsock:2:1234")
	if err := sdNotify("READY=1"); err == nil {
		t.Error("to a vsock address: no error")
	}
}

// TestSdNotifyNeverBlocks: a notification socket whose reader never reads fills up; a notification
// then fails after notifyTimeout instead of holding reaper's start or shutdown.
func TestSdNotifyNeverBlocks(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "notify")
	listenNotify(t, addr) // never read
	t.Setenv("NOTIFY_SOCKET", addr)
	for i := 0; ; i++ {
		start := time.Now()
		err := sdNotify("STATUS=" + strings.Repeat("x", 4000))
		if took := time.Since(start); took > notifyTimeout+time.Second {
			t.Fatalf("notification %d took %v", i, took)
		}
		if err != nil {
			break // the queue is full: refused in time
		}
		if i > 10000 {
			t.Fatal("the socket's queue never filled")
		}
	}
}
