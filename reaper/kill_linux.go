package reaper

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"golang.org/x/sys/unix"
)

// killer kills slices and process trees; the Reaper and the guard share it.
type killer struct {
	log *slog.Logger
	// method is the strongest kill the kernel offers for slices; KillFile falls back by itself where
	// cgroup.kill turns out to be missing.
	method cgroup.KillMethod
	// timeout bounds each wait for killed processes to disappear.
	timeout time.Duration
}

// hurryWait bounds what is left of every wait for killed processes to disappear once the teardown
// has been hurried (its ctx cancelled: a second shutdown signal, the guard's death): what has not
// died by then (in uninterruptible sleep) is reported, not waited for.
const hurryWait = time.Second

// deathWait returns the context of a wait for killed processes to disappear: done hurryWait after
// ctx is. cancel releases it.
func deathWait(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(hurryWait, cancel) })
	return wctx, func() {
		stop()
		cancel()
	}
}

// slice kills every process in s with the strongest method the kernel offers and waits, until
// deadline or until ctx is done, for the slice to empty. It returns the pids still in it then.
//
// cgroup.kill reaches everything in one write, including what forks while it runs. Without it (a
// kernel before 5.14, or a threaded cgroup) the slice is frozen so that nothing can fork, every
// process is sent SIGKILL and the slice thawed; without a freezer too, SIGKILL sweeps re-read the
// slice until no new pid appears.
func (k killer) slice(ctx context.Context, s *cgroup.Slice, deadline time.Time) ([]int, error) {
	var errs []error
	method := k.method
	if method == cgroup.KillFile {
		err := s.Kill()
		if errors.Is(err, errors.ErrUnsupported) {
			method = cgroup.KillFreeze
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	if method == cgroup.KillFreeze {
		// Frozen processes cannot fork, so one sweep finds them all. A process in D state may delay
		// "frozen 1"; do not wait long for it, the SIGKILLs are queued either way.
		_, err := s.Freeze(time.Now().Add(time.Second))
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			method = cgroup.KillSignal
		case err != nil:
			errs = append(errs, err)
			method = cgroup.KillSignal
		default:
			errs = append(errs, k.sweep(s, unix.SIGKILL, make(map[int]bool), time.Now().Add(sweepTime)), s.Thaw())
		}
	}
	if method == cgroup.KillSignal {
		errs = append(errs, k.sweep(s, unix.SIGKILL, make(map[int]bool), time.Now().Add(sweepTime)))
	}
	empty, err := s.WaitEmpty(ctx, deadline)
	if err != nil {
		errs = append(errs, err)
	}
	var left []int
	if !empty {
		left, _ = s.Pids()
	}
	return left, errors.Join(errs...)
}

// sweep signals every process in s that is not yet in signalled, re-reading the slice until a pass
// finds no new pid or the deadline passes, and records what it signalled. After SIGTERM it also sends
// SIGCONT, so that stopped processes can act on the SIGTERM. Each pid is pinned with a pidfd before the
// slice is read again: a pid still listed then is the process the pidfd refers to, never a recycled
// one. Failures to signal are logged.
func (k killer) sweep(s *cgroup.Slice, sig unix.Signal, signalled map[int]bool, deadline time.Time) error {
	for {
		pids, err := s.Pids()
		if err != nil {
			return err
		}
		fresh := pids[:0]
		for _, p := range pids {
			if !signalled[p] {
				fresh = append(fresh, p)
			}
		}
		if len(fresh) == 0 {
			return nil
		}
		hs := proc.Open(fresh)
		now, err := s.Pids()
		if err != nil {
			proc.CloseAll(hs)
			return err
		}
		member := make(map[int]bool, len(now))
		for _, p := range now {
			member[p] = true
		}
		for _, h := range hs {
			signalled[h.Pid] = true
			if !member[h.Pid] {
				continue
			}
			err := h.Signal(sig)
			if err == nil && sig == unix.SIGTERM {
				err = h.Signal(unix.SIGCONT)
			}
			if err != nil {
				k.log.Warn("signal failed", "cgroup", s.Path(), "error", err)
			}
		}
		proc.CloseAll(hs)
		if time.Now().After(deadline) {
			return nil
		}
	}
}

// descendants kills every live descendant of self (the processes a subreaper was left with), and
// repeats until a pass finds nothing, for what forks while a pass runs; each pass waits for what it
// killed until k.timeout passes or ctx is done. It returns what it killed.
func (k killer) descendants(ctx context.Context, self int) []proc.Proc {
	w := proc.NewWalker()
	var killed []proc.Proc
	for pass := 0; pass < maxWalkPasses; pass++ {
		left, err := w.Descendants(self)
		if err != nil || len(left) == 0 {
			break
		}
		hs := w.Verify(left)
		for _, h := range hs {
			killed = append(killed, proc.Describe(h.Pid))
		}
		if err := proc.SignalAll(hs, unix.SIGKILL); err != nil {
			k.log.Warn("signal failed", "scope", "descendants", "error", err)
		}
		w.WaitGone(ctx, hs, time.Now().Add(k.timeout))
		proc.CloseAll(hs)
	}
	return killed
}
