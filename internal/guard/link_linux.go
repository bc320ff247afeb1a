package guard

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"golang.org/x/sys/unix"
)

// Link is what a guarded server knows of its guard. Its zero value is a server without a guard.
type Link struct {
	Pid      int         // the guard's pid; zero when the server is not guarded
	Announce *os.File    // where the server announces its record (reaper's Options.Announce)
	start    uint64      // the guard's start time, which tells it apart from a process that reused its pid
	guard    proc.Handle // the guard, pinned by a pidfd (where the kernel has them) for WaitGone
}

// Guarded reports whether this process is a guarded server: its environment (getenv) names a guard.
func Guarded(getenv func(string) string) bool { return getenv(EnvPid) != "" }

// LinkFrom reads a server's link to its guard from the environment (getenv: EnvPid and EnvFD). It
// makes the announcement descriptor close-on-exec, so that no task inherits it, and fails if the
// guard is already gone (it died before the server could take its parent-death signal). A server
// that is not guarded gets the zero Link.
func LinkFrom(getenv func(string) string) (Link, error) {
	pid, fd := getenv(EnvPid), getenv(EnvFD)
	if pid == "" {
		return Link{}, nil
	}
	p, err1 := strconv.Atoi(pid)
	f, err2 := strconv.Atoi(fd)
	if err1 != nil || err2 != nil || p <= 0 || f < 3 {
		return Link{}, fmt.Errorf("bad guard link %s=%q %s=%q", EnvPid, pid, EnvFD, fd)
	}
	unix.CloseOnExec(f)
	l := Link{Pid: p, Announce: os.NewFile(uintptr(f), "guard")}
	w := proc.NewWalker()
	if st, ok := w.Stat(p); ok {
		l.start = st.Start
		if hs := w.Verify([]proc.Stat{st}); len(hs) == 1 {
			l.guard = hs[0]
		}
	}
	if l.Gone() {
		l.Announce.Close()
		return Link{}, fmt.Errorf("the guard (pid %d) is gone", p)
	}
	return l, nil
}

// Clean tells the guard, as the server's last word, that the server has ended every session and
// removed everything its instance made: the guard then exits with the server's status at once,
// without cleaning up. A server that is not guarded does nothing.
func (l Link) Clean() error {
	if l.Announce == nil {
		return nil
	}
	if _, err := l.Announce.Write([]byte(Clean + "\n")); err != nil {
		return fmt.Errorf("tell the guard (pid %d) of a clean end: %w", l.Pid, err)
	}
	return nil
}

// WaitGone blocks until the guard has died or ctx is done, and reports whether the guard died. It
// polls a pidfd of the guard, readable once the whole guard process has exited: unlike the
// parent-death signal (sent when the forking thread exits, and two may merge), it is sure. Where
// pidfds are unavailable it looks every 10 ms. A server that is not guarded waits for ctx.
func (l Link) WaitGone(ctx context.Context) bool {
	if l.Pid == 0 {
		<-ctx.Done()
		return false
	}
	w := proc.NewWalker()
	h := l.guard
	if !h.HasFD() { // look in /proc for the guard's pid with its start time
		h = proc.NewHandle(proc.Stat{Pid: l.Pid, Start: l.start}, -1)
	}
	for ctx.Err() == nil {
		if alive := w.WaitGone(ctx, []proc.Handle{h}, time.Now().Add(time.Hour)); len(alive) == 0 {
			return true
		}
	}
	return false
}

// Group returns the guard's process group, the one its server was started in (-1 where it cannot be
// read); a server that is not guarded gets its own.
func (l Link) Group() int {
	pgrp, err := unix.Getpgid(l.Pid)
	if err != nil {
		return -1
	}
	return pgrp
}

// Gone reports whether a guarded server's guard has died or is dying, as far as can be seen now:
// this process's parent is no longer the guard, or the guard is exiting (see WaitGone for the sure
// way).
func (l Link) Gone() bool {
	if l.Pid == 0 {
		return false
	}
	if os.Getppid() != l.Pid {
		return true
	}
	st, ok := proc.NewWalker().Stat(l.Pid)
	return !ok || st.Start != l.start || st.Dead()
}
