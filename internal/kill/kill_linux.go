package kill

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// Policy kills slices and process trees: a Reaper's sessions and tasks (Terminate), the guard's
// cleanup after its server, and the sweep after dead instances (Slice, Descendants) share it.
// Its zero value kills with cgroup.kill, without a grace period, and waits DefaultTimeout.
type Policy struct {
	// Log receives failures to signal. Nil discards.
	Log *slog.Logger
	// Method is the strongest kill the kernel offers for slices (cgroup.Info.Kill); the zero value,
	// KillFile, falls back by itself where cgroup.kill turns out to be missing.
	Method cgroup.KillMethod
	// Grace is how long Terminate gives processes between SIGTERM and the hard kill; zero means
	// none (SIGKILL at once).
	Grace time.Duration
	// Timeout bounds each wait for killed processes to disappear; zero means DefaultTimeout.
	Timeout time.Duration
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

// HurryWait bounds what is left of every wait for killed processes to disappear once the teardown
// has been hurried (its ctx cancelled: a second shutdown signal, the guard's death): what has not
// died by then (in uninterruptible sleep) is reported, not waited for.
const HurryWait = time.Second

// DeathWait returns the context of a wait for killed processes to disappear: done HurryWait after
// ctx is. cancel releases it.
func DeathWait(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(HurryWait, cancel) })
	return wctx, func() {
		stop()
		cancel()
	}
}

// Slice kills every process in s with the strongest method the kernel offers and waits, until
// deadline or until ctx is done, for the slice to empty. It returns the pids still in it then.
//
// cgroup.kill reaches everything in one write, including what forks while it runs. Without it (a
// kernel before 5.14, or a threaded cgroup) the slice is frozen so that nothing can fork, every
// process is sent SIGKILL and the slice thawed; without a freezer too, SIGKILL sweeps re-read the
// slice until no new pid appears.
func (p Policy) Slice(ctx context.Context, s *cgroup.Slice, deadline time.Time) ([]int, error) {
	var errs []error
	method := p.Method
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
			errs = append(errs, p.Sweep(s, unix.SIGKILL, make(map[int]bool), time.Now().Add(sweepTime)), s.Thaw())
		}
	}
	if method == cgroup.KillSignal {
		errs = append(errs, p.Sweep(s, unix.SIGKILL, make(map[int]bool), time.Now().Add(sweepTime)))
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

// Sweep signals every process in s that is not yet in signalled, re-reading the slice until a pass
// finds no new pid or the deadline passes, and records what it signalled. After SIGTERM it also sends
// SIGCONT, so that stopped processes can act on the SIGTERM. Each pid is pinned with a pidfd before the
// slice is read again: a pid still listed then is the process the pidfd refers to, never a recycled
// one. Failures to signal are logged.
func (p Policy) Sweep(s *cgroup.Slice, sig unix.Signal, signalled map[int]bool, deadline time.Time) error {
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
				p.log().Warn("signal failed", "cgroup", s.Path(), "error", err)
			}
		}
		proc.CloseAll(hs)
		if time.Now().After(deadline) {
			return nil
		}
	}
}

// Descendants kills every live descendant of self (the processes a subreaper was left with), and
// repeats until a pass finds nothing, for what forks while a pass runs; each pass waits for what it
// killed until the Timeout passes or ctx is done. It returns what it killed. When self is this
// process and it has no child, not even a zombie, it has no descendant either: one waitid says so,
// without reading /proc (each thread's children file), at every guard's and server's exit.
func (p Policy) Descendants(ctx context.Context, self int) []proc.Proc {
	if reap.Childless(self) {
		return nil
	}
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
			p.log().Warn("signal failed", "scope", "descendants", "error", err)
		}
		w.WaitGone(ctx, hs, time.Now().Add(p.timeout()))
		proc.CloseAll(hs)
	}
	return killed
}
