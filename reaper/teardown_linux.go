package reaper

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

// scope is what a teardown ends: a slice (nil in process containment), processes known to belong
// (pid -> start time), the tasks whose process groups are signalled as a whole, and the environment
// marker its processes inherit.
type scope struct {
	slice  *cgroup.Slice
	seeds  map[int]uint64
	groups []*task // tasks whose process groups get each signal first
	marker string
}

// maxWalkPasses bounds the repeated /proc walk; each pass after the first only finds processes forked
// by survivors while the previous one ran, and a fork bomb outside any slice must not hold us forever.
const maxWalkPasses = 16

// terminate ends every process of sc:
//
//  1. A first walk of /proc, while the process tree is intact, finds processes outside the slice
//     that descend from the scope's processes (by parent pid); without a slice, also those that
//     carry the marker.
//  2. The tasks' process groups get SIGTERM and SIGCONT, then each process found; the slice gets its
//     own polite phase, grace period and cgroup.kill (cgroup.Slice.Kill); whatever outside is
//     still alive after the grace period gets SIGKILL.
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

	// The threads listed in the slice now are the scope's, without a start time to check: they seed
	// the first walk only; after the kill they are dead and their ids may be reused by anyone.
	// Threads, not processes: a child belongs to the thread that forked it, so the walk reads each
	// thread's children; and a process's pid is its main thread's id.
	known := make(map[int]bool)
	seeds := maps.Clone(sc.seeds)
	if seeds == nil {
		seeds = make(map[int]uint64)
	}
	if sc.slice != nil {
		pids, err := sc.slice.Threads()
		if err != nil {
			errs = append(errs, err)
		}
		for _, p := range pids {
			known[p] = true
		}
	}
	// With a slice, this first walk looks for what left it by parent pid only; processes that
	// carry the marker outside the slice are found by the walks after the kill.
	skip := r.kids.registered()
	marker := sc.marker
	if sc.slice != nil {
		marker = ""
	}
	found, err := w.findScope(r.self, seeds, known, known, skip, marker)
	if err != nil {
		errs = append(errs, fmt.Errorf("walk /proc: %w", err))
	}
	hs := w.verify(found)
	defer func() { closeAll(hs) }()
	graceEnd := start.Add(grace)
	termGroups := func() {
		for _, t := range sc.groups {
			t.signalGroup(unix.SIGTERM, unix.SIGCONT)
		}
	}
	if grace > 0 {
		if sc.slice == nil {
			termGroups()
		}
		signalAll(hs, unix.SIGTERM, unix.SIGCONT)
	}

	if sc.slice != nil {
		crep, err := sc.slice.Kill(ctx, cgroup.KillOptions{Grace: grace, Timeout: timeout, BeforeTerm: termGroups})
		rep.Terminated, rep.Killed, rep.Remaining = crep.Terminated, crep.Killed, crep.Remaining
		if err != nil && !errors.Is(err, cgroup.ErrNotEmpty) {
			errs = append(errs, err)
		}
	}

	alive := w.waitGone(ctx, hs, graceEnd)
	rep.Terminated += len(hs) - len(alive)

	// From here on only processes identified by start time seed the walks.
	handled := make(map[int]bool, len(hs))
	seeds = make(map[int]uint64, len(sc.seeds)+len(hs))
	for pid, st := range sc.seeds {
		seeds[pid] = st
	}
	for _, h := range hs {
		handled[h.pid] = true
		seeds[h.pid] = h.start
	}
	if len(alive) > 0 {
		for _, t := range sc.groups {
			t.signalGroup(unix.SIGKILL)
		}
	}
	pending := alive
	for pass := 0; pass < maxWalkPasses; pass++ {
		signalAll(pending, unix.SIGKILL)
		rep.Killed += len(pending)
		more, err := w.findScope(r.self, seeds, nil, handled, skip, sc.marker)
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
