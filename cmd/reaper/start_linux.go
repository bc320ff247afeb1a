package main

import (
	"os"
	"strconv"

	"github.com/cgreaper/reaper/internal/pidns"
	"golang.org/x/sys/unix"
)

// closeInherited marks every descriptor above standard error close-on-exec. reaper may inherit
// descriptors from whatever started it (a CI runner's pipes, a shell's, a supervisor's sockets): no
// task may inherit them in turn, to read what it should not or to hold a pipe open that its owner
// waits on. main calls it first, in the guard and in the server alike; every descriptor the program
// opens itself is close-on-exec already, and what it passes on it passes explicitly.
func closeInherited() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	// Before Linux 5.11: one by one.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// initIfAsked makes this process the init of a session's PID namespace, and exits with its status,
// when a reaper server started the program as one (see pidns.RunInit).
func initIfAsked() {
	if pidns.IsInit(os.Args) {
		os.Exit(pidns.RunInit())
	}
}
