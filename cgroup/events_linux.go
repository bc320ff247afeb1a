package cgroup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// waitEvent blocks until key ("populated", "frozen") in dir/cgroup.events reads want, the deadline
// passes or ctx is done. It reports whether the value was reached. It sleeps in poll(2) on the file,
// which the kernel wakes with POLLPRI whenever cgroup.events changes. The kernel rate-limits these
// notifications to one per 10 ms per file and defers the rest, while the file's content changes at
// once; so the poll also times out after at most 10 ms (1 ms at first) and the file is read again,
// which is also how often ctx is looked at. A cgroup that disappears counts as not populated and not
// frozen.
func waitEvent(ctx context.Context, r Reserve, dir, key string, want bool, deadline time.Time) (bool, error) {
	file := filepath.Join(dir, "cgroup.events")
	fd, err := openFile(r, file, unix.O_RDONLY)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		return !want, nil
	}
	if err != nil {
		return false, fmt.Errorf("open %s: %w", file, err)
	}
	defer closeFile(r, fd)

	buf := make([]byte, 128)
	recheck := time.Millisecond
	for {
		n, err := unix.Pread(fd, buf, 0)
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) {
			return !want, nil // the cgroup was removed under us
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", file, err)
		}
		if v, _ := eventValue(buf[:n], key); v == want {
			return true, nil
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return false, nil
		}
		// Round up so that a sub-millisecond remainder still waits rather than spinning.
		ms := int((min(left, recheck) + time.Millisecond - 1) / time.Millisecond)
		recheck = min(2*recheck, notifyInterval)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, ms); err != nil && !errors.Is(err, unix.EINTR) {
			return false, fmt.Errorf("poll %s: %w", file, err)
		}
	}
}

// notifyInterval is the kernel's minimum interval between two notifications of one cgroup file
// (CGROUP_FILE_NOTIFY_MIN_INTV, HZ/100).
const notifyInterval = 10 * time.Millisecond

// eventValue returns the value of key ("populated", "frozen") in the contents of a cgroup.events file.
func eventValue(b []byte, key string) (value, found bool) {
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{' '})
		if ok && string(k) == key {
			return string(bytes.TrimSpace(v)) == "1", true
		}
	}
	return false, false
}
