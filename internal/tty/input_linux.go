package tty

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"golang.org/x/sys/unix"
)

// Input is a task's open standard input.
type Input struct {
	// The fields up to mu are fixed at creation.
	tty bool
	w   *os.File   // where input goes: the pipe's write end, or the terminal's master (the pump's)
	id  proc.Input // what the task reads, as /proc names it

	// mu guards closed and serialises writes, so that two calls' inputs never interleave.
	mu     sync.Mutex
	closed bool
}

// NewTerminal returns the input of a task on the terminal whose master is w (see Open); the master
// stays whoever reads the task's output from it: closing the input leaves it open.
func NewTerminal(w *os.File, id proc.Input) *Input { return &Input{tty: true, w: w, id: id} }

// NewPipe returns the input of a task that reads a pipe whose write end is w (see Pipe); the input
// owns w and closes it on Close.
func NewPipe(w *os.File, id proc.Input) *Input { return &Input{w: w, id: id} }

// TTY reports whether the input is a terminal.
func (in *Input) TTY() bool { return in.tty }

// ID returns what the task reads, as /proc names it.
func (in *Input) ID() proc.Input { return in.id }

// ErrStalled is the cause of a write the task did not take all of within its deadline.
var ErrStalled = errors.New("the task is not reading its input")

// ErrClosed is the cause of a write to an input that is closed: by the caller, or because every
// process that could read it is gone.
var ErrClosed = errors.New("its input is closed (closed by request, or nothing reads it any more)")

// Write writes p to the input, waiting at most d for the task to take it, and returns how much it
// took. Control characters are bytes like any other: on a terminal its line discipline gives them
// their meaning (Ctrl-C, 0x03, interrupts the terminal's foreground process group; Ctrl-D, 0x04, at
// the start of a line is the end of input); through a pipe they reach the task as they are.
func (in *Input) Write(p []byte, d time.Duration) (int, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return 0, ErrClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	in.w.SetWriteDeadline(time.Now().Add(d))
	n, err := in.w.Write(p)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return n, fmt.Errorf("%w: it took %d of %d bytes within %v", ErrStalled, n, len(p), d)
	case errors.Is(err, os.ErrClosed), errors.Is(err, syscall.EIO), errors.Is(err, syscall.EPIPE):
		return n, ErrClosed
	}
	return n, err
}

// Close closes a pipe's write end: the task reads the end of its input. A terminal has no such
// end: its master stays the pump's, and a task reads the end of input from a Ctrl-D. Close is
// idempotent; a write after it fails with ErrClosed.
func (in *Input) Close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closed && !in.tty {
		in.w.Close()
	}
	in.closed = true
}

// Resize sets the terminal's size; the kernel sends its foreground process group SIGWINCH.
func (in *Input) Resize(size Size) error {
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
		return ErrClosed
	}
	return err
}

// ForegroundGroup returns the terminal's foreground process group (as this process sees pids), or 0.
func (in *Input) ForegroundGroup() int {
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
