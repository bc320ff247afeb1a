package systemd

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A scope systemd really starts is tested where systemd runs: test/e2e's TestLaptopScope, in the VM
// lane's guest b. These tests are what a host without systemd, or a manager that is not what it
// should be, gets.

// TestNoManagerSaysWhy: where no manager answers, Start fails with ErrNoManager, naming the manager
// and the socket it tried.
func TestNoManagerSaysWhy(t *testing.T) {
	m := managerFor(t.TempDir()) // a runtime directory with no bus in it
	if _, err := os.Stat(m.path); err == nil {
		t.Skipf("skipped: systemd's %s answers here at %s (test/e2e's TestLaptopScope tests that)", m.name, m.path)
	}
	_, err := Start(context.Background(), Options{Name: "reaper-test.scope", Pids: []int{os.Getpid()}, RuntimeDir: t.TempDir(), Timeout: 5 * time.Second})
	if !errors.Is(err, ErrNoManager) {
		t.Fatalf("Start without a manager: %v, want ErrNoManager", err)
	}
	if !strings.Contains(err.Error(), m.name) || !strings.Contains(err.Error(), m.path) {
		t.Errorf("the error %q does not name systemd's %s at %s", err, m.name, m.path)
	}
}

// TestNoPids: a scope holds at least one process.
func TestNoPids(t *testing.T) {
	if _, err := Start(context.Background(), Options{Name: "reaper-test.scope"}); err == nil {
		t.Fatal("Start with no pids succeeded")
	}
}

// TestPrivateSocketPeerMustBePID1: on a manager's private socket, a peer that is not PID 1 of this
// PID namespace (here, this very process) is not the system manager, and is refused before anything
// is sent to it: it would read the pids given to it in another PID namespace.
func TestPrivateSocketPeerMustBePID1(t *testing.T) {
	if os.Getpid() == 1 {
		t.Skip("skipped: this process is PID 1")
	}
	path := filepath.Join(t.TempDir(), "private")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, _ := c.Read(make([]byte, 64)) // 0 once the dialer has hung up without a word
		got <- n
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := manager{name: "system manager", path: path}.dial(ctx)
	if err == nil {
		conn.Close()
		t.Fatal("dial accepted a peer that is not PID 1")
	}
	if !strings.Contains(err.Error(), "not PID 1") {
		t.Errorf("the error %q does not say the peer is not PID 1", err)
	}
	if n := <-got; n != 0 {
		t.Errorf("the peer received %d bytes, want none", n)
	}
}
