package cgroup

import (
	"errors"

	"golang.org/x/sys/unix"
)

// pidHandle is a pid and, where the kernel offers pidfds, a descriptor that pins the process.
type pidHandle struct {
	pid int
	fd  int // -1 without a pidfd
}

// openPidfds opens a pidfd for each pid; pids that are already gone are dropped. Where pidfd_open is
// unavailable (ENOSYS before Linux 5.3, or filtered by seccomp) the handle carries no fd and the
// signal goes by pid.
func openPidfds(pids []int) []pidHandle {
	out := make([]pidHandle, 0, len(pids))
	for _, p := range pids {
		fd, err := unix.PidfdOpen(p, 0)
		switch {
		case err == nil:
			out = append(out, pidHandle{pid: p, fd: fd})
		case errors.Is(err, unix.ESRCH):
			// Exited between the listing and now: nothing to signal.
		default:
			out = append(out, pidHandle{pid: p, fd: -1})
		}
	}
	return out
}

// signal sends sig; a process that has exited meanwhile (ESRCH) is not an error.
func (h pidHandle) signal(sig unix.Signal) {
	if h.fd >= 0 {
		unix.PidfdSendSignal(h.fd, sig, nil, 0)
		return
	}
	unix.Kill(h.pid, sig)
}

func closeHandles(hs []pidHandle) {
	for _, h := range hs {
		if h.fd >= 0 {
			unix.Close(h.fd)
		}
	}
}
