package kill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// Report says what a teardown (a session's end, a task stop or timeout) did.
type Report struct {
	// Terminated counts processes that exited after SIGTERM, within the grace period.
	Terminated int
	// Killed counts processes ended by the hard kill (cgroup.kill or SIGKILL).
	Killed int
	// Walked counts, of Killed, the processes outside the slice that got SIGKILL once a walk of
	// /proc had found them; the others were killed with the slice. In process containment every
	// hard-killed process is counted here.
	Walked int
	// Found counts processes outside the slice that the /proc walk attributed to the scope (by parent
	// pid or environment marker); they are included in Terminated and Killed. In process
	// containment every process is found this way.
	Found int
	// Remaining lists processes still alive when the deadline passed (typically in D state).
	Remaining []proc.Proc
	// Duration is the time the teardown took.
	Duration time.Duration
}

// Total is the number of processes the teardown ended.
func (r Report) Total() int { return r.Terminated + r.Killed }

func (r Report) String() string {
	s := fmt.Sprintf("%d processes ended (%d by SIGTERM, %d killed; %d found by the /proc walk) in %v",
		r.Total(), r.Terminated, r.Killed, r.Found, r.Duration.Round(time.Microsecond))
	if len(r.Remaining) > 0 {
		s += fmt.Sprintf(", %d remain: %v", len(r.Remaining), r.Remaining)
	}
	return s
}

// Scope is what a teardown ends: a slice (nil in process containment), processes known to belong
// (pid -> start time), the process groups signalled as a whole, and the environment marker its
// processes inherit.
type Scope struct {
	Name  string // "session S" or "session S: task T", for the log
	Slice *cgroup.Slice
	Seeds map[int]uint64
	// Groups signal the tasks' process groups as a whole.
	Groups []SignalGroup
	Marker string
	// End, if set, is when every wait for killed processes ends (a session's teardown sets it to
	// its start plus the grace period and the Timeout); zero means the Timeout after the hard kill
	// begins.
	End time.Time
	// Self is the process the walks look below (the Reaper, or the session's init), and Skip the
	// task processes below it that are other scopes' (see proc.Query).
	Self int
	Skip map[int]bool
	// Known are processes the walks go through but never report or signal: the session's init.
	Known map[int]bool
	// Inits, for a session, are the inits of its PID namespaces: the hard kill kills them too, and
	// once they have ended nothing of their namespaces is left.
	Inits []*pidns.Init
	// Namespaced says that every process of the scope was born in the namespaces of Inits, whose last
	// init is Self. No process leaves its PID namespace, so with a slice there is nothing to find
	// before the kill: the polite phase has the inits signal their namespaces, and the walk, which
	// only counts and waits for what left the slice, comes once the slice is empty, when it is short.
	Namespaced bool
	// Adopted, if set, returns the children of Self that it adopted (their parents died) and that sit
	// outside every slice of the caller's, with their start times. Where Self is the child subreaper
	// that every process of the scope descends from, a process that left the slice becomes one of
	// them once its parent has died; with those as seeds, a walk once the slice is empty finds all
	// that left it, so with a slice the walk of phase 1 is deferred as in a Namespaced scope. They may
	// include another scope's escapees, orphaned as this teardown ran: the caller kills those anyway.
	Adopted func() map[int]uint64
}

// SignalGroup sends each of sigs in turn to a task's process group, which holds most of its
// processes (all but those that called setsid); it does nothing once the group can no longer be told
// apart from a reused one. A failure is logged: the walks and the hard kill make up for it.
type SignalGroup func(sigs ...unix.Signal) error

// maxWalkPasses bounds the repeated /proc walk; each pass after the first only finds processes forked
// by survivors while the previous one ran, and a fork bomb outside any slice must not hold us forever.
const maxWalkPasses = 16

// sweepTime bounds a signal sweep over a slice that keeps forking.
const sweepTime = 5 * time.Second

