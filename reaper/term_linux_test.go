package reaper

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/cgreaper/reaper/internal/tty"
)

// startInput starts a background task with an open input, failing the test if it cannot.
func startInput(t testing.TB, s *Session, command string, opts StartOptions) string {
	t.Helper()
	ti, err := s.StartWith(command, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ti.ID
}

// waitingFor polls until the task waits for input with suffix (its prompt) at the end of what it
// printed, and returns all it printed so far. Both, because the task may block in its read before
// reaper's pump has read the prompt it wrote just before.
func waitingFor(t testing.TB, s *Session, id, what, suffix string) string {
	t.Helper()
	var text string
	testutil.Eventually(t, what, func() bool {
		ti, c, err := s.Output(context.Background(), id, OutputOptions{Offset: offset(0)})
		if err != nil {
			t.Fatal(err)
		}
		text = c.Text
		return ti.WaitingForInput && strings.HasSuffix(text, suffix)
	})
	return text
}

// answer writes input and returns the output that follows it (see InputOptions.Wait).
func answer(t testing.TB, s *Session, id, input string) string {
	t.Helper()
	if _, err := s.WriteInput(context.Background(), id, []byte(input), InputOptions{Wait: 10 * time.Second}); err != nil {
		t.Fatalf("write %q: %v", input, err)
	}
	_, c, err := s.Output(context.Background(), id, OutputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Text
}

// TestTerminalTask: a task on a terminal finds one on its standard files, reads a password with echo
// off, says it waits for input, and ends when it has its answer; in both containment modes, with the
// session's PID namespace or not.
func TestTerminalTask(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("skipped: no python3 here")
	}
	for _, mode := range modes {
		for _, ns := range []PIDNamespace{PIDNamespaceAuto, PIDNamespaceOff} {
			t.Run(mode.String()+"/pidns="+ns.String(), func(t *testing.T) {
				r := newTestReaper(t, mode, Options{PIDNamespace: ns})
				s := newTestSession(t, r, SessionOptions{})
				id := startInput(t, s, `python3 -c 'import getpass, os, sys
print("tty", sys.stdin.isatty(), os.isatty(1), os.get_terminal_size())
print("got", len(getpass.getpass("password: ")))'`, StartOptions{TTY: &TermSize{Rows: 30, Cols: 100}})
				before := waitingFor(t, s, id, "the password prompt", "password: ")
				if !strings.Contains(before, "tty True True os.terminal_size(columns=100, lines=30)") || !strings.HasSuffix(before, "password: ") {
					t.Fatalf("before the answer: %q", before)
				}
				after := answer(t, s, id, "secret\n")
				ti, _ := s.Wait(context.Background(), id, time.Minute)
				if ti.Status != Completed || ti.Input != "tty" || !strings.Contains(after, "got 6") || strings.Contains(after, "secret") {
					t.Errorf("after the answer: %q, %+v", after, ti)
				}
				if _, err := s.WriteInput(context.Background(), id, []byte("more\n"), InputOptions{}); !errors.Is(err, tty.ErrClosed) && !errors.Is(err, ErrUnknownTask) {
					t.Errorf("a write to a task that ended: %v", err)
				}
			})
		}
	}
}

// TestTerminalInterrupt: Ctrl-C on a terminal interrupts what runs in the foreground of an
// interactive shell, not the shell, which then runs the next command; a resize reaches it.
func TestTerminalInterrupt(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	s := newTestSession(t, r, SessionOptions{})
	id := startInput(t, s, "PS1='$ ' bash --norc --noprofile -i", StartOptions{TTY: &TermSize{Rows: 24, Cols: 80}})
	waitingFor(t, s, id, "the shell's prompt", "$ ")
	// Long sleeps: a Ctrl-C between two of them, before bash takes the terminal back, would reach
	// no one (see TestInteractivePrograms).
	if _, err := s.WriteInput(context.Background(), id, []byte("while :; do sleep 5; done\n"), InputOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	answer(t, s, id, "\x03")
	if out := answer(t, s, id, "echo alive $((6*7))\n"); !strings.Contains(out, "alive 42") {
		t.Errorf("after Ctrl-C: %q", out)
	}
	if _, err := s.WriteInput(context.Background(), id, []byte("stty size\n"), InputOptions{Size: &TermSize{Rows: 50, Cols: 132}, Wait: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, c, _ := s.Output(context.Background(), id, OutputOptions{}); !strings.Contains(c.Text, "50 132") {
		t.Errorf("stty size after a resize: %q", c.Text)
	}
	answer(t, s, id, "exit 3\n")
	if ti, _ := s.Wait(context.Background(), id, time.Minute); ti.Status != Failed || ti.ExitCode != 3 {
		t.Errorf("the shell after exit 3: %+v", ti)
	}
}

// TestPipeInput: a task started with stdin reads what is written, says when it waits for more, and
// reads its end once it is closed; a task without one refuses writes.
func TestPipeInput(t *testing.T) {
	r := newTestReaper(t, ContainProcess, Options{})
	s := newTestSession(t, r, SessionOptions{})
	id := startInput(t, s, `read a; echo "first $a"; read b; echo "second $b"; cat; echo end`, StartOptions{Stdin: true})
	waitingFor(t, s, id, "the first read", "")
	if out := answer(t, s, id, "one\n"); out != "first one\n" {
		t.Errorf("after the first line: %q", out)
	}
	if out := answer(t, s, id, "two\nthree\n\x03"); out != "second two\nthree\n\x03" {
		t.Errorf("after the second: %q", out)
	}
	if _, err := s.WriteInput(context.Background(), id, nil, InputOptions{Close: true, Wait: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ti, c, _ := s.Output(context.Background(), id, OutputOptions{})
	if ti, _ = s.Wait(context.Background(), id, time.Minute); ti.Status != Completed || c.Text != "end\n" {
		t.Errorf("after the close: %q, %+v", c.Text, ti)
	}
	plain := startInput(t, s, "sleep 60", StartOptions{})
	if _, err := s.WriteInput(context.Background(), plain, []byte("x"), InputOptions{}); !errors.Is(err, ErrBadInput) {
		t.Errorf("a write to a task without input: %v", err)
	}
	if _, err := s.WriteInput(context.Background(), id, make([]byte, MaxInputBytes+1), InputOptions{}); !errors.Is(err, ErrBadInput) {
		t.Errorf("an input over the bound: %v", err)
	}
}

// TestInputStalls: a task that does not read its input holds a write up for the write's timeout at
// most, and the error says how much it took; its session still ends at once.
func TestInputStalls(t *testing.T) {
	r := newTestReaper(t, ContainProcess, Options{})
	s := newTestSession(t, r, SessionOptions{})
	// A terminal in canonical mode drops what does not fit in its line (4 KiB) rather than hold a
	// writer up; in raw mode it holds it up as a pipe does.
	for _, opts := range []StartOptions{{Stdin: true}, {TTY: &TermSize{Rows: 24, Cols: 80}}} {
		id := startInput(t, s, "stty raw -echo; echo ready; sleep 600", opts)
		testutil.Eventually(t, "the terminal in raw mode", func() bool {
			_, c, _ := s.Output(context.Background(), id, OutputOptions{Offset: offset(0)})
			return strings.Contains(c.Text, "ready")
		})
		start := time.Now()
		var n int
		var err error
		for range 4 { // a pipe, and a terminal, take 64 KiB before the reader must read
			if n, err = s.WriteInput(context.Background(), id, make([]byte, MaxInputBytes), InputOptions{Timeout: 500 * time.Millisecond}); err != nil {
				break
			}
		}
		if !errors.Is(err, ErrInputStalled) || n >= MaxInputBytes || time.Since(start) > 10*time.Second {
			t.Errorf("%+v: a write nobody reads: %d bytes, %v, after %v", opts, n, err, time.Since(start))
		}
	}
	start := time.Now()
	if _, err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close took %v", d)
	}
}

// TestTerminalTaskDiesWithItsSession: a terminal's hangup spares nothing: what a terminal task
// started, in a session of its own and deaf to SIGHUP, dies with the session, as does the task.
func TestTerminalTaskDiesWithItsSession(t *testing.T) {
	for _, mode := range modes {
		for _, ns := range []PIDNamespace{PIDNamespaceAuto, PIDNamespaceOff} {
			t.Run(mode.String()+"/pidns="+ns.String(), func(t *testing.T) {
				r := newTestReaper(t, mode, Options{PIDNamespace: ns})
				s := newTestSession(t, r, SessionOptions{})
				id := startInput(t, s, `setsid sh -c 'trap "" HUP; echo $$; exec sleep 1000' & trap '' HUP; echo $$; sleep 1000`,
					StartOptions{TTY: &TermSize{Rows: 24, Cols: 80}})
				pids := taskPids(t, s, id, 2)
				if len(pids) != 2 {
					t.Fatalf("pids %v", pids)
				}
				if _, err := s.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				testutil.AssertDead(t, pids)
			})
		}
	}
}
