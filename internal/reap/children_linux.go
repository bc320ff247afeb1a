package reap

import (
	"sync"
	"syscall"
	"unsafe"
)

// Exit is how a child ended.
type Exit struct {
	Pid    int
	Status syscall.WaitStatus
}

// Code returns the exit code in the shell's convention: the status for a normal exit, 128+n for a
// death by signal n.
func (e Exit) Code() int {
	if e.Status.Signaled() {
		return 128 + int(e.Status.Signal())
	}
	return e.Status.ExitStatus()
}

// Killed is the Exit of a process that died of SIGKILL without anyone seeing its status: a task of a
// PID namespace whose init died, which the kernel kills.
func Killed(pid int) Exit { return Exit{Pid: pid, Status: syscall.WaitStatus(syscall.SIGKILL)} }

// Children is the one place in a program that waits for child processes. A single goroutine sits
// in a blocking waitid(P_ALL, WNOWAIT) and, once a child has exited, reaps it under the lock that is
// held across each fork, and hands its status to whoever registered that pid; what nobody registered
// (orphans adopted as a child subreaper, or as the init of a PID namespace) is reaped and dropped, so
// no zombie stays behind. So a child that exits at once is reaped only once its owner is known, and
// its pid stays its own (a zombie) for as long as the fork's caller holds the lock. Nothing else may
// call wait4, waitid or exec.Cmd.Wait.
//
// A blocking wait wakes the moment a child exits; waiting for SIGCHLD through os/signal instead
// costs two more goroutine hand-offs per exit. When there are no children, waitid fails with ECHILD
// and the goroutine sleeps until the next fork.
type Children struct {
	forked chan struct{} // a child was started (buffered 1)
	done   chan struct{} // the loop has returned

	// mu guards the fields that follow, and is held across each fork.
	mu       sync.Mutex
	waiting  map[int]chan<- Exit // buffered: each receives its child's exit exactly once
	orphans  int                 // reaped processes nobody registered
	stopping bool                // Close was called: return at the next ECHILD or when wake is reaped
	wake     int                 // the pid Close started to wake the loop
}

// NewChildren starts the loop. A process may have only one.
func NewChildren() *Children {
	c := &Children{forked: make(chan struct{}, 1), done: make(chan struct{}), waiting: make(map[int]chan<- Exit)}
	go c.loop()
	return c
}

// Start runs fork (which must start exactly one child and return its pid) with the lock held, and
// registers the child. The returned channel receives its exit status exactly once. Until fork has
// returned the child cannot be reaped: fork may still read what it needs of the child in /proc (a
// zombie's too), or tell its pid to someone before the exit can be reported.
func (c *Children) Start(fork func() (int, error)) (int, <-chan Exit, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan Exit, 1)
	c.waiting[pid] = ch
	select {
	case c.forked <- struct{}{}:
	default:
	}
	return pid, ch, nil
}

// loop is the goroutine that waits (see Children).
func (c *Children) loop() {
	defer close(c.done)
	for {
		switch waitAny(0) {
		case nil:
			if c.reap() {
				return
			}
		case syscall.EINTR:
		case syscall.ECHILD:
			c.mu.Lock()
			stop := c.stopping
			c.mu.Unlock()
			if stop {
				return
			}
			<-c.forked
		default:
			return // EINVAL or EFAULT cannot happen with these arguments
		}
	}
}

// reap reaps one exited child, hands its status to whoever registered it, and reports whether the
// loop should stop (it reaped the process Close started).
func (c *Children) reap() bool {
	var ws syscall.WaitStatus
	c.mu.Lock()
	pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
	if err != nil || pid <= 0 || !ws.Exited() && !ws.Signaled() {
		c.mu.Unlock()
		return false
	}
	ch, ok := c.waiting[pid]
	delete(c.waiting, pid)
	if !ok {
		c.orphans++
	}
	stop := c.stopping && pid == c.wake
	c.mu.Unlock()
	if ok {
		ch <- Exit{Pid: pid, Status: ws}
	}
	return stop
}

// Registered returns the pids of the live children started through Start.
func (c *Children) Registered() map[int]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int]bool, len(c.waiting))
	for pid := range c.waiting {
		out[pid] = true
	}
	return out
}

// Reaped returns how many processes were reaped that nobody had registered.
func (c *Children) Reaped() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.orphans
}

// Close stops the loop and waits for it. While any child is left the loop may be blocked in wait4 on
// one that will not exit soon (one in D state that outlived its kill), so Close then starts a child of
// its own that exits at once, argv, whose reaping wakes the loop. Without argv, or if it cannot be
// started, the loop returns at its next ECHILD. With no child at all the loop is not in wait4, or
// leaves it with ECHILD, and no process is started: the common case, which saves a fork and exec.
func (c *Children) Close(argv []string) {
	c.mu.Lock()
	c.stopping = true
	if len(argv) > 0 && HasChildren() {
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

// HasChildren tells whether this process has a child, live or a zombie, without reaping it (WNOWAIT:
// the loop stays the only one that reaps). An error other than ECHILD counts as a child (Close then
// still wakes the loop).
func HasChildren() bool {
	for {
		if err := waitAny(syscall.WNOHANG); err != syscall.EINTR {
			return err != syscall.ECHILD
		}
	}
}

// Childless reports whether pid is this process and it has no child, live or a zombie (HasChildren):
// then nothing descends from it, and a walk below it has nothing to find. A subreaper's callers ask
// it before reading /proc for what it may have been left with.
func Childless(pid int) bool { return pid == syscall.Getpid() && !HasChildren() }

// Exited reports whether pid is a child of this process that has exited and awaits its reaping (a
// zombie), without reaping it, in one system call that reads nothing in /proc (a walk passes over
// the dead among this process's children so: see proc.Query.Exited). It is false for a live child,
// for a pid that is not this process's child, and for one already reaped.
func Exited(pid int) bool {
	for {
		signo, err := waitidInfo(pPid, pid, syscall.WNOHANG)
		if err != syscall.EINTR {
			return err == nil && signo == syscall.SIGCHLD
		}
	}
}

// waitAny waits for any child to have exited, without reaping it.
func waitAny(options int) error {
	_, err := waitidInfo(pAll, 0, options)
	return err
}

// waitidInfo is waitid(idtype, id, &info, WEXITED|WNOWAIT|options) (package syscall has none),
// returning the siginfo's signal number: SIGCHLD when a child was found, 0 when WNOHANG found none
// waitable (the kernel then clears the siginfo).
func waitidInfo(idtype, id, options int) (syscall.Signal, error) {
	var info [128]byte // siginfo_t; si_signo is its first int
	_, _, e := syscall.Syscall6(syscall.SYS_WAITID, uintptr(idtype), uintptr(id), uintptr(unsafe.Pointer(&info)),
		uintptr(syscall.WEXITED|wNoWait|options), 0, 0)
	if e != 0 {
		return 0, e
	}
	return syscall.Signal(*(*int32)(unsafe.Pointer(&info[0]))), nil
}

// Arguments of waitid(2) that package syscall does not name.
const (
	pAll    = 0         // P_ALL
	pPid    = 1         // P_PID
	wNoWait = 0x1000000 // WNOWAIT
)
