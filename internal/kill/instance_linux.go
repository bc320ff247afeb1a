package kill

import (
	"context"
	"errors"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// Everything is what an instance leaves when it ends, or its guard when the server died: its slice,
// and the descendants of a subreaper.
type Everything struct {
	// Self is the subreaper whose descendants die; 0 means none.
	Self int
	// Slice, if set, is killed whole.
	Slice *cgroup.Slice
	// End is when the waits end; zero means the Timeout from now.
	End time.Time
}

// Everything kills the slice (see Slice) and every descendant of e.Self, waiting for them until
// e.End or HurryWait after ctx is done. It returns the descendants it killed, and the pids still in
// the slice then.
func (p Policy) Everything(ctx context.Context, e Everything) (killed []proc.Proc, left []int, err error) {
	if e.End.IsZero() {
		e.End = time.Now().Add(p.timeout())
	}
	c := newClock(ctx, e.End)
	defer c.stop()
	if e.Slice != nil {
		left, err = p.slice(c, e.Slice.Spare(p.Spare))
	}
	if e.Self > 0 {
		killed = p.descendants(c, e.Self)
	}
	return killed, left, err
}

// descendants kills every live descendant of self (the processes a subreaper was left with), and
// repeats until a pass finds nothing, for what forks while a pass runs; each pass waits for what it
// killed. It returns what it killed. When self is this process and it has no child, not even a
// zombie, it has no descendant either: one waitid says so, without reading /proc (each thread's
// children file), at every guard's and server's exit.
func (p Policy) descendants(c *clock, self int) []proc.Proc {
	if reap.Childless(self) {
		return nil
	}
	w := p.walker()
	var killed []proc.Proc
	for pass := 0; pass < maxWalkPasses; pass++ {
		left, err := w.Descendants(self)
		if err == nil {
			err = w.Starved()
		}
		if err != nil {
			if retryable(err) && c.pause() {
				pass--
				continue
			}
			p.log().Warn("walk failed", "scope", "descendants", "error", err)
		}
		if len(left) == 0 {
			break
		}
		ks, _, err := killAll(c, w, w.Verify(left))
		killed = append(killed, ks...)
		if err != nil {
			p.log().Warn("signal failed", "scope", "descendants", "error", err)
		}
	}
	return killed
}

// Processes kills the processes a walk found (each checked by its start time before it is
// signalled), and waits for them until deadline or HurryWait after ctx is done. It returns those it
// killed, and those still alive then.
func (p Policy) Processes(ctx context.Context, ps []proc.Stat, deadline time.Time) (killed, left []proc.Proc, err error) {
	c := newClock(ctx, deadline)
	defer c.stop()
	w := p.walker()
	killed, left, err = killAll(c, w, w.Verify(ps))
	if len(left) > 0 {
		err = errors.Join(err, errors.New("processes outlived SIGKILL"))
	}
	return killed, left, err
}

// killAll sends SIGKILL to hs and waits for them on c's time, and closes them. It returns them
// described, those still alive then, and the failures to signal.
func killAll(c *clock, w *proc.Walker, hs []proc.Handle) (killed, left []proc.Proc, err error) {
	defer proc.CloseAll(hs)
	killed = describe(hs)
	err = proc.SignalAll(hs, unix.SIGKILL)
	return killed, describe(w.WaitGone(c.wait, hs, c.end)), err
}

// describe describes each of hs (nil for none).
func describe(hs []proc.Handle) []proc.Proc {
	var out []proc.Proc
	for _, h := range hs {
		out = append(out, proc.Describe(h.Pid))
	}
	return out
}
