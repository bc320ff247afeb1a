package kill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// Report says what a teardown (a session's end, a task stop or timeout, an escapee check) did:
// reaper.KillReport, which it is converted to, documents the fields (Usage is read where
// Scope.RemoveSlice is set).
type Report struct {
	Terminated, Killed, Walked, Found int
	Remaining                         []proc.Proc
	Unaccounted                       bool
	Duration                          time.Duration
	Usage                             *cgroup.Stats
}

// Total is the number of processes the teardown ended.
func (r Report) Total() int { return r.Terminated + r.Killed }

func (r Report) String() string {
	s := fmt.Sprintf("%d processes ended (%d by SIGTERM, %d killed; %d found by the /proc walk) in %v",
		r.Total(), r.Terminated, r.Killed, r.Found, r.Duration.Round(time.Microsecond))
	if len(r.Remaining) > 0 {
		s += fmt.Sprintf(", %d remain: %v", len(r.Remaining), r.Remaining)
	}
	if r.Unaccounted {
		s += ", and what remains could not all be looked at"
	}
	return s
}

// add counts what o did into r.
func (r *Report) add(o Report) {
	r.Terminated += o.Terminated
	r.Killed += o.Killed
	r.Walked += o.Walked
	r.Found += o.Found
	r.Remaining = append(r.Remaining, o.Remaining...)
	r.Unaccounted = r.Unaccounted || o.Unaccounted
}

// Scope is what a teardown ends, all of it data. Slice is nil in process containment; Seeds are
// processes known to belong (pid -> start time); Marker is the environment entry its processes inherit.
type Scope struct {
	Name  string // "session S" or "session S: task T", for the log
	Slice *cgroup.Slice
	Seeds map[int]uint64
	// Groups are the running tasks' main processes, each pinned by a pidfd of the scope's own (or
	// none): each leads its task's process group, which is signalled as a whole while its leader
	// lives (see proc.Handle.SignalGroup). The teardown closes them. A scope with Groups has
	// running tasks.
	Groups []proc.Handle
	Marker string
	// End is when every wait for killed processes ends (a session's teardown sets it to its start
	// plus the grace period and the Timeout); zero means the grace period and the Timeout from now.
	End time.Time
	// Self is the process the walks look below (the Reaper, or the session's init), and Skip the
	// task processes below it that are other scopes' (see proc.Query).
	Self int
	Skip map[int]bool
	// Known are processes the walks go through but never report or signal: the session's init.
	Known map[int]bool
	// Inits, for a session, are the inits of its PID namespaces: the teardown kills them, waits for
	// them and lets go of them (pidns.Init.Close); once they have ended nothing of their namespaces
	// is left.
	Inits []*pidns.Init
	// Namespaced says that every process of the scope was born in the namespaces of Inits, whose last
	// init is Self. No process leaves its PID namespace, so with a slice the walk of phase 1 is
	// deferred (see Terminate).
	Namespaced bool
	// Escapees, if set, is where the scope's orphans go and what tells them from live sessions': the
	// teardown runs the escapee check at its end (see Policy.Escapees), so escapees die by their
	// session's end at the latest. Where Self is one of its adopters, the walk of phase 1 is deferred
	// (see Terminate); the escapees it finds may include another scope's, orphaned as it ran: those
	// die anyway.
	Escapees *Escapees
	// Exits are closed once each running task's main process has been reaped and its end recorded:
	// the teardown waits for them with what it killed, within its deadline.
	Exits []<-chan struct{}
	// Killed, if set, is closed once every process of the scope is killed and waited for (or
	// listed as remaining), before the end of inits that held nothing of the scope (which would
	// delay whoever answers for the end) and the slice's removal.
	Killed chan struct{}
	// RemoveSlice removes the slice (and its leaves) once it is empty.
	RemoveSlice bool
}

// maxWalkPasses bounds the repeated /proc walk; each pass after the first only finds processes forked
// by survivors while the previous one ran, and a fork bomb outside any slice must not hold us forever.
const maxWalkPasses = 16

