package proc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cgreaper/reaper/internal/spare"
	"golang.org/x/sys/unix"
)

// Handle is a process pinned for signalling. Where the kernel offers pidfds, fd refers to the process
// itself, so a signal sent through it can never reach another process that reused the pid. Where none
// could be held (the descriptor limit refused it), fd is -1 and each signal opens a pidfd for the
// moment, through the reserve, and checks the start time through it before it sends anything: a
// signal never goes by a bare pid.
type Handle struct {
	Stat
	fd    int
	spare *spare.Reserve // lends the pidfd of a signal where fd is -1; nil: none
}

// NewHandle wraps a pidfd the caller already holds (from clone's CLONE_PIDFD, say) for a process it
// knows; fd -1 means none. The Handle owns fd from then on: Close closes it.
func NewHandle(st Stat, fd int) Handle { return Handle{Stat: st, fd: fd} }

// Dup returns a handle of the same process with a pidfd of its own (closed by its own Close), for a
// holder whose lifetime differs from h's; where the descriptor cannot be duplicated it holds none
// (see Handle).
func (h Handle) Dup() Handle {
	d := Handle{Stat: h.Stat, fd: -1, spare: h.spare}
	if h.fd >= 0 {
		if fd, err := unix.FcntlInt(uintptr(h.fd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
			d.fd = fd
		}
	}
	return d
}

// HasFD reports whether the handle holds a pidfd.
func (h Handle) HasFD() bool { return h.fd >= 0 }

// pidfd opens a pidfd of pid, through r where the descriptor limit refuses one.
func pidfd(r *spare.Reserve, pid int) (int, error) {
	return r.Open(func() (int, error) { return unix.PidfdOpen(pid, 0) })
}

// Open opens a handle for each pid without checking who it is: the caller must confirm afterwards that
// each pid still is the process it meant (for a pid listed in a cgroup, by listing the cgroup again:
// the pidfd holds the process, so a pid still listed is the process the pidfd refers to). Pids already
// gone are dropped, and so are those no pidfd could be opened for (the descriptor limit refused it
// even through r, which lends spares; nil lends none), which are returned apart: no signal can reach
// them safely now. Close the handles with CloseAll, which gives the reserve its spares back.
func Open(pids []int, r *spare.Reserve) (hs []Handle, unpinned []int) {
	hs = make([]Handle, 0, len(pids))
	for _, p := range pids {
		fd, err := pidfd(r, p)
		switch {
		case err == nil:
			hs = append(hs, Handle{Stat: Stat{Pid: p}, fd: fd, spare: r})
		case errors.Is(err, unix.ESRCH):
			// Exited between the listing and now: nothing to signal.
		default:
			unpinned = append(unpinned, p)
		}
	}
	return hs, unpinned
}

// Verify opens a handle for each process a walk saw and keeps those that are still that process: the
// pidfd is opened first, then the start time is read again and compared with the walk's. Where the
// descriptor limit refuses the pidfd the handle holds none, and each of its signals opens one (see
// Handle): a walk may find thousands, more than the reserve holds.
func (w *Walker) Verify(ps []Stat) []Handle {
	out := make([]Handle, 0, len(ps))
	for _, p := range ps {
		fd, err := unix.PidfdOpen(p.Pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			fd = -1
		}
		now, ok, starved := w.look(p.Pid)
		if !starved && (!ok || now.Start != p.Start) {
			if fd >= 0 {
				unix.Close(fd)
			}
			continue
		}
		out = append(out, Handle{Stat: p, fd: fd, spare: w.spare})
	}
	return out
}

// Signal sends sig to the process. A process that has exited meanwhile (ESRCH) is not an error; any
// other failure is returned with the pid. A handle without a pidfd opens one for the signal (through
// its reserve), checks through it that the pid still is the process of the start time it was made
// with, and fails where it cannot: it never signals a bare pid, which may have been reused.
func (h Handle) Signal(sig unix.Signal) error {
	fd := h.fd
	if fd < 0 {
		var err error
		if fd, err = h.pin(); fd < 0 {
			if err != nil {
				return fmt.Errorf("send %v to pid %d: %w", sig, h.Pid, err)
			}
			return nil // gone, or another process now
		}
		defer h.spare.Close(fd)
	}
	err := unix.PidfdSendSignal(fd, sig, nil, 0)
	if err == nil || errors.Is(err, unix.ESRCH) {
		return nil
	}
	return fmt.Errorf("send %v to pid %d: %w", sig, h.Pid, err)
}

// pin opens a pidfd of a handle that holds none and checks, once it holds the process, that its start
// time is the handle's; it returns -1 and no error where the process is gone or is another one now.
func (h Handle) pin() (int, error) {
	if h.Start == 0 {
		return -1, fmt.Errorf("no pidfd, and no start time to tell the process by: %w", ErrStarved)
	}
	fd, err := pidfd(h.spare, h.Pid)
	switch {
	case errors.Is(err, unix.ESRCH):
		return -1, nil
	case spare.Limited(err):
		return -1, fmt.Errorf("open a pidfd: %w: %w", ErrStarved, err)
	case err != nil:
		return -1, fmt.Errorf("open a pidfd: %w", err)
	}
	w := NewWalker().Spare(h.spare)
	st, ok := w.Stat(h.Pid)
	if err := w.Starved(); err != nil {
		h.spare.Close(fd)
		return -1, fmt.Errorf("read its start time: %w", err)
	}
	if !ok || st.Start != h.Start {
		h.spare.Close(fd)
		return -1, nil
	}
	return fd, nil
}

// SignalGroup sends sig to the process group the process leads, with one call: the kernel signals the
// whole group before any of it runs, where signals sent one by one let each woken process preempt the
// sender and serialise their exits on one CPU. It goes through the pidfd (PIDFD_SIGNAL_PROCESS_GROUP,
// Linux 6.9), so the group is certainly the process's own. Where that is not possible (no pidfd, an
// older kernel) it does nothing and reports false: the caller's per-process signals do the work.
func (h Handle) SignalGroup(sig unix.Signal) (bool, error) {
	if h.fd < 0 {
		return false, nil
	}
	err := unix.PidfdSendSignal(h.fd, sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ESRCH):
		return true, nil // the group is gone
	case errors.Is(err, unix.EINVAL):
		return false, nil // a kernel without PIDFD_SIGNAL_PROCESS_GROUP
	}
	return false, fmt.Errorf("send %v to the process group of pid %d: %w", sig, h.Pid, err)
}

