package reaper

import (
	"context"
	"testing"

	"github.com/cgreaper/reaper/internal/testutil"
)

// TestPumpBuffers: a pump reads a running task's output with its full buffer, a slowed one (what a
// finished foreground command left behind writes on, read only to be discarded) with a small one,
// and a stopped one holds none: an idle session keeps its last task, and the task its pump, until
// its next command.
func TestPumpBuffers(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	s := newTestSession(t, r, SessionOptions{})
	// newest returns the session's newest task.
	newest := func() *task {
		s.mu.Lock()
		defer s.mu.Unlock()
		var last *task
		for _, t := range s.tasks {
			if last == nil || t.started.After(last.started) {
				last = t
			}
		}
		return last
	}
	buffer := func(p *pump) int {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.buf == nil {
			return -1
		}
		return len(p.buf)
	}

	run(t, s, "echo hi")
	done := newest().pump
	testutil.Eventually(t, "a finished command's pump letting go of its buffer", func() bool { return buffer(done) == -1 })

	run(t, s, "(while :; do echo leftover; sleep 0.01; done) & echo started")
	left := newest()
	if n := buffer(left.pump); n != idleBufSize {
		t.Errorf("the pump of a command whose leftover writes on has a buffer of %d bytes, want %d", n, idleBufSize)
	}
	before := left.out.size()
	testutil.Eventually(t, "the leftover's output being read on", func() bool { return left.out.size() > before+100 })

	ti, err := s.Start("echo a; sleep 60", "")
	if err != nil {
		t.Fatal(err)
	}
	bg, err := s.lookup(ti.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := buffer(bg.pump); n != bufSize {
		t.Errorf("a running task's pump has a buffer of %d bytes, want %d", n, bufSize)
	}

	if _, err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for what, p := range map[string]*pump{"the slowed pump": left.pump, "the running task's pump": bg.pump} {
		if n := buffer(p); n != -1 {
			t.Errorf("%s holds a buffer of %d bytes after Close", what, n)
		}
	}
}
