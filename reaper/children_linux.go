package reaper

import (
	"errors"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// exitStatus is how a child ended.
type exitStatus struct {
	pid    int
	status unix.WaitStatus
}

// code returns the exit code in the shell's convention: the status for a normal exit, 128+n for a
// death by signal n.
func (e exitStatus) code() int {
	if e.status.Signaled() {
		return 128 + int(e.status.Signal())
	}
	return e.status.ExitStatus()
}

// children is the one place in the program that waits for child processes. A single goroutine sits
// in a blocking wait4(-1) and hands each exit status to whoever registered that pid; what nobody
// registered (orphans adopted as child subreaper) is reaped and dropped, so no zombie stays behind.
// Registration happens under the same lock as the fork, so a child that exits at once cannot be
// reaped before its owner is known. Nothing else may call wait4, waitid or exec.Cmd.Wait.
//
// A blocking wait4 wakes the moment a child exits; waiting for SIGCHLD through os/signal instead
// costs two more goroutine hand-offs per exit. When there are no children, wait4 fails with ECHILD
// and the goroutine sleeps until the next fork.
type children struct {
	forked chan struct{} // a child was started (buffered 1)
	done   chan struct{} // the loop has returned

	// mu guards the fields that follow, and is held across each fork.
	mu       sync.Mutex
	waiting  map[int]chan<- exitStatus
	orphans  int  // reaped processes nobody registered
	stopping bool // close was called: return at the next ECHILD or when wake is reaped
	wake     int  // the pid close started to wake the loop
}

func newChildren() *children {
	c := &children{
		forked:  make(chan struct{}, 1),
		done:    make(chan struct{}),
		waiting: make(map[int]chan<- exitStatus),
	}
	go c.loop()
	return c
}

// start runs fork (which must start exactly one child and return its pid) with the lock held, and
// registers the child. The returned channel receives its exit status exactly once.
func (c *children) start(fork func() (int, error)) (int, <-chan exitStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan exitStatus, 1)
	c.waiting[pid] = ch
	select {
	case c.forked <- struct{}{}:
	default:
	}
	return pid, ch, nil
}

func (c *children) loop() {
	defer close(c.done)
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			c.mu.Lock()
			stop := c.stopping
			c.mu.Unlock()
			if stop {
				return
			}
			<-c.forked
			continue
		case err != nil:
			return // EINVAL or EFAULT cannot happen with these arguments
		}
		if !ws.Exited() && !ws.Signaled() {
			continue
		}
		c.mu.Lock()
		ch, ok := c.waiting[pid]
		delete(c.waiting, pid)
		if !ok {
			c.orphans++
		}
		stop := c.stopping && pid == c.wake
		c.mu.Unlock()
		if ok {
			ch <- exitStatus{pid: pid, status: ws}
		}
		if stop {
			return
		}
	}
}

// registered returns the pids of the live children started through start.
func (c *children) registered() map[int]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]bool, len(c.waiting))
	for pid := range c.waiting {
		out[pid] = true
	}
	return out
}

// reaped returns how many processes were reaped that nobody had registered.
func (c *children) reaped() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.orphans
}

// close stops the loop and waits for it. While any child is left the loop may be blocked in wait4 on
// one that will not exit soon (one in D state that outlived its kill), so close then starts a child of
// its own that exits at once, argv, whose reaping wakes the loop. Without argv, or if it cannot be
// started, the loop returns at its next ECHILD. With no child at all the loop is not in wait4, or
// leaves it with ECHILD, and no process is started: the common case, which saves a fork and exec.
func (c *children) close(argv []string) {
	c.mu.Lock()
	c.stopping = true
	if len(argv) > 0 && hasChildren() {
		if pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{}); err == nil {
			c.wake = pid
		}
	}
	c.mu.Unlock()
	select {
	case c.forked <- struct{}{}:
	default:
	}
	<-c.done
}

// hasChildren tells whether this process has a child, live or a zombie, without reaping it (WNOWAIT:
// the loop stays the only one that reaps). An error other than ECHILD counts as a child, so that close
// still wakes the loop.
func hasChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return !errors.Is(err, unix.ECHILD)
}
