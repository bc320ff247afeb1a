package taskout

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// buffer returns the size of the pump's read buffer, -1 once it let go of it.
func buffer(p *Pump) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf == nil {
		return -1
	}
	return len(p.buf)
}

// startPump runs a pump of a new pipe into a new output until the test ends, and returns the pipe's
// write end.
func startPump(t *testing.T) (*Pump, *Output, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out := testStore(t, 1<<20).New("p.out")
	p, err := NewPump(r, out)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run()
	}()
	t.Cleanup(func() {
		w.Close()
		p.Abort()
		<-done
	})
	return p, out, w
}

// TestPumpBuffers: a pump reads a running task's output with its full buffer, a slowed one (what a
// finished foreground command left behind writes on, read only to be discarded) with a small one,
// and a stopped one holds none: an idle session keeps its last task, and the task its pump, until
// its next command.
func TestPumpBuffers(t *testing.T) {
	p, out, w := startPump(t)
	if n := buffer(p); n != bufSize {
		t.Errorf("a running pump has a buffer of %d bytes, want %d", n, bufSize)
	}
	w.Write([]byte("hello\n"))
	testutil.Eventually(t, "the pump reading what was written", func() bool { return out.Size() == 6 })

	p.Slow()
	if n := buffer(p); n != idleBufSize {
		t.Errorf("a slowed pump has a buffer of %d bytes, want %d", n, idleBufSize)
	}
	// A slowed pump goes on emptying the pipe: the writer is never blocked for good.
	mustWrite(t, w, 1<<20, "to a slowed pump's pipe")

	w.Close()
	select {
	case <-p.done:
	case <-time.After(patience):
		t.Fatalf("the pump did not stop within %v of its pipe's end", patience)
	}
	if n := buffer(p); n != -1 {
		t.Errorf("a stopped pump holds a buffer of %d bytes", n)
	}
}

// patience bounds the waits of this package's tests: generous, the machine may be loaded.
const patience = 30 * time.Second

// TestPumpDuringGrep: while a slow grep searches the output, the pump goes on reading the pipe into
// it: a writer of 4 MiB (64 pipes' worth) is never held up for good.
func TestPumpDuringGrep(t *testing.T) {
	_, out, w := startPump(t)
	fill(out, 2000, 1000) // lines of a's that take the pattern over a millisecond each
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	grepped := make(chan error, 1)
	go func() {
		_, err := out.Grep(ctx, offset(0), true, mustCompile(t, slowPattern), Budget{})
		grepped <- err
	}()
	mustWrite(t, w, 4<<20, "during a grep")
	select {
	case err := <-grepped:
		t.Fatalf("the grep ended before the writes (%v): the test shows nothing", err)
	default:
	}
	cancel()
	if err := <-grepped; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled grep: %v", err)
	}
}

// mustWrite writes n bytes to w, failing the test if the write does not return within patience.
func mustWrite(t *testing.T, w *os.File, n int, what string) {
	t.Helper()
	wrote := make(chan error, 1)
	go func() {
		_, err := w.Write(bytes.Repeat([]byte("x"), n))
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatalf("a write of %d bytes %s did not return within %v", n, what, patience)
	}
}
