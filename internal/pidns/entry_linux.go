package pidns

import (
	"errors"
	"fmt"
	"os"

	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// Entering. An init need not start a session's processes itself: a thread of the server can enter its
// PID and mount namespaces (setns through the init's pidfd), fork, and go back. The child is then born
// in the namespace (a pid there, /proc and the mounts of the namespace), and it is the server's child,
// reaped by the server's one child reaper: no request to the init and no answer, which cost a
// command's round trip about 0.16 ms and 0.27 ms of CPU on a 2-core VM. Its parent pid inside the
// namespace is 0, as for a process docker exec starts. Its orphans still go to the init, and the init's
// death still kills it with everything else in the namespace.
//
// The thread is one the server keeps for this (an Entry): setns into a mount namespace needs a thread
// that shares no filesystem context (unshare CLONE_FS), and it changes the thread's root and working
// directory, so no other goroutine may run there. Only where the init was made without a user
// namespace: entering one needs a single-threaded process.

// Entry is a thread that forks processes into the namespaces of inits (see Init.Fork). Its methods are
// safe for concurrent use; forks take turns.
type Entry struct {
	f        *reap.Forker
	pid, mnt int // the thread's own PID and mount namespaces, to go back to after each fork
}

// ErrEnter is wrapped by the error of a Fork that could not enter the init's namespaces, with the
// errno of setns, and by NewEntry's where entering cannot work here.
var ErrEnter = errors.New("cannot enter the namespaces of the init")

// NewEntry starts the thread, and runs setup on it first, if set (a flag its children inherit, such as
// no_new_privs). It fails where the thread cannot enter a mount namespace (setns refused, say by a
// seccomp profile), and where what it would fork would not see this process's root directory: where
// the process is chrooted, the root of a mount namespace it enters is not the chroot. It checks both
// by entering its own mount namespace, which resets the thread's root to that namespace's.
func NewEntry(setup func() error) (*Entry, error) {
	var ours unix.Stat_t
	if err := unix.Stat("/", &ours); err != nil {
		return nil, &os.PathError{Op: "stat", Path: "/", Err: err}
	}
	e := &Entry{pid: -1, mnt: -1}
	f, err := reap.StartForker(func() error {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare the filesystem context of the thread that enters PID namespaces: %w", err)
		}
		var err error
		if e.pid, err = unix.Open("/proc/thread-self/ns/pid_for_children", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return &os.PathError{Op: "open", Path: "/proc/thread-self/ns/pid_for_children", Err: err}
		}
		if e.mnt, err = unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return &os.PathError{Op: "open", Path: "/proc/thread-self/ns/mnt", Err: err}
		}
		if err := unix.Setns(e.mnt, unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("%w: setns into its own mount namespace: %w", ErrEnter, err)
		}
		var root unix.Stat_t
		if err := unix.Stat("/", &root); err != nil {
			return &os.PathError{Op: "stat", Path: "/", Err: err}
		}
		if root.Dev != ours.Dev || root.Ino != ours.Ino {
			return fmt.Errorf("%w: the mount namespace's root is not this process's (a chroot?)", ErrEnter)
		}
		if setup != nil {
			return setup()
		}
		return nil
	})
	if err != nil {
		e.closeFDs()
		return nil, err
	}
	e.f = f
	return e, nil
}

// Close ends the thread and waits for it. No Fork may follow.
func (e *Entry) Close() {
	e.f.Stop()
	e.closeFDs()
}

