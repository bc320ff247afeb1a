package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// waitEvent blocks until key ("populated", "frozen") in dir/cgroup.events reads want, the deadline
// passes or ctx is done. It reports whether the value was reached. It sleeps in poll(2) on the file,
// which the kernel wakes with POLLPRI whenever cgroup.events changes. The kernel rate-limits these
// notifications to one per 10 ms per file and defers the rest, while the file's content changes at
// once; so the poll also times out after at most 10 ms (1 ms at first) and the file is read again.
// A cgroup that disappears counts as not populated and not frozen.
func waitEvent(ctx context.Context, dir, key string, want bool, deadline time.Time) (bool, error) {
	file := filepath.Join(dir, "cgroup.events")
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		return !want, nil
	}
	if err != nil {
		return false, fmt.Errorf("cgroup: open %s: %w", file, err)
	}
	defer unix.Close(fd)

	// An eventfd makes a cancelled ctx wake the poll; it is only needed when ctx can be cancelled.
	efd := -1
	if ctx.Done() != nil {
		if efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
			return false, fmt.Errorf("cgroup: eventfd: %w", err)
		}
		defer unix.Close(efd)
		stop := context.AfterFunc(ctx, func() {
			unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		})
		defer stop()
	}

	buf := make([]byte, 128)
	recheck := time.Millisecond
	for {
		n, err := unix.Pread(fd, buf, 0)
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) {
			return !want, nil // the cgroup was removed under us
		}
		if err != nil {
			return false, fmt.Errorf("cgroup: read %s: %w", file, err)
		}
		if v, _ := eventValue(buf[:n], key); v == want {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		if efd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
		}
		// Round up so that a sub-millisecond remainder still waits rather than spinning.
		ms := int((min(left, recheck) + time.Millisecond - 1) / time.Millisecond)
		recheck = min(2*recheck, notifyInterval)
		if _, err := unix.Poll(fds, ms); err != nil && !errors.Is(err, unix.EINTR) {
			return false, fmt.Errorf("cgroup: poll %s: %w", file, err)
		}
	}
}

// notifyInterval is the kernel's minimum interval between two notifications of one cgroup file
// (CGROUP_FILE_NOTIFY_MIN_INTV, HZ/100).
const notifyInterval = 10 * time.Millisecond

// writeFile writes a value into a cgroup interface file, carrying the path in the error.
func writeFile(dir, name, value string) error {
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup: write %q to %s: %w", value, file, err)
	}
	return nil
}
