package reaper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"golang.org/x/sys/unix"
)

// KillReport says what a teardown (Session.Close, a task stop or timeout) did.
type KillReport struct {
	// Terminated counts processes that exited after SIGTERM, within the grace period.
	Terminated int
	// Killed counts processes ended by the hard kill (cgroup.kill or SIGKILL).
	Killed int
	// Found counts processes outside the slice that the /proc walk attributed to the scope (by parent
	// pid or environment marker); they are included in Terminated and Killed. In process
	// containment every process is found this way.
	Found int
	// Remaining lists processes still alive when the deadline passed (typically in D state).
	Remaining []cgroup.Proc
	// Duration is the time the teardown took.
	Duration time.Duration
}

// Total is the number of processes the teardown ended.
func (r KillReport) Total() int { return r.Terminated + r.Killed }

func (r KillReport) String() string {
	s := fmt.Sprintf("%d processes ended (%d by SIGTERM, %d killed; %d found by the /proc walk) in %v",
		r.Total(), r.Terminated, r.Killed, r.Found, r.Duration.Round(time.Microsecond))
	if len(r.Remaining) > 0 {
		s += fmt.Sprintf(", %d remain: %v", len(r.Remaining), r.Remaining)
	}
	return s
}

func (r *KillReport) add(o KillReport) {
	r.Terminated += o.Terminated
	r.Killed += o.Killed
	r.Found += o.Found
	r.Remaining = append(r.Remaining, o.Remaining...)
}

// scope is what a teardown ends: a slice (nil in process containment), processes known to belong
// (pid -> start time), and the environment marker its processes inherit.
type scope struct {
	slice  *cgroup.Slice
	seeds  map[int]uint64
	marker string
}

// maxWalkPasses bounds the repeated /proc walk; each pass after the first only finds processes forked
// by survivors while the previous one ran, and a fork bomb outside any slice must not hold us forever.
const maxWalkPasses = 16

// terminate ends every process of sc:
//
//  1. A first walk of /proc, while the process tree is intact, finds processes outside the slice
//     (descendants of the scope's processes by parent pid, and those with the marker).
//  2. They get SIGTERM and SIGCONT, and the slice gets its own polite phase, grace period and
//     cgroup.kill (cgroup.Slice.Kill); then whatever outside is still alive after the grace period
//     gets SIGKILL.
//  3. Walks repeat, killing what they find, until a pass finds nothing new.
//  4. A bounded wait for the killed processes to exit; what is left is reported.
//
// Cancelling ctx cuts the grace period short; the hard kill always runs.
func (r *Reaper) terminate(ctx context.Context, sc scope) (KillReport, error) {
	start := time.Now()
	grace, timeout := r.opts.Grace, r.opts.CloseTimeout
	w := newWalker()
	var rep KillReport
	var errs []error

	known := make(map[int]bool)
	seeds := make(map[int]uint64, len(sc.seeds))
	for pid, st := range sc.seeds {
		seeds[pid] = st
	}
	if sc.slice != nil {
		pids, err := sc.slice.Pids()
		if err != nil {
			errs = append(errs, err)
		}
		for _, p := range pids {
			known[p] = true
			if _, ok := seeds[p]; !ok {
				seeds[p] = 0 // listed in the slice just now: no start time needed
			}
		}
	}
	found, err := w.find(r.self, seeds, known, sc.marker)
	if err != nil {
		errs = append(errs, fmt.Errorf("walk /proc: %w", err))
	}
	hs := w.verify(found)
	defer func() { closeAll(hs) }()
	graceEnd := start.Add(grace)
	if grace > 0 {
		signalAll(hs, unix.SIGTERM, unix.SIGCONT)
	}

	if sc.slice != nil {
		crep, err := sc.slice.Kill(ctx, cgroup.KillOptions{Grace: grace, Timeout: timeout})
		rep.Terminated, rep.Killed, rep.Remaining = crep.Terminated, crep.Killed, crep.Remaining
		if err != nil && !errors.Is(err, cgroup.ErrNotEmpty) {
			errs = append(errs, err)
		}
	}

	alive := w.waitGone(ctx, hs, graceEnd)
	rep.Terminated += len(hs) - len(alive)

	// From here on pids listed in the slice are dead and may be reused by anyone: only processes
	// identified by start time seed the walks.
	handled := make(map[int]bool, len(hs))
	seeds = make(map[int]uint64, len(sc.seeds)+len(hs))
	for pid, st := range sc.seeds {
		seeds[pid] = st
	}
	for _, h := range hs {
		handled[h.pid] = true
		seeds[h.pid] = h.start
	}
	pending := alive
	for pass := 0; pass < maxWalkPasses; pass++ {
		signalAll(pending, unix.SIGKILL)
		rep.Killed += len(pending)
		more, err := w.find(r.self, seeds, handled, sc.marker)
		if err != nil {
			errs = append(errs, fmt.Errorf("walk /proc: %w", err))
			break
		}
		if pending = w.verify(more); len(pending) == 0 {
			break
		}
		hs = append(hs, pending...)
		alive = append(alive, pending...)
		for _, h := range pending {
			handled[h.pid] = true
			seeds[h.pid] = h.start
		}
	}
	rep.Found = len(hs)
	alive = w.waitGone(context.Background(), alive, time.Now().Add(timeout))
	for _, h := range alive {
		rep.Remaining = append(rep.Remaining, cgroup.Describe(h.pid))
	}
	rep.Duration = time.Since(start)
	if len(rep.Remaining) > 0 {
		errs = append(errs, fmt.Errorf("%d processes remain after %v: %v", len(rep.Remaining), timeout, rep.Remaining))
	}
	return rep, errors.Join(errs...)
}