// Terminate ends every process of sc. It is the program's kill policy, in phases:
//
//  1. A first walk of /proc, while the process tree is intact, finds processes outside the slice that
//     descend from the scope's processes (by parent pid); without a slice, also those that carry the
//     marker. In a scope with a slice that is Namespaced or whose Self adopts its escapees it comes
//     later: see below.
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
//  5. A bounded wait for those processes to exit, and for the tasks' ends (Exits); a last look at
//     the slice; what is alive then is reported.
//  6. The escapee check (sc.Escapees), the inits let go of, Killed closed; then the inits that held
//     nothing are killed, the slice's statistics read (Report.Usage) and the slice removed
//     (RemoveSlice), and those inits waited for.
//
// A scope that holds no process but its inits (every namespace is empty, no task runs, the slice is
// not populated) skips phases 1 to 5: most sessions end so, their commands done. A scope whose walks
// look below this process, which has no child, and whose slice is not populated has no process left
// either (see nothingLeft).
//
// Every wait shares one deadline (sc.End) and the clock of the package doc: what survives SIGKILL
// (uninterruptible sleep) is reported, not waited for. The error says what failed, not in which
// scope: the caller, who knows, says that.
//
// In a scope with a slice that is Namespaced or whose Self adopts its escapees, the walk of phase 1
// comes in phase 2, once the slice is empty or half the grace period has passed, when it is short
// (docs/containment.md says why, and what it can miss: phase 4 or the escapee check kill that). It
// starts below the init, or from Self's escapees; what it finds gets its SIGTERM then, each init
// signals its whole namespace too, and they have the rest of the grace period. Without a grace period
// the walk comes after the slice's kill.
func (p Policy) Terminate(ctx context.Context, sc Scope) (Report, error) {
	start := time.Now()
	end := sc.End
	if end.IsZero() {
		end = start.Add(p.Grace + p.timeout())
	}
	t := &teardown{
		p: p, log: p.log(), sc: sc, w: p.walker(), c: newClock(ctx, end), start: start,
		seen: make(map[int]bool), termed: make(map[int]bool),
	}
	if sc.Slice != nil {
		t.slice = sc.Slice.Spare(p.Spare)
	}
	defer t.c.stop()
	defer proc.CloseAll(sc.Groups)
	defer func() { proc.CloseAll(t.outside) }()
	var dying []*pidns.Init // inits that hold nothing: killed once Killed is closed
	switch {
	case t.onlyInits():
		dying = sc.Inits
	case !t.nothingLeft():
		t.kill()
	}
	t.awaitExits()
	if sc.Escapees != nil {
		t.rep.add(t.p.escapees(t.c, *sc.Escapees))
	}
	if dying == nil {
		for _, in := range sc.Inits {
			in.Close()
		}
	}
	if sc.Killed != nil {
		close(sc.Killed)
		// Who waits on Killed (an HTTP DELETE to answer) runs now, not once the removals below,
		// which block this processor in system calls, let it (0.2-0.3 ms of a DELETE's 1.1).
		runtime.Gosched()
	}
	t.killInits(dying)
	if sc.RemoveSlice && t.slice != nil {
		t.readUsage()
		t.errs = append(t.errs, t.c.retry(t.slice.Remove)) // still populated (a process in D state) fails
	}
	t.waitInits(dying, "the init %d of a PID namespace has not ended by %v")
	for _, in := range dying {
		in.Close()
	}
	t.rep.Duration = time.Since(t.start)
	if len(t.rep.Remaining) > 0 {
		t.errs = append(t.errs, fmt.Errorf("%d processes remain after %v: %v", len(t.rep.Remaining), t.rep.Duration.Round(time.Millisecond), t.rep.Remaining))
	}
	return t.rep, errors.Join(t.errs...)
}

// teardown is one run of Terminate.
type teardown struct {
	p     Policy
	log   *slog.Logger
	sc    Scope
	slice *cgroup.Slice // sc.Slice, taking descriptors from the policy's reserve; nil without one
	w     *proc.Walker
	c     *clock
	start time.Time
	rep   Report
	errs  []error // what failed; nils among them, which errors.Join drops

	seen    map[int]bool  // processes seen in the slice
	termed  map[int]bool  // processes of the slice sent SIGTERM
	emptied bool          // the slice emptied within the grace period
	nsEnded bool          // the scope had inits, and they have all ended
	found   bool          // the walk of phase 1 has run
	outside []proc.Handle // processes found outside the slice, verified; closed at the end
	alive   []proc.Handle // those not yet seen to exit
}