// Terminate ends every process of sc. It is the program's kill policy, in phases:
//
//  1. A first walk of /proc, while the process tree is intact, finds processes outside the slice that
//     descend from the scope's processes (by parent pid); without a slice, also those that carry the
//     marker. In a scope with a slice that is Namespaced or has Adopted it comes later: see below.
//  2. Polite, if there is a grace period: SIGTERM and SIGCONT to the tasks' process groups, then to
//     every process of the slice (re-read until no new pid appears) and every process found outside;
//     then up to the grace period for all of them to exit. Cancelling ctx cuts the wait short.
//  3. Hard: the slice's kill (cgroup.kill; the freezer and SIGKILL; SIGKILL sweeps), and a bounded
//     wait for the slice to empty. Then SIGKILL to the inits of the session's PID namespaces, and a
//     bounded wait for each to end: the kernel kills every process of a namespace whose init dies, and
//     an init ends only once they all have (a process in D state delays it).
//  4. SIGKILL to what is still alive outside the slice, and walks of /proc that kill what they find
//     (also by marker), repeated until a pass finds nothing new; each pass waits for the processes
//     the previous one killed to exit, so that nothing they forked as they died is missed. Once the
//     inits have ended there is nothing left to walk for: no process leaves its PID namespace.
//  5. A bounded wait for those processes to exit; what is left is reported.
//
// A scope whose walks look below this process, which has no child, and whose slice is not populated
// has no process left: Terminate returns at once with an empty report (see nothingLeft).
//
// Phases 3 to 5 share one deadline (sc.End, or the Timeout from the hard kill), and once ctx is
// done they wait at most HurryWait more: what survives SIGKILL (uninterruptible sleep) is reported,
// not waited for. The error says what failed, not in which scope: the caller, who knows, says that.
//
// In a scope with a slice that is Namespaced or has Adopted, the walk of phase 1 comes in phase 2,
// once the slice is empty or half the grace period has passed, and is short then: a walk before the
// kill costs every process of the slice an entry made in /proc (and removed again at its exit), a
// tenth of the time the kernel takes to kill a thousand processes. It starts below the init (a seed:
// everything below it is the scope's), or from the processes Adopted names: a process that left the
// slice is a child of Self by then, unless its parent still lives (outside the slice: below another
// seed; inside: the slice held out, and its threads seed the walk). What it finds gets its SIGTERM
// then, and each init signals its whole namespace too, for a process the walk missed (re-parented to
// the init as it ran); they have the rest of the grace period. Without a namespace, a process whose
// parent was the last of the slice to exit can be missed the same way (the kernel takes a process
// out of its cgroup just before it hands its children to the subreaper): phase 4 finds it by its
// marker, or the caller's check for escapees, with SIGKILL. Without a grace period the walk comes
// after the slice's kill.
func (p Policy) Terminate(ctx context.Context, sc Scope) (Report, error) {
	t := &teardown{
		p: p, log: p.log(), sc: sc, w: proc.NewWalker(), start: time.Now(), skip: sc.Skip,
		seen: make(map[int]bool), termed: make(map[int]bool),
	}
	defer func() { proc.CloseAll(t.outside) }()
	if t.nothingLeft() {
		t.rep.Duration = time.Since(t.start)
		return t.rep, nil
	}
	var cancel context.CancelFunc
	t.wait, cancel = DeathWait(ctx)
	defer cancel()
	if !t.deferred() {
		t.findEscaped()
	}
	if p.Grace > 0 {
		t.polite(ctx)
	}
	if t.killEnd = sc.End; t.killEnd.IsZero() {
		t.killEnd = time.Now().Add(p.timeout())
	}
	t.killSlice()
	t.findEscaped() // a deferred walk, without a grace period
	t.killNamespaces()
	t.killEscaped()
	t.await()
	t.rep.Duration = time.Since(t.start)
	if len(t.errs) > 0 {
		return t.rep, errors.Join(t.errs...)
	}
	return t.rep, nil
}

// teardown is one run of Terminate.
type teardown struct {
	p     Policy
	log   *slog.Logger
	sc    Scope
	w     *proc.Walker
	start time.Time
	skip  map[int]bool // the Reaper's live task processes: other scopes' subtrees
	rep   Report
	errs  []error

	seen    map[int]bool    // processes seen in the slice
	termed  map[int]bool    // processes of the slice sent SIGTERM
	emptied bool            // the slice emptied within the grace period
	nsEnded bool            // the scope had inits, and they have all ended
	killEnd time.Time       // phases 3 to 5 together wait at most until then for what they killed
	wait    context.Context // done HurryWait after the teardown is hurried: the waits of phases 3 to 5 end
	found   bool            // the walk of phase 1 has run
	outside []proc.Handle   // processes found outside the slice, verified; closed at the end
	alive   []proc.Handle   // those not yet seen to exit
}

// nothingLeft reports whether the scope has no process left, read in two system calls where the
// phases would read the slice's files and this process's children several times over: the close of
// a session whose commands have all ended, the common case, would pay that at every close. It holds
// when the walks look below this process and it has no child, not even a zombie, and the slice (if
// any) is not populated. Every process of such a scope descends from this process (a task is its
// child, an orphan is re-parented to it, the subreaper, and a process group or session holds only
// descendants of whoever made it), so none lives outside the slice; and a process that someone else
// moved into the slice is there to be killed, so the slice is read too (second: where another scope
// has a process, the waitid alone says no). A scope with inits has them as children.
func (t *teardown) nothingLeft() bool {
	if len(t.sc.Inits) > 0 || !reap.Childless(t.sc.Self) {
		return false
	}
	if t.sc.Slice != nil {
		populated, err := t.sc.Slice.Populated()
		return err == nil && !populated
	}
	return true
}

