package reaper

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/tty"
)

// A task may be started with its standard input open for Session.WriteInput: a pipe, or a
// pseudo-terminal that is its standard input, output and error and its controlling terminal. Reaper
// opens the terminal itself (internal/tty: /dev/ptmx, then the other side with TIOCGPTPEER, never by
// a path) and keeps its master: the output is read from it by the same bounded pump as a pipe's, and
// input is written with a deadline, so a task that stops reading holds up a write for that long at
// most. The task starts in a session of its own with the terminal as its controlling one, its
// process group its pid, so the kill policy reaches it as any task's; a hangup spares nothing.
//
// With a PID namespace the terminal is made in the devpts instance the init mounted for the session,
// through its ptmx opened relative to the root the init handed over (tty.OpenIn): /dev/pts/N is then
// the session's alone. Without, it comes from the host's /dev/ptmx, and a task of another session
// running as the terminal's user can open it by its name (see docs/security.md).

// TermSize is the size of a task's terminal, in characters.
type TermSize struct {
	Rows, Cols uint16
}

// The size of a terminal a caller does not size.
const (
	DefaultRows = tty.DefaultRows
	DefaultCols = tty.DefaultCols
)

// MaxInputBytes bounds one write to a task's input.
const MaxInputBytes = 64 << 10

// openTerminal makes a task's terminal of size: in the devpts instance of in, the session's init, where
// it has one, else the host's.
func (r *Reaper) openTerminal(size TermSize, in *pidns.Init) (master, task *os.File, id proc.Input, err error) {
	if in != nil && in.Devpts() != nil {
		return tty.OpenIn(in.Devpts(), tty.Size(size), r.terminalOwner())
	}
	return tty.Open(tty.Size(size), r.terminalOwner())
}

// terminalOwner is the uid a task's terminal is given to (tty.Open): Options.User's, else -1, root's.
func (r *Reaper) terminalOwner() int {
	if u := r.opts.User; u != nil {
		return int(u.Uid)
	}
	return -1
}

// InputOptions configures a write to a task's input. The zero value writes, leaves the input open
// and returns at once.
type InputOptions struct {
	// Close closes the input after the write: a pipe's reader then reads its end. A terminal cannot
	// be closed (its master is the task's output too): send Ctrl-D ("\x04") at the start of a line.
	Close bool
	// Size, if set, resizes the terminal first.
	Size *TermSize
	// Timeout bounds how long the write waits for the task to take the input; zero means
	// DefaultInputTimeout.
	Timeout time.Duration
	// Wait, if positive, is how long WriteInput then waits for the task to answer: it returns
	// earlier once the task has ended, or once a process of it that took the input waits for input
	// again (with no input written: once a process waits for input) and the task's output has not
	// changed for settleQuiet since (what it wrote before it read again can still be on its way).
	Wait time.Duration
}

// DefaultInputTimeout is how long a write waits for a task that does not take its input.
const DefaultInputTimeout = 5 * time.Second

// ErrInputStalled is returned when a task did not take all of an input within the write's timeout.
var ErrInputStalled = tty.ErrStalled