// kill is phases 1 to 5.
func (t *teardown) kill() {
	if !t.deferred() {
		t.findEscaped()
	}
	if t.p.Grace > 0 {
		t.polite()
	}
	t.killSlice()
	t.findEscaped() // a deferred walk, without a grace period
	t.killNamespaces()
	t.killEscaped()
	t.await()
}

// onlyInits reports whether the scope holds no process but the inits of its PID namespaces: it has
// inits (every process of the session was born in their namespaces, and none leaves one), no task
// runs, every namespace is empty (Init.Empty) and so is the slice, if there is one.
func (t *teardown) onlyInits() bool {
	if len(t.sc.Inits) == 0 || len(t.sc.Groups) > 0 {
		return false
	}
	for _, in := range t.sc.Inits {
		if !in.Empty() {
			return false
		}
	}
	return t.sliceEmpty()
}

// sliceEmpty reports whether the scope has no slice, or one that reads not populated.
func (t *teardown) sliceEmpty() bool {
	if t.slice == nil {
		return true
	}
	populated, err := t.slice.Populated()
	return err == nil && !populated
}

// nothingLeft reports whether the scope has no process left, in two system calls: it has no init,
// the walks look below this process, which has no child, not even a zombie, and the slice (if any) is
// not populated. Every process of such a scope descends from this process (the subreaper), so none
// lives outside the slice; the slice is read too, for a process someone else moved into it. A scope
// with no slice, init, seed, group or marker has nothing to find.
func (t *teardown) nothingLeft() bool {
	if t.slice == nil && len(t.sc.Inits) == 0 && len(t.sc.Seeds) == 0 && len(t.sc.Groups) == 0 && t.sc.Marker == "" {
		return true
	}
	return len(t.sc.Inits) == 0 && reap.Childless(t.sc.Self) && t.sliceEmpty()
}

// deferred reports whether the walk of phase 1 waits for the slice to empty (see Terminate).
func (t *teardown) deferred() bool {
	return t.slice != nil && (t.sc.Namespaced || t.adopter() != nil)
}

// adopter returns Self as an adopter of the scope's escapees, if it is one.
func (t *teardown) adopter() *Adopter {
	if t.sc.Escapees == nil {
		return nil
	}
	for i, a := range t.sc.Escapees.Adopters {
		if a.Pid == t.sc.Self {
			return &t.sc.Escapees.Adopters[i]
		}
	}
	return nil
}

// exited is what the walks use to pass over dead children of Self unread (proc.Query.Exited): only
// this process can ask the kernel about its own children.
func (t *teardown) exited() func(int) bool {
	if t.sc.Self == os.Getpid() {
		return reap.Exited
	}
	return nil
}

// walkFailed records a walk that failed or was refused descriptors: what it did not find may live.
func (t *teardown) walkFailed(err error) {
	if err == nil {
		err = t.w.Starved()
	}
	if err != nil {
		t.errs = append(t.errs, fmt.Errorf("walk /proc: %w", err))
	}
}

// findEscaped is phase 1; a later call does nothing. With a slice it looks for what left it by
// parent pid only, from the threads listed in the slice now; those are the scope's without a start
// time to check, so they seed this walk only: after the kill their ids may be reused by anyone. Self's
// escapees are seeds too.
func (t *teardown) findEscaped() {
	if t.found {
		return
	}
	t.found = true
	seeds := t.sc.Seeds
	lookStarved := false // look asks the walker itself, which then forgets it
	if a := t.adopter(); a != nil {
		var adopted []map[int]uint64
		adopted, _, lookStarved = t.sc.Escapees.look(t.w, []Adopter{*a}, nil)
		if len(adopted[0]) > 0 {
			seeds = writable(seeds)
			maps.Copy(seeds, adopted[0])
		}
	}
	var trusted map[int]bool
	marker := t.sc.Marker
	if t.slice != nil {
		tids, err := t.slice.Threads()
		t.errs = append(t.errs, err)
		trusted = make(map[int]bool, len(tids))
		for _, id := range tids {
			trusted[id] = true
		}
		marker = ""
	}
	known := writable(trusted)
	maps.Copy(known, t.sc.Known)
	found, err := t.w.Find(proc.Query{
		Self: t.sc.Self, Seeds: seeds, Trusted: trusted, Known: known, Skip: t.sc.Skip, Marker: marker, Exited: t.exited(),
	})
	// A walk refused descriptors is not retried here: phase 4's walks make up for it.
	if err == nil && lookStarved {
		err = proc.ErrStarved
	}
	t.walkFailed(err)
	t.outside = t.w.Verify(found)
	t.alive = t.outside
}