func (e *Entry) closeFDs() {
	for _, fd := range []int{e.pid, e.mnt} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// in runs fn on the thread inside the namespaces of the process pidfd refers to, and goes back. A
// failure to go back is not the caller's: the next entry replaces both namespaces anyway, and all the
// thread keeps meanwhile is a reference to the namespaces it left.
func (e *Entry) in(pidfd int, fn func()) error {
	var err error
	e.f.Run(func() {
		if err = unix.Setns(pidfd, unix.CLONE_NEWPID|unix.CLONE_NEWNS); err != nil {
			return
		}
		fn()
		unix.Setns(e.pid, unix.CLONE_NEWPID)
		unix.Setns(e.mnt, unix.CLONE_NEWNS)
	})
	return err
}

// pidfdDupLocked returns a duplicate of the init's pidfd, for a use that must not race with Close; it
// fails with ErrEnded once the init takes no more requests. in.mu is held.
func (in *Init) pidfdDupLocked() (int, error) {
	if in.err != nil {
		return -1, in.err
	}
	fd, err := unix.FcntlInt(uintptr(in.pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("duplicate the pidfd of the init (pid %d): %w", in.pid, err)
	}
	return fd, nil
}

// Fork starts a process in the init's namespaces from e's thread: fork, run there, must start exactly
// one child (syscall.ForkExec, with a path and a directory that do not depend on the working
// directory: the thread's is the namespace's root) and return its pid as this process sees it. It is
// registered with c, this process's child reaper, as reap.Children.Start does, and its exit comes on
// the channel returned; the init counts it as busy until then (see Options.Idle). started, if set,
// is called with the pid once the thread is back in its own namespaces (paths such as /proc are this
// process's again) and before the child can be reaped. It fails with an
// error wrapping ErrEnded once the init takes no more requests (ErrIdle too where it ended idle, and
// then nothing was started), or has died: a namespace whose init is dying takes no new process
// (fork fails with ENOMEM). An error wrapping ErrEnter says the thread could not enter.
func (in *Init) Fork(e *Entry, c *reap.Children, fork func() (int, error), started func(pid int)) (int, <-chan reap.Exit, error) {
	in.mu.Lock()
	fd, err := in.pidfdDupLocked()
	if err != nil {
		in.mu.Unlock()
		return 0, nil, err
	}
	// Counted before the fork, in the same hold of mu as the look at err: the idle check cannot end
	// the init from here on.
	in.live++
	in.forked = true
	in.forks++
	in.mu.Unlock()
	defer unix.Close(fd)
	var enterErr error
	pid, exited, err := c.StartNotify(func() (pid int, err error) {
		enterErr = e.in(fd, func() { pid, err = fork() })
		switch {
		case enterErr != nil:
			return 0, enterErr
		case err == nil && started != nil:
			started(pid)
		}
		return pid, err
	}, in.exitedOne)
	if err == nil {
		return pid, exited, nil
	}
	in.mu.Lock()
	in.live--
	in.armLocked()
	in.mu.Unlock()
	if in.hungUp() || errors.Is(enterErr, unix.ESRCH) {
		// The init has died (its socket is closed before its namespace refuses new processes), or
		// was ended meanwhile. setns with its pidfd fails with ESRCH once it has exited, which can
		// come before its socket is closed: an exiting process drops its namespaces before the
		// kernel releases the files it closed.
		return 0, nil, in.foundEnded(fmt.Errorf("%w (pid %d): %w", ErrEnded, in.pid, err))
	}
	if enterErr != nil {
		return 0, nil, fmt.Errorf("%w (pid %d): %w", ErrEnter, in.pid, enterErr)
	}
	return 0, nil, err
}

// hungUp reports whether the socket to the init has reached its end: the init has exited or is
// exiting (its descriptors are closed before its namespace refuses new processes), or the server shut
// it down.
func (in *Init) hungUp() bool {
	hup := false
	in.conn.SyscallConn().Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		n, err := unix.Poll(p, 0)
		hup = err == nil && n > 0 && p[0].Revents&(unix.POLLHUP|unix.POLLRDHUP) != 0
	})
	return hup
}

// foundEnded records err, which wraps ErrEnded, as the reason the init takes no more requests
// unless one is known already, and returns it. A request can find the init dead before the reader
// of its socket has: Err must say so from then on, or a caller that asks for a new init when a spawn
// fails with ErrEnded would be handed this one again.
func (in *Init) foundEnded(err error) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err == nil {
		in.err = err
	}
	return err
}

// exitedOne counts the exit of a process Fork started; the child reaper calls it.
func (in *Init) exitedOne(reap.Exit) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.live--
	in.armLocked()
}

// Calm reports whether no process Fork started is alive or being started, with a count of the forks
// so far to hand to SawChildless: a caller that then finds the init without a child (not even a
// zombie) says so, and the init counts as Quiet again until its next fork.
func (in *Init) Calm() (forks uint64, calm bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.forks, in.live == 0
}

// SawChildless records that the init had no child after Calm reported forks, with nothing alive:
// unless Fork started something since, its namespace is empty (every process there is the init's
// descendant or one Fork started), and Quiet says so without a look in /proc.
func (in *Init) SawChildless(forks uint64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.forks == forks && in.live == 0 {
		in.forked = false
	}
}