// WriteInput writes data to the standard input of a running task that has one open (StartOptions),
// and returns how many bytes the task took; then it waits for the answer, if opts says so. A task
// that does not read holds the write up for opts.Timeout at most; the bytes it did not take are not
// written, and the error (ErrInputStalled) says how many.
func (s *Session) WriteInput(ctx context.Context, id string, data []byte, opts InputOptions) (int, error) {
	if len(data) > MaxInputBytes {
		return 0, fmt.Errorf("session %s: %w: %d bytes of input, the limit is %d", s.id, ErrBadInput, len(data), MaxInputBytes)
	}
	t, err := s.lookup(id)
	if err != nil {
		return 0, err
	}
	if t.in == nil {
		return 0, fmt.Errorf("session %s: task %s: %w: its input is /dev/null; start it with stdin or tty to write to it", s.id, id, ErrBadInput)
	}
	if opts.Close && t.in.TTY() {
		return 0, fmt.Errorf("session %s: task %s: %w: a terminal cannot be closed: send Ctrl-D (\\u0004) at the start of a line for the end of input", s.id, id, ErrBadInput)
	}
	if opts.Size != nil {
		if err := t.in.Resize(tty.Size(*opts.Size)); err != nil {
			return 0, fmt.Errorf("session %s: task %s: resize: %w", s.id, id, err)
		}
	}
	d := opts.Timeout
	if d <= 0 {
		d = DefaultInputTimeout
	}
	var before probe
	if opts.Wait > 0 {
		before = s.probe(t)
	}
	n, err := t.in.Write(data, d)
	if err != nil {
		return n, fmt.Errorf("session %s: task %s: %w", s.id, id, err)
	}
	if opts.Close {
		t.in.Close()
	}
	if opts.Wait > 0 {
		return n, s.settle(ctx, t, before, len(data) > 0, opts.Wait)
	}
	return n, nil
}

// probe is a task's processes, and how often each had gone to sleep, before an input.
type probe struct {
	pids     []int
	switches map[int]uint64
	taken    time.Time
}

func (s *Session) probe(t *task) probe {
	p := probe{pids: s.processes(t), switches: make(map[int]uint64), taken: time.Now()}
	w := proc.NewWalker()
	for _, pid := range p.pids[:min(len(p.pids), maxInputCheck)] {
		if n, ok := w.Switches(pid); ok {
			p.switches[pid] = n
		}
	}
	return p
}

// settlePoll is how often settle looks at a task; settleQuiet is how long its output must stay
// unchanged, while it waits for input, for settle to return.
const (
	settlePoll  = 20 * time.Millisecond
	settleQuiet = 60 * time.Millisecond
)

// settle waits, at most d, for a task to answer an input (see InputOptions.Wait); before is the
// task's probe from before the input, wrote whether any was written.
func (s *Session) settle(ctx context.Context, t *task, before probe, wrote bool, d time.Duration) error {
	deadline := time.After(d)
	tick := time.NewTicker(settlePoll)
	defer tick.Stop()
	size, quiet := t.out.Size(), time.Now()
	answered := false // a process that took the input has been seen waiting for input again
	pids, listed := before.pids, before.taken
	w := proc.NewWalker()
	for {
		select {
		case <-t.done:
			return nil
		case <-deadline:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if n := t.out.Size(); n != size {
			size, quiet = n, time.Now()
			continue
		}
		if time.Since(quiet) < settleQuiet {
			continue
		}
		if time.Since(listed) > 500*time.Millisecond { // a walk of /proc in process containment
			pids, listed = s.processes(t), time.Now()
		}
		for _, pid := range s.waitingForInput(w, t, pids) {
			if n, ok := w.Switches(pid); !wrote || ok && n != before.switches[pid] {
				if answered {
					return nil
				}
				// Seen waiting again: its answer must also stay put for settleQuiet.
				answered, quiet = true, time.Now()
				break
			}
		}
	}
}

// maxInputCheck bounds the processes looked at to tell whether a task waits for input.
const maxInputCheck = 64

// waitingForInput returns the processes of the task (of pids) blocked reading its input; on a
// terminal, only its foreground process group is looked at, which is what reads it.
func (s *Session) waitingForInput(w *proc.Walker, t *task, pids []int) []int {
	if t.in == nil {
		return nil
	}
	fg := t.in.ForegroundGroup()
	var out []int
	for _, pid := range pids[:min(len(pids), maxInputCheck)] {
		if fg > 0 {
			if st, ok := w.Stat(pid); !ok || st.Pgid != fg {
				continue
			}
		}
		if w.WaitsFor(pid, t.in.ID()) {
			out = append(out, pid)
		}
	}
	return out
}