// Exited reports whether the process has exited (it is a zombie, or reaped), as its pidfd tells at
// once: it becomes readable when the process exits. Without a pidfd it cannot tell, and reports false.
func (h Handle) Exited() bool {
	if h.fd < 0 {
		return false
	}
	p := []unix.PollFd{{Fd: int32(h.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err == nil && n > 0 && p[0].Revents&unix.POLLIN != 0
}

// Close releases the pidfd (to the reserve it may have come from). It is safe to call on a handle
// without one.
func (h Handle) Close() {
	if h.fd >= 0 {
		h.spare.Close(h.fd)
	}
}

// SignalAll sends each of sigs to each process, in that order per process, and returns the failures.
func SignalAll(hs []Handle, sigs ...unix.Signal) error {
	var errs []error
	for _, h := range hs {
		for _, sig := range sigs {
			if err := h.Signal(sig); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// CloseAll closes every handle.
func CloseAll(hs []Handle) {
	for _, h := range hs {
		h.Close()
	}
}

// WaitGone waits until every process in hs has exited (a zombie has), the deadline passes or ctx is
// done, and returns those still alive. It sleeps in poll(2) on the pidfds, which become readable when
// their process exits; processes without a pidfd are read again in /proc every 10 ms (one whose stat
// cannot be read for want of a descriptor counts as alive).
func (w *Walker) WaitGone(ctx context.Context, hs []Handle, deadline time.Time) []Handle {
	efd := -1
	byCtx := false // no eventfd for ctx: look at it every 10 ms
	if ctx.Done() != nil {
		byCtx = true
		// An eventfd makes a cancelled ctx wake the poll at once.
		if fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err == nil {
			efd, byCtx = fd, false
			defer unix.Close(efd)
			stop := context.AfterFunc(ctx, func() { unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0}) })
			defer stop()
		}
	}
	alive := append([]Handle(nil), hs...)
	fds := make([]unix.PollFd, 0, len(alive)+1)
	timeout := 0 // the first pass only looks
	for {
		fds = fds[:0]
		byPid := false
		for _, h := range alive {
			if h.fd >= 0 {
				fds = append(fds, unix.PollFd{Fd: int32(h.fd), Events: unix.POLLIN})
			} else {
				byPid = true
			}
		}
		if efd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
		}
		if (byPid || byCtx) && timeout > 10 {
			timeout = 10
		}
		if _, err := unix.Poll(fds, timeout); err != nil && !errors.Is(err, unix.EINTR) {
			return alive
		}
		keep, i := alive[:0], 0
		for _, h := range alive {
			exited := false
			if h.fd >= 0 {
				exited = fds[i].Revents != 0
				i++
			} else {
				st, ok, starved := w.look(h.Pid)
				exited = !starved && (!ok || st.Start != h.Start || st.Dead())
			}
			if !exited {
				keep = append(keep, h)
			}
		}
		alive = keep
		left := time.Until(deadline)
		if len(alive) == 0 || left <= 0 || ctx.Err() != nil {
			return alive
		}
		timeout = int((left + time.Millisecond - 1) / time.Millisecond)
	}
}
