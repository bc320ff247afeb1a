package reaper

import (
	"bytes"
	"context"
	"os"
	"time"

	"github.com/cgreaper/reaper/internal/kill"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"golang.org/x/sys/unix"
)

// Escapees. A process can leave every trail a teardown follows: clear its environment (the marker),
// double-fork (its parent chain), call setsid (its process group) and, as root, move itself out of its
// cgroup. What it cannot leave is the Reaper's child table: the Reaper is the child subreaper, so once
// the parent it had dies, it becomes a child of the Reaper. That is the one certain trail, and
// killAdopted follows it.
//
// In cgroup containment every process a session starts is born in the session's slice, and an orphan
// of a session is adopted there. A child of the Reaper that is not a task's main process (registered
// with the child reaper) and sits outside every slice of the Reaper did not get there innocently: it
// moved itself out, and it is killed, with whatever it started. Where sessions have PID namespaces,
// their orphans go to their inits instead, and the same check runs over each init's children: an
// escapee dies within adoptionPeriod rather than with its session. That check is cheap (the Reaper's
// children and the slice's cgroup.procs files) and runs every adoptionPeriod, at the end of every
// session and when the Reaper closes.
//
// In process containment there is no slice to sit in. An adopted orphan that carries the marker of a
// live session belongs to it; one that a live session remembered (Session.rememberProcs) too. Any
// other cannot be attributed to a session, and it is killed at the end of the next session to end (of
// any session: it may have been started by one still alive, which is the known limit of process
// containment), and when the Reaper closes; not periodically, as it might be a live session's. With
// PID namespaces no orphan is unattributable: it sits in its own session's namespace, below its init,
// and dies with that session.
//
// Why tasks get no cgroup namespace of their own is in the package documentation.

// adoptionPeriod is how often the Reaper looks for escapees in cgroup containment.
const adoptionPeriod = 2 * time.Second

// watchAdopted runs killAdopted every adoptionPeriod until stop is closed. The Reaper starts it in
// cgroup containment and waits for it.
func (r *Reaper) watchAdopted(stop <-chan struct{}) {
	defer r.wg.Done()
	tick := time.NewTicker(adoptionPeriod)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			r.killAdopted(context.Background(), "periodic check", time.Now().Add(r.lim.CloseTimeout), nil)
		}
	}
}

// adopter is a process orphans are re-parented to, and the children it started itself.
type adopter struct {
	pid        int
	registered map[int]bool
}

// adopters are the Reaper and, in cgroup containment, the init of every session's PID namespace:
// orphans of a session with a namespace go to its init. In process containment every child of an
// init belongs to its session (nothing but the session's processes is in its namespace), and dies with
// it.
//
// The Reaper is left out until it has started a task outside a PID namespace: a process in one is
// re-parented to its namespace's init, or killed with it, never to the Reaper, whose children are
// then its inits and the short-lived processes it waits for itself. So is ending's init, which its
// teardown has killed: the kernel kills what is left in its namespace; and an init that has said its
// namespace holds nothing but itself (pidns.Init.Quiet), an idle session's. Each adopter left out
// spares a read of every thread's children file, and the dentries those reads leave for the kernel
// to drop when the process is reaped.
func (r *Reaper) adopters(ending *Session) []adopter {
	var out []adopter
	if r.direct.Load() {
		out = append(out, r.asAdopter())
	}
	if r.instance == nil {
		return out
	}
	r.mu.Lock()
	sessions := make([]*Session, 0, len(r.sessions))
	for s := range r.sessions {
		sessions = append(sessions, s)
	}
	r.mu.Unlock()
	for _, s := range sessions {
		in := s.ns.current()
		if s == ending || in == nil || in.Err() != nil || in.Quiet() {
			continue
		}
		out = append(out, adopter{pid: in.Pid(), registered: in.Registered()})
	}
	return out
}

// asAdopter returns the Reaper as an adopter, with the task processes it has started now.
func (r *Reaper) asAdopter() adopter { return adopter{pid: r.pid, registered: r.kids.Registered()} }

