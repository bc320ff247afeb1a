package cgroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Kill writes "1" to the slice's cgroup.kill: the kernel sends SIGKILL to every process in the slice
// and its descendants, including children forked while the kill runs (Linux 5.14 and later). It
// returns before the processes are gone; [Slice.WaitEmpty] waits for that. A slice that no longer
// exists has nothing to kill. Where the kernel offers no cgroup.kill, or refuses it for this cgroup (a
// threaded one answers EOPNOTSUPP), the error wraps [errors.ErrUnsupported] and the caller must signal
// the processes itself ([Slice.Freeze] first, where the freezer exists, so that none can fork).
func (s *Slice) Kill() error {
	err := writeFile(s.spare, s.path, "cgroup.kill", "1")
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOENT) && !exists(s.path):
		return nil // the slice is gone: nothing left to kill
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	return err
}

// Freeze writes "1" to the slice's cgroup.freeze (Linux 5.2 and later) and waits, until the deadline,
// for cgroup.events to read "frozen 1"; it reports whether that happened. A frozen process cannot fork
// and still dies of SIGKILL, so a slice frozen and then signalled process by process loses everything.
// A process in uninterruptible sleep (state D) may delay "frozen 1" indefinitely: the caller should not
// wait long, signals are queued either way. Without a freezer the error wraps [errors.ErrUnsupported].
func (s *Slice) Freeze(deadline time.Time) (bool, error) {
	if err := writeFile(s.spare, s.path, "cgroup.freeze", "1"); err != nil {
		if errors.Is(err, unix.ENOENT) && exists(s.path) {
			return false, fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
		}
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	return waitEvent(context.Background(), s.spare, s.path, "frozen", true, deadline)
}

// Thaw writes "0" to the slice's cgroup.freeze. A slice that no longer exists is not an error.
func (s *Slice) Thaw() error {
	if err := writeFile(s.spare, s.path, "cgroup.freeze", "0"); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// WaitEmpty blocks until no process is left in the slice or below it (cgroup.events reads "populated
// 0"), the deadline passes or ctx is done, and reports whether the slice emptied. A slice that no
// longer exists is empty. Zombies that wait to be reaped do not keep a slice populated.
func (s *Slice) WaitEmpty(ctx context.Context, deadline time.Time) (bool, error) {
	return waitEvent(ctx, s.spare, s.path, "populated", false, deadline)
}

// Populated reports whether any process lives in the slice or below it (cgroup.events "populated").
// A slice that no longer exists is not populated.
func (s *Slice) Populated() (bool, error) {
	return waitEvent(context.Background(), s.spare, s.path, "populated", true, time.Time{}) // one look
}