// deferred reports whether the walk of phase 1 waits for the slice to empty (see Terminate).
func (t *teardown) deferred() bool {
	return t.sc.Slice != nil && (t.sc.Namespaced || t.sc.Adopted != nil)
}

// exited is what the walks use to pass over dead children of Self unread (proc.Query.Exited): only
// this process can ask the kernel about its own children.
func (t *teardown) exited() func(int) bool {
	if t.sc.Self == os.Getpid() {
		return reap.Exited
	}
	return nil
}

// findEscaped is phase 1; it runs once, and a later call does nothing. With a slice it looks for
// what left it by parent pid only, from the threads listed in the slice now (a child belongs to the
// thread that forked it); those threads are the scope's without a start time to check, so they seed
// this first walk only: after the kill they are dead and their ids may be reused by anyone. In a
// PID namespace the init is a seed: everything below it is the scope's; so is what Adopted names.
func (t *teardown) findEscaped() {
	if t.found {
		return
	}
	t.found = true
	seeds := t.sc.Seeds
	if t.sc.Adopted != nil {
		if adopted := t.sc.Adopted(); len(adopted) > 0 {
			seeds = maps.Clone(seeds)
			if seeds == nil {
				seeds = make(map[int]uint64, len(adopted))
			}
			maps.Copy(seeds, adopted)
		}
	}
	var trusted map[int]bool
	marker := t.sc.Marker
	if t.sc.Slice != nil {
		tids, err := t.sc.Slice.Threads()
		if err != nil {
			t.errs = append(t.errs, err)
		}
		trusted = make(map[int]bool, len(tids))
		for _, id := range tids {
			trusted[id] = true
		}
		marker = ""
	}
	known := maps.Clone(trusted)
	if known == nil {
		known = make(map[int]bool)
	}
	maps.Copy(known, t.sc.Known)
	found, err := t.w.Find(proc.Query{
		Self: t.sc.Self, Seeds: seeds, Trusted: trusted, Known: known, Skip: t.skip, Marker: marker, Exited: t.exited(),
	})
	if err != nil {
		t.errs = append(t.errs, fmt.Errorf("walk /proc: %w", err))
	}
	t.outside = t.w.Verify(found)
	t.alive = t.outside
}

// polite is phase 2.
func (t *teardown) polite(ctx context.Context) {
	graceEnd := t.start.Add(t.p.Grace)
	if t.sc.Slice != nil {
		// Listed before the group signals, which end most processes before the sweep can see them.
		t.note(t.sc.Slice.Pids())
	}
	for _, signalGroup := range t.sc.Groups {
		t.signalFailed(signalGroup(unix.SIGTERM, unix.SIGCONT))
	}
	if t.sc.Slice != nil {
		t.sweep(unix.SIGTERM, t.termed, graceEnd)
	}
	t.signalFailed(proc.SignalAll(t.outside, unix.SIGTERM, unix.SIGCONT))
	if t.sc.Slice != nil {
		until := graceEnd
		if !t.found {
			until = t.start.Add(t.p.Grace / 2)
		}
		t.waitEmpty(ctx, until)
	}
	if !t.found {
		// The deferred walk, short once the slice is empty: what left the slice lives on below the
		// init, or as an orphan Adopted names. Where the slice holds out, it comes after half the
		// grace period, and what it finds has the other half.
		t.findEscaped()
		t.signalFailed(proc.SignalAll(t.outside, unix.SIGTERM, unix.SIGCONT))
		// And what the walk missed: a process re-parented to the init as it ran (its parent ended
		// after the init's children were read).
		for _, in := range t.sc.Inits {
			if err := in.Signal(ctx, graceEnd, unix.SIGTERM, unix.SIGCONT); !errors.Is(err, pidns.ErrEnded) && !errors.Is(err, ctx.Err()) {
				t.signalFailed(err)
			}
		}
		if !t.emptied {
			t.waitEmpty(ctx, graceEnd)
		}
	}
	t.alive = t.w.WaitGone(ctx, t.outside, graceEnd)
	t.rep.Terminated += len(t.outside) - len(t.alive)
}

// waitEmpty waits until the slice is empty, until or ctx is done, and records whether it is.
func (t *teardown) waitEmpty(ctx context.Context, until time.Time) {
	empty, err := t.sc.Slice.WaitEmpty(ctx, until)
	if err != nil {
		t.errs = append(t.errs, err)
	}
	t.emptied = empty
}

