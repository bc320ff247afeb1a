package reaper

import (
	"os"

	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/tty"
)

// A background task may be started with its standard input open, so that the caller can write to it
// (Session.WriteInput): a pipe, or a pseudo-terminal that is its standard input, output and error
// and its controlling terminal (a foreground command may have one too, for programs that insist on
// one). Reaper opens the terminal itself (internal/tty: /dev/ptmx, then the other side with
// TIOCGPTPEER, never by a path) and keeps its master side: the task's output is read from it by the
// same bounded pump as a pipe's, and input is written to it with a deadline, so a task that stops
// reading its terminal holds up a write for that long at most, never a call beyond it, the
// session's end or reaper's exit. The task starts in a session of its own with the terminal as its
// controlling one (setsid, TIOCSCTTY), through the session's init where it has a PID namespace: its
// process group is its pid, so the kill policy reaches it as any task's. A hangup of the terminal
// spares nothing: whatever ignores SIGHUP or left the terminal's session dies by the session's kill
// (its cgroup, its walk, its namespace), as every process of a task does.
//
// Where the session has a PID namespace, its init has mounted a devpts instance of the session's own
// on the namespace's /dev/pts, and the terminal is made there: through that instance's ptmx, opened
// relative to the descriptor of its root the init handed over when it started (tty.OpenIn), never by
// a path of the host's. Its name, /dev/pts/N, is then the session's alone: a task of another session,
// whatever user it runs as, finds another instance at that path, its own. Without namespaces the
// terminal comes from the host's /dev/ptmx, and a task of another session running as the terminal's
// user can open it by its name (see docs/security.md).

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
