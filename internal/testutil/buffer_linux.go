package testutil

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer that writers (a command's output goroutine, a logger) and the test may use
// at once. Its zero value is empty and ready.
type Buffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Await polls until the buffer contains want, reporting whether it did within 10 seconds (stretched
// by Slow). A process may have written it already: exec copies from the pipe in a goroutine of its own.
func (s *Buffer) Await(want string) bool {
	deadline := time.Now().Add(Slow(10 * time.Second))
	for !strings.Contains(s.String(), want) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