// killSlice is phase 3. Processes of the slice seen before the hard kill but not at it count as
// ended by SIGTERM; those listed at it, as killed.
func (t *teardown) killSlice() {
	s := t.sc.Slice
	if s == nil {
		return
	}
	for p := range t.termed {
		t.seen[p] = true
	}
	if t.emptied {
		t.rep.Terminated += len(t.seen)
		return
	}
	before, err := s.Pids()
	t.note(before, err)
	t.rep.Killed += len(before)
	t.rep.Terminated += len(t.seen) - len(before)
	if len(before) == 0 {
		if populated, _ := s.Populated(); !populated {
			return
		}
	}
	left, err := t.p.Slice(t.wait, s, t.killEnd)
	if err != nil {
		t.errs = append(t.errs, err)
	}
	for _, p := range left {
		t.rep.Remaining = append(t.rep.Remaining, proc.Describe(p))
	}
}

// note records processes listed in the slice.
func (t *teardown) note(pids []int, err error) {
	if err != nil {
		t.errs = append(t.errs, err)
	}
	for _, p := range pids {
		t.seen[p] = true
	}
}

// killNamespaces is the end of phase 3: the inits' kill. An init that has not ended by the phases'
// deadline is reported among the processes that remain.
func (t *teardown) killNamespaces() {
	if len(t.sc.Inits) == 0 {
		return
	}
	for _, in := range t.sc.Inits {
		if err := in.Kill(); err != nil {
			t.errs = append(t.errs, err)
		}
	}
	t.nsEnded = true
	for _, in := range t.sc.Inits {
		if !in.Wait(t.wait, t.killEnd) {
			t.nsEnded = false
			t.rep.Remaining = append(t.rep.Remaining, proc.Describe(in.Pid()))
			t.errs = append(t.errs, fmt.Errorf("the PID namespace of init %d has not ended by %v: a process in it does not die", in.Pid(), t.killEnd.Format(time.TimeOnly)))
		}
	}
}

// killEscaped is phase 4. From here on only processes identified by start time seed the walks.
func (t *teardown) killEscaped() {
	handled := maps.Clone(t.sc.Known)
	if handled == nil {
		handled = make(map[int]bool, len(t.outside))
	}
	seeds := maps.Clone(t.sc.Seeds)
	if seeds == nil {
		seeds = make(map[int]uint64)
	}
	for _, h := range t.outside {
		handled[h.Pid] = true
		seeds[h.Pid] = h.Start
	}
	if len(t.alive) > 0 {
		for _, signalGroup := range t.sc.Groups {
			t.signalFailed(signalGroup(unix.SIGKILL))
		}
	}
	pending := t.alive
	for pass := 0; pass < maxWalkPasses; pass++ {
		t.signalFailed(proc.SignalAll(pending, unix.SIGKILL))
		t.rep.Killed += len(pending)
		t.rep.Walked += len(pending)
		// Only a process that has exited can no longer fork: wait for these before walking again,
		// or a child forked as one of them died could be born after the walk and outlive it.
		t.w.WaitGone(t.wait, pending, t.killEnd)
		if t.nsEnded {
			break // what was found lived in the namespaces, which are empty now
		}
		more, err := t.w.Find(proc.Query{Self: t.sc.Self, Seeds: seeds, Known: handled, Skip: t.skip, Marker: t.sc.Marker, Exited: t.exited()})
		if err != nil {
			t.errs = append(t.errs, fmt.Errorf("walk /proc: %w", err))
			break
		}
		if pending = t.w.Verify(more); len(pending) == 0 {
			break
		}
		t.outside = append(t.outside, pending...)
		t.alive = append(t.alive, pending...)
		for _, h := range pending {
			handled[h.Pid] = true
			seeds[h.Pid] = h.Start
		}
	}
	t.rep.Found = len(t.outside)
}

// await is phase 5.
func (t *teardown) await() {
	timeout := t.p.timeout()
	alive := t.w.WaitGone(t.wait, t.alive, t.killEnd)
	for _, h := range alive {
		t.rep.Remaining = append(t.rep.Remaining, proc.Describe(h.Pid))
	}
	if len(t.rep.Remaining) > 0 {
		t.errs = append(t.errs, fmt.Errorf("%d processes remain after %v: %v", len(t.rep.Remaining), timeout, t.rep.Remaining))
	}
}

// sweep signals every process of the scope's slice not yet in signalled, re-reading the slice until a
// pass finds no new pid or the deadline passes (see Policy.Sweep).
func (t *teardown) sweep(sig unix.Signal, signalled map[int]bool, deadline time.Time) {
	if err := t.p.Sweep(t.sc.Slice, sig, signalled, deadline); err != nil {
		t.errs = append(t.errs, err)
	}
}

// signalFailed logs a failure to signal: the process may survive it, and the walks and the hard kill
// that follow are what make up for it.
func (t *teardown) signalFailed(err error) {
	if err != nil {
		t.log.Warn("signal failed", "scope", t.sc.Name, "error", err)
	}
}
