package reaper

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"golang.org/x/sys/unix"
)

// A background task may be started with its standard input open, so that the caller can write to it
// (Session.WriteInput): a pipe, or a pseudo-terminal that is its standard input, output and error
// and its controlling terminal (a foreground command may have one too, for programs that insist on
// one). Reaper opens the terminal itself (/dev/ptmx, then the other side with TIOCGPTPEER, never by
// a path) and keeps its master side: the task's output is read from it by the same bounded pump as a
// pipe's, and input is written to it with a deadline, so a task that stops reading its terminal holds
// up a write for that long at most, never a call beyond it, the session's end or reaper's exit. The
// task starts in a session of its own with the terminal as its controlling one (setsid, TIOCSCTTY),
// through the session's init where it has a PID namespace: its process group is its pid, so the kill
// policy reaches it as any task's. A hangup of the terminal spares nothing: whatever ignores SIGHUP or
// left the terminal's session dies by the session's kill (its cgroup, its walk, its namespace), as
// every process of a task does.

// TermSize is the size of a task's terminal, in characters.
type TermSize struct {
	Rows, Cols uint16
}

// The size of a terminal a caller does not size.
const (
	DefaultRows = 24
	DefaultCols = 80
)

// MaxInputBytes bounds one write to a task's input.
const MaxInputBytes = 64 << 10

// taskInput is a task's open standard input.
type taskInput struct {
	// The fields up to mu are fixed at creation.
	tty bool
	w   *os.File   // where input goes: the pipe's write end, or the terminal's master (the pump's)
	id  proc.Input // what the task reads, as /proc names it

	// mu guards closed and serialises writes, so that two calls' inputs never interleave.
	mu     sync.Mutex
	closed bool
}

// openTerminal opens a pseudo-terminal of size: the master, non-blocking and close-on-exec, is
// reaper's; the other side is the task's. With Options.User the task's side is given to that user,
// as a login gives a terminal to whoever logs in (programs that reopen their terminal by its name need
// that).
func (r *Reaper) openTerminal(size TermSize) (master, tty *os.File, id proc.Input, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, id, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	fail := func(what string, err error) (*os.File, *os.File, proc.Input, error) {
		unix.Close(m)
		return nil, nil, id, fmt.Errorf("terminal: %s: %w", what, err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlock", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		return fail("number", err)
	}
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return fail("open the other side (TIOCGPTPEER)", errno)
	}
	slave := int(s)
	if err := unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols}); err != nil {
		unix.Close(slave)
		return fail("set its size", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(slave, &st); err != nil {
		unix.Close(slave)
		return fail("stat", err)
	}
	if u := r.opts.User; u != nil {
		if err := unix.Fchown(slave, int(u.Uid), -1); err != nil {
			unix.Close(slave)
			return fail("give it to the user", err)
		}
	}
	id = proc.Input{Target: "/dev/pts/" + strconv.Itoa(n), TTY: proc.TTYNumber(st.Rdev)}
	return os.NewFile(uintptr(m), "ptmx"), os.NewFile(uintptr(slave), id.Target), id, nil
}

// inputPipe makes a pipe for a task's standard input: the read end, blocking, for the task; the write
// end, non-blocking (in the runtime's poller, so that writes can have a deadline), reaper's.
func inputPipe() (rd, wr *os.File, id proc.Input, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, id, fmt.Errorf("input pipe: %w", err)
	}
	var st unix.Stat_t
	err = unix.Fstat(p[0], &st)
	if err == nil {
		err = unix.SetNonblock(p[1], true)
	}
	if err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, nil, id, fmt.Errorf("input pipe: %w", err)
	}
	id = proc.Input{Target: "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"}
	return os.NewFile(uintptr(p[0]), "stdin"), os.NewFile(uintptr(p[1]), "stdin"), id, nil
}

// write writes p to the input, waiting at most d for the task to take it, and returns how much it
// took. Control characters are bytes like any other: on a terminal its line discipline gives them
// their meaning (Ctrl-C, 0x03, interrupts the terminal's foreground process group; Ctrl-D, 0x04, at
// the start of a line is the end of input); through a pipe they reach the task as they are.
func (in *taskInput) write(p []byte, d time.Duration) (int, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return 0, errInputClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	in.w.SetWriteDeadline(time.Now().Add(d))
	n, err := in.w.Write(p)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return n, fmt.Errorf("%w: it took %d of %d bytes within %v", ErrInputStalled, n, len(p), d)
	case errors.Is(err, os.ErrClosed), errors.Is(err, syscall.EIO), errors.Is(err, syscall.EPIPE):
		return n, errInputClosed
	}
	return n, err
}

// errInputClosed is the cause of a write to an input that is closed: by the caller, or because every
// process that could read it is gone.
var errInputClosed = errors.New("its input is closed (closed by request, or nothing reads it any more)")

// close closes a pipe's write end: the task reads the end of its input. A terminal has no such
// end: its master stays the pump's, and a task reads the end of input from a Ctrl-D.
func (in *taskInput) close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed || in.tty {
		in.closed = true
		return
	}
	in.closed = true
	in.w.Close()
}

// resize sets the terminal's size; the kernel sends its foreground process group SIGWINCH.
func (in *taskInput) resize(size TermSize) error {
	if !in.tty {
		return errors.New("its input is a pipe, not a terminal: it has no size")
	}
	rc, err := in.w.SyscallConn()
	if err != nil {
		return err
	}
	cerr := rc.Control(func(fd uintptr) {
		err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
	})
	if cerr != nil {
		return errInputClosed
	}
	return err
}

// foregroundGroup returns the terminal's foreground process group (as this process sees pids), or 0.
func (in *taskInput) foregroundGroup() int {
	if !in.tty {
		return 0
	}
	rc, err := in.w.SyscallConn()
	if err != nil {
		return 0
	}
	pgid := 0
	rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil {
			pgid = v
		}
	})
	return pgid
}