// killAdopted kills the escapees among the adopters' children (see above) with their descendants,
// and logs what it killed and why it looked (when); it waits for them until deadline, or
// kill.HurryWait after ctx is done. Concurrent calls take turns. ending, if set, is the session whose
// teardown calls it: listed until its files are gone, it owns nothing any more.
//
// It looks again after each kill, until a look finds neither an escapee nor a child it had not seen
// that exited before it could be read (maxAdoptedPasses at most). A process that forks its successor
// and exits, over and over, is never the same pid twice: the one a look found may have forked and
// exited before its signal, and its successor was then handed to the adopter after the look had read
// the children (the kernel hands a dying process's children on before it becomes a zombie). Such a
// chain always leaves a trace in the next look: its successor, alive, or a new child gone.
func (r *Reaper) killAdopted(ctx context.Context, when string, deadline time.Time, ending *Session) {
	r.adoptMu.Lock()
	defer r.adoptMu.Unlock()
	start := time.Now()
	w := proc.NewWalker()
	wctx, cancel := kill.DeathWait(ctx)
	defer cancel()
	var killed []proc.Proc
	var rep KillReport
	seen := make(map[int]bool)
	for pass := 0; pass < maxAdoptedPasses; pass++ {
		var hs []proc.Handle
		moved := false
		for _, a := range r.adopters(ending) {
			seeds, gone := r.escapees(w, a, ending, seen)
			// An escapee found that has gone before it could be pinned may have forked first.
			moved = moved || gone || len(seeds) > 0
			if len(seeds) == 0 {
				continue
			}
			// The escapees and everything below them. Skip: the registered are tasks.
			found, _ := w.Find(proc.Query{Self: a.pid, Seeds: seeds, Skip: a.registered})
			hs = append(hs, w.Verify(found)...)
		}
		if len(hs) == 0 {
			if moved && time.Now().Before(deadline) && wctx.Err() == nil {
				continue
			}
			break
		}
		for _, h := range hs {
			killed = append(killed, proc.Describe(h.Pid))
		}
		if err := proc.SignalAll(hs, unix.SIGKILL); err != nil {
			r.log.Warn("signal failed", "scope", "escapees", "error", err)
		}
		left := w.WaitGone(wctx, hs, deadline)
		proc.CloseAll(hs)
		rep.Killed += len(hs)
		for _, h := range left {
			rep.Remaining = append(rep.Remaining, proc.Describe(h.Pid))
		}
	}
	if len(killed) == 0 {
		return
	}
	rep.Walked, rep.Found, rep.Duration = rep.Killed, rep.Killed, time.Since(start)
	r.obs.Teardown(rep) // counted as escapees found and killed by the walk
	r.log.Warn("killed escapees: processes that left every session (adopted by reaper or a session's init outside its sessions)",
		"when", when, "count", len(killed), "processes", killed)
}

// maxAdoptedPasses bounds killAdopted's looks: a chain of successors dies in a few (each look kills
// what it finds before it can fork again, most of the time).
const maxAdoptedPasses = 64

// escapees returns the children of a that it did not start and no live session owns (see owned),
// with their start times, and whether a child not in seen had exited or gone before it could be
// read (see adopted). Children in seen are passed over; those read are added to it. seen may be nil.
func (r *Reaper) escapees(w *proc.Walker, a adopter, ending *Session, seen map[int]bool) (map[int]uint64, bool) {
	candidates, gone := adopted(w, a, seen)
	if len(candidates) == 0 {
		return nil, gone
	}
	// Read after the candidates were listed: a task born since is not among them.
	owned := r.owned(w, ending)
	seeds := make(map[int]uint64)
	for _, st := range candidates {
		if !owned(st) {
			seeds[st.Pid] = st.Start
		}
	}
	return seeds, gone
}

// adopted returns the live children of a that it did not start and that are not in seen, and
// whether one of them had exited or gone by the time it was read.
func adopted(w *proc.Walker, a adopter, seen map[int]bool) (out []proc.Stat, gone bool) {
	if reap.Childless(a.pid) {
		// The Reaper with no child at all, not even a zombie: one waitid says so, where listing
		// them reads every thread's children file (at every session's end and periodic check).
		return nil, false
	}
	self, ok := w.Stat(a.pid)
	if !ok {
		return nil, false
	}
	children := w.Children(self)
	// The Reaper's dead children are passed over unread: after a session's kill it may have
	// hundreds the wait loop has not reaped yet (see proc.Query.Exited).
	mine := a.pid == os.Getpid()
	for _, pid := range children {
		if a.registered[pid] || seen[pid] {
			continue
		}
		if seen != nil {
			seen[pid] = true
		}
		if mine && reap.Exited(pid) {
			gone = true
			continue
		}
		if st, ok := w.Stat(pid); ok && st.PPid == a.pid && !st.Dead() {
			out = append(out, st)
		} else {
			gone = true
		}
	}
	return out, gone
}

// owned returns what tells an adopted child that belongs to a session from an escapee: in cgroup
// containment, being in the Reaper's slice (read once, now, after the children were listed, so a
// child listed there was in the slice before or has left it since); in process containment, the
// marker of a live session, or a place in a live session's memory of its processes (ending is not
// live).
func (r *Reaper) owned(w *proc.Walker, ending *Session) func(proc.Stat) bool {
	if r.instance != nil {
		pids, err := r.instance.Pids()
		if err != nil {
			return func(proc.Stat) bool { return true } // cannot tell: kill nothing
		}
		in := make(map[int]bool, len(pids))
		for _, p := range pids {
			in[p] = true
		}
		return func(st proc.Stat) bool { return in[st.Pid] }
	}
	r.mu.Lock()
	sessions := make([]*Session, 0, len(r.sessions))
	for s := range r.sessions {
		if s != ending {
			sessions = append(sessions, s)
		}
	}
	r.mu.Unlock()
	live := make(map[string]bool, len(sessions))
	known := make(map[int]uint64)
	for _, s := range sessions {
		live[s.marker] = true
		s.mu.Lock()
		for pid, start := range s.known {
			known[pid] = start
		}
		s.mu.Unlock()
	}
	prefix := []byte(EnvSession + "=" + r.name + "/")
	return func(st proc.Stat) bool {
		if start, ok := known[st.Pid]; ok && start == st.Start {
			return true
		}
		mine := false
		w.EachEnv(st.Pid, func(entry []byte) bool {
			if bytes.HasPrefix(entry, prefix) && live[string(entry)] {
				mine = true
				return false
			}
			return true
		})
		return mine
	}
}
