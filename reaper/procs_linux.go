package reaper

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// handle is a process found by a walk and verified: fd is a pidfd opened after the walk and checked
// against the start time the walk saw, so signals sent through it can never reach a process that
// reused the pid. fd is -1 where the kernel has no pidfds; then signals go by pid after the same check.
type handle struct {
	procStat
	fd int
}

// verify opens a pidfd for each process and keeps those that are still the process the walk saw.
func (w *walker) verify(ps []procStat) []handle {
	out := make([]handle, 0, len(ps))
	for _, p := range ps {
		fd, err := unix.PidfdOpen(p.pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			fd = -1
		}
		if now, ok := w.stat(p.pid); !ok || now.start != p.start {
			if fd >= 0 {
				unix.Close(fd)
			}
			continue
		}
		out = append(out, handle{procStat: p, fd: fd})
	}
	return out
}

func (h handle) signal(sig unix.Signal) {
	if h.fd >= 0 {
		unix.PidfdSendSignal(h.fd, sig, nil, 0)
		return
	}
	unix.Kill(h.pid, sig)
}

func signalAll(hs []handle, sigs ...unix.Signal) {
	for _, h := range hs {
		for _, sig := range sigs {
			h.signal(sig)
		}
	}
}

func closeAll(hs []handle) {
	for _, h := range hs {
		if h.fd >= 0 {
			unix.Close(h.fd)
		}
	}
}

// waitGone waits until every process in hs has exited (a zombie has), the deadline passes or ctx is
// done, and returns those still alive. It sleeps in poll(2) on the pidfds, which become readable when
// their process exits; processes without a pidfd are re-checked in /proc every 10 ms.
func (w *walker) waitGone(ctx context.Context, hs []handle, deadline time.Time) []handle {
	efd := -1
	if ctx.Done() != nil {
		if fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err == nil {
			efd = fd
			defer unix.Close(efd)
			stop := context.AfterFunc(ctx, func() { unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0}) })
			defer stop()
		}
	}
	alive := append([]handle(nil), hs...)
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
		if byPid && timeout > 10 {
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
				st, ok := w.stat(h.pid)
				exited = !ok || st.start != h.start || st.state == 'Z'
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
