package job

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// terminal is a terminal the job was given the foreground of, and the process group to give it back
// to.
type terminal struct {
	fd   int
	pgrp int
}

// foregroundTerminal returns the terminal on f, if f is one whose foreground process group is pgrp
// (the group reaper run was started in): the job may then take the foreground, as a shell's job does.
// It reports false where f is no terminal, or reaper runs in the background of one.
func foregroundTerminal(f *os.File, pgrp int) (terminal, bool) {
	fd := int(f.Fd())
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || fg != pgrp {
		return terminal{}, false
	}
	return terminal{fd: fd, pgrp: pgrp}, true
}

// restore gives the terminal's foreground back to the process group that had it. This process is in
// a background group of the terminal then, so the kernel would stop it with SIGTTOU, and with tostop
// for a write to it too: restore ignores SIGTTOU first, for the rest of the process's life (it is about
// to exit).
func (t terminal) restore() error {
	signal.Ignore(syscall.SIGTTOU)
	if err := unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.pgrp); err != nil && !errors.Is(err, unix.ENOTTY) {
		return fmt.Errorf("give the terminal back to process group %d: %w", t.pgrp, err)
	}
	return nil
}
