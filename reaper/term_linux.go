package reaper

import (
	"os"

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