// polite is phase 2.
func (t *teardown) polite() {
	graceEnd := t.start.Add(t.p.Grace)
	hurry := t.c.hurry
	if t.slice != nil {
		// Listed before the group signals, which end most processes before the sweep can see them.
		t.note(t.slice.Pids())
	}
	for _, h := range t.sc.Groups {
		t.signalGroup(h, unix.SIGTERM, unix.SIGCONT)
	}
	if t.slice != nil {
		t.errs = append(t.errs, t.p.sweep(t.slice, unix.SIGTERM, t.termed, graceEnd))
	}
	t.signalFailed(proc.SignalAll(t.outside, unix.SIGTERM, unix.SIGCONT))
	if t.slice != nil {
		until := graceEnd
		if !t.found {
			until = t.start.Add(t.p.Grace / 2)
		}
		t.waitEmpty(hurry, until)
	}
	if !t.found {
		// The deferred walk (see Terminate); where the slice holds out, what it finds has the other
		// half of the grace period.
		t.findEscaped()
		t.signalFailed(proc.SignalAll(t.outside, unix.SIGTERM, unix.SIGCONT))
		// And what the walk missed: a process re-parented to the init as it ran.
		for _, in := range t.sc.Inits {
			if err := in.Signal(hurry, graceEnd, unix.SIGTERM, unix.SIGCONT); !errors.Is(err, pidns.ErrEnded) && !errors.Is(err, hurry.Err()) {
				t.signalFailed(err)
			}
		}
		if !t.emptied {
			t.waitEmpty(hurry, graceEnd)
		}
	}
	t.alive = t.w.WaitGone(hurry, t.outside, graceEnd)
	t.rep.Terminated += len(t.outside) - len(t.alive)
}

// waitEmpty waits until the slice is empty, until or ctx is done, and records whether it is.
func (t *teardown) waitEmpty(ctx context.Context, until time.Time) {
	empty, err := t.slice.WaitEmpty(ctx, until)
	t.errs = append(t.errs, err)
	t.emptied = empty
}

// signalGroup sends sigs to the process group h leads, while h is pinned (see Scope.Groups).
func (t *teardown) signalGroup(h proc.Handle, sigs ...unix.Signal) {
	for _, sig := range sigs {
		if _, err := h.SignalGroup(sig); err != nil {
			t.signalFailed(err)
			return
		}
	}
}

// killSlice is phase 3. Processes of the slice seen before the hard kill but not at it count as
// ended by SIGTERM; those listed at it, as killed.
func (t *teardown) killSlice() {
	s := t.slice
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
	t.rep.Terminated += max(len(t.seen)-len(before), 0)
	if len(before) == 0 && err == nil && t.sliceEmpty() {
		return
	}
	_, err = t.p.slice(t.c, s)
	t.errs = append(t.errs, err)
}

// note records processes listed in the slice.
func (t *teardown) note(pids []int, err error) {
	t.errs = append(t.errs, err)
	for _, p := range pids {
		t.seen[p] = true
	}
}

// killNamespaces is the end of phase 3: the inits' kill. An init that has not ended by the deadline
// is reported among the processes that remain.
func (t *teardown) killNamespaces() {
	if len(t.sc.Inits) == 0 {
		return
	}
	t.killInits(t.sc.Inits)
	t.nsEnded = t.waitInits(t.sc.Inits, "the PID namespace of init %d has not ended by %v: a process in it does not die")
}

// killInits sends SIGKILL to each of inits.
func (t *teardown) killInits(inits []*pidns.Init) {
	for _, in := range inits {
		t.errs = append(t.errs, in.Kill())
	}
}

// waitInits waits for each of inits to end until the deadline, and reports whether all did; one that
// did not is reported as a process that remains, with the error format (of its pid and the deadline).
func (t *teardown) waitInits(inits []*pidns.Init, format string) bool {
	ended := true
	for _, in := range inits {
		if !in.Wait(t.c.wait, t.c.end) {
			ended = false
			t.rep.Remaining = append(t.rep.Remaining, proc.Describe(in.Pid()))
			t.errs = append(t.errs, fmt.Errorf(format, in.Pid(), t.c.end.Format(time.TimeOnly)))
		}
	}
	return ended
}

