package kill

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/spare"
	"golang.org/x/sys/unix"
)

// Policy kills slices and process trees (see the package doc). Its zero value kills with
// cgroup.kill, without a grace period, waits DefaultTimeout and has no descriptors in reserve.
type Policy struct {
	// Log receives failures to signal and the escapees killed. Nil discards.
	Log *slog.Logger
	// Method is the strongest kill the kernel offers for slices (cgroup.Info.Kill); the zero value,
	// KillFile, falls back by itself where cgroup.kill turns out to be missing.
	Method cgroup.KillMethod
	// Grace is how long Terminate gives processes between SIGTERM and the hard kill; zero means
	// none (SIGKILL at once).
	Grace time.Duration
	// Timeout bounds each wait for killed processes to disappear; zero means DefaultTimeout.
	Timeout time.Duration
	// Spare lends descriptors to the kills' reads of cgroupfs and /proc, pidfds and waits where the
	// descriptor limit refuses one (see package spare); nil lends none. What a refusal still
	// fails is tried again until the deadline.
	Spare *spare.Reserve
}

// DefaultTimeout is the wait for killed processes to disappear when Policy.Timeout is zero.
const DefaultTimeout = 10 * time.Second

func (p Policy) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

func (p Policy) timeout() time.Duration {
	if p.Timeout <= 0 {
		return DefaultTimeout
	}
	return p.Timeout
}

func (p Policy) walker() *proc.Walker { return proc.NewWalker().Spare(p.Spare) }

// HurryWait bounds what is left of every wait for killed processes to disappear once a kill has been
// hurried (see clock): what has not died by then (in uninterruptible sleep) is reported, not waited
// for.
const HurryWait = time.Second

// retryPause is how long a kill waits before it tries again what failed (a read of cgroupfs or /proc
// that the descriptor limit refused, say).
const retryPause = 10 * time.Millisecond

// retryable reports whether err is a failure that may pass: the descriptor limit refused a descriptor
// (EMFILE, ENFILE; proc.ErrStarved), or memory was short for a moment.
func retryable(err error) bool {
	return err != nil && (spare.Limited(err) || errors.Is(err, proc.ErrStarved) || errors.Is(err, unix.ENOMEM) ||
		errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR))
}

// clock is the one deadline and the one hurry signal of a call into the package: every kill and every
// wait of it take their time from it. The deadline (end) is when every wait for killed processes
// ends; what is alive then is reported as remaining. The hurry signal is the caller's context: once
// it is done (a second shutdown signal, the guard's death), a grace period ends at once, and every
// wait ends HurryWait later at most. wait is the context of the waits: done at end, or HurryWait after
// the hurry.
type clock struct {
	end   time.Time
	hurry context.Context
	wait  context.Context
	stop  func()
}

// newClock returns the clock of a call hurried by ctx, whose waits end at end.
func newClock(ctx context.Context, end time.Time) *clock {
	wait, cancel := context.WithDeadline(context.Background(), end)
	stopHurry := context.AfterFunc(ctx, func() { time.AfterFunc(HurryWait, cancel) })
	return &clock{end: end, hurry: ctx, wait: wait, stop: func() {
		stopHurry()
		cancel()
	}}
}

// over reports whether the waits are over: the deadline has passed, or the hurry's HurryWait.
func (c *clock) over() bool { return c.wait.Err() != nil }

// pause waits retryPause before a retry, and reports false (at once) when the waits are over.
func (c *clock) pause() bool {
	t := time.NewTimer(retryPause)
	defer t.Stop()
	select {
	case <-t.C:
		return !c.over()
	case <-c.wait.Done():
		return false
	}
}

// retry runs f until it does not fail, fails for good (see retryable) or the waits are over, and
// returns its last error.
func (c *clock) retry(f func() error) error {
	for {
		if err := f(); !retryable(err) || !c.pause() {
			return err
		}
	}
}

// Slice kills every process in s with the strongest method the kernel offers and waits, until
// deadline or HurryWait after ctx is done, for the slice to empty. It returns the pids still in it
// then; where they could not be listed, the error says so.
//
// cgroup.kill reaches everything in one write, including what forks while it runs. Without it (a
// kernel before 5.14, or a threaded cgroup) the slice is frozen so that nothing can fork, every
// process is sent SIGKILL and the slice thawed; without a freezer too, SIGKILL sweeps re-read the
// slice until no new pid appears. What fails (the descriptor limit refusing a read or a write) is
// tried again until the deadline.
func (p Policy) Slice(ctx context.Context, s *cgroup.Slice, deadline time.Time) ([]int, error) {
	c := newClock(ctx, deadline)
	defer c.stop()
	return p.slice(c, s.Spare(p.Spare))
}

// slice is Slice on c's time.
func (p Policy) slice(c *clock, s *cgroup.Slice) ([]int, error) {
	err := c.retry(func() error { return p.hardKill(s) })
	var empty bool
	err = errors.Join(err, c.retry(func() (werr error) {
		empty, werr = s.WaitEmpty(c.wait, c.end)
		return werr
	}))
	if empty {
		return nil, err
	}
	left, lerr := s.Pids()
	return left, errors.Join(err, lerr)
}

// hardKill sends SIGKILL to every process in s, by the strongest method the kernel offers.
func (p Policy) hardKill(s *cgroup.Slice) error {
	if p.Method == cgroup.KillFile {
		if err := s.Kill(); !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	var errs []error
	frozen := false
	if p.Method != cgroup.KillSignal {
		// Frozen processes cannot fork, so one sweep finds them all. A process in D state may delay
		// "frozen 1"; do not wait long for it, the SIGKILLs are queued either way.
		_, err := s.Freeze(time.Now().Add(time.Second))
		if frozen = err == nil; !errors.Is(err, errors.ErrUnsupported) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, p.sweep(s, unix.SIGKILL, make(map[int]bool), time.Now().Add(sweepTime)))
	if frozen {
		errs = append(errs, s.Thaw())
	}
	return errors.Join(errs...)
}

// sweepTime bounds a signal sweep over a slice that keeps forking.
const sweepTime = 5 * time.Second

// sweep signals every process in s that is not yet in signalled, re-reading the slice until a pass
// finds no new pid or the deadline passes, and records what it signalled. After SIGTERM it also sends
// SIGCONT, so that stopped processes can act on the SIGTERM. Each pid is pinned with a pidfd before
// the slice is read again: a pid still listed then is the process the pidfd refers to, never a
// recycled one. A pid no pidfd could be opened for is left for the next pass. Failures to signal are
// logged.
func (p Policy) sweep(s *cgroup.Slice, sig unix.Signal, signalled map[int]bool, deadline time.Time) error {
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
		hs, unpinned := proc.Open(fresh, p.Spare)
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
				p.log().Warn("signal failed", "cgroup", s.Path(), "error", err)
			}
		}
		proc.CloseAll(hs)
		if time.Now().After(deadline) {
			return nil
		}
		if len(unpinned) > 0 && len(hs) == 0 {
			time.Sleep(retryPause) // nothing could be pinned: let descriptors free before the next pass
		}
	}
}