// killEscaped is phase 4. From here on only processes identified by start time seed the walks. A
// walk refused descriptors is walked again, after a pause, until the deadline.
func (t *teardown) killEscaped() {
	handled, seeds := writable(t.sc.Known), writable(t.sc.Seeds)
	for _, h := range t.outside {
		handled[h.Pid] = true
		seeds[h.Pid] = h.Start
	}
	if len(t.alive) > 0 {
		for _, h := range t.sc.Groups {
			t.signalGroup(h, unix.SIGKILL)
		}
	}
	pending := t.alive
	for pass := 0; pass < maxWalkPasses; pass++ {
		t.signalFailed(proc.SignalAll(pending, unix.SIGKILL))
		t.rep.Killed += len(pending)
		t.rep.Walked += len(pending)
		// Only a process that has exited can no longer fork: wait for these before walking again,
		// or a child forked as one of them died could be born after the walk and outlive it.
		t.w.WaitGone(t.c.wait, pending, t.c.end)
		if t.nsEnded {
			break // what was found lived in the namespaces, which are empty now
		}
		more, err := t.w.Find(proc.Query{Self: t.sc.Self, Seeds: seeds, Known: handled, Skip: t.sc.Skip, Marker: t.sc.Marker, Exited: t.exited()})
		if err == nil {
			err = t.w.Starved()
		}
		if pending = t.w.Verify(more); err == nil && len(pending) == 0 {
			break
		}
		if err != nil {
			if !retryable(err) || !t.c.pause() {
				t.walkFailed(err)
				t.rep.Unaccounted = true
				break
			}
			pass-- // a walk refused descriptors does not count as a pass
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

// await is phase 5: the wait for what was killed outside the slice, then a last look at the slice.
func (t *teardown) await() {
	t.rep.Remaining = append(t.rep.Remaining, describe(t.w.WaitGone(t.c.wait, t.alive, t.c.end))...)
	if t.slice == nil {
		return
	}
	for {
		populated, err := t.slice.Populated()
		if err == nil && !populated {
			return
		}
		if err == nil {
			// Listed after the deadline of the slice's wait: what is there now did not die.
			var pids []int
			if pids, err = t.slice.Pids(); err == nil && len(pids) > 0 {
				for _, p := range pids {
					t.rep.Remaining = append(t.rep.Remaining, proc.Describe(p))
				}
				return
			}
		}
		// Unreadable, or populated with no process listed yet (one in the middle of its exit):
		// look again while there is time.
		if (err == nil || retryable(err)) && t.c.pause() {
			continue
		}
		// What was seen in it and may live is what remains, and the report says it may be short.
		t.rep.Unaccounted = true
		t.errs = append(t.errs, fmt.Errorf("%s: cannot tell what is left in it: %w", t.slice.Path(), cmp.Or(err, errPopulated)))
		for p := range t.seen {
			if d := proc.Describe(p); d.State != "Z" && d.State != "?" {
				t.rep.Remaining = append(t.rep.Remaining, d)
			}
		}
		return
	}
}

// errPopulated says that a slice reads populated while it lists no process.
var errPopulated = errors.New("populated, and no process listed")

// awaitExits waits for the tasks' ends (Scope.Exits) until the deadline.
func (t *teardown) awaitExits() {
	for _, ch := range t.sc.Exits {
		select {
		case <-ch:
		case <-t.c.wait.Done():
			return
		}
	}
}

// readUsage reads what the slice counted, for Report.Usage. A failure is not the teardown's: what
// the session used is then known as far as it was read before.
func (t *teardown) readUsage() {
	st, err := t.slice.Stats()
	if err != nil {
		t.log.Warn("the last reading of a slice's usage failed", "scope", t.sc.Name, "error", err)
		return
	}
	t.rep.Usage = &st
}

// writable returns a copy of m, made even where m is nil.
func writable[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return make(map[K]V)
	}
	return maps.Clone(m)
}

// signalFailed logs a failure to signal: the process may survive it, and the walks and the hard kill
// that follow are what make up for it.
func (t *teardown) signalFailed(err error) {
	if err != nil {
		t.log.Warn("signal failed", "scope", t.sc.Name, "error", err)
	}
}
