package reaper

import (
	"bytes"
	"context"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
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
// moved itself out, and it is killed, with whatever it started. That check is cheap (the Reaper's
// children and the slice's cgroup.procs files) and runs every adoptionPeriod, at the end of every
// session and when the Reaper closes.
//
// In process containment there is no slice to sit in. An adopted orphan that carries the marker of a
// live session belongs to it; one that a live session remembered (Session.rememberProcs) too. Any
// other cannot be attributed to a session, and it is killed at the end of the next session to end (of
// any session: it may have been started by one still alive, which is the known limit of process
// containment), and when the Reaper closes; not periodically, as it might be a live session's.
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
			r.killAdopted(context.Background(), "periodic check", time.Now().Add(r.lim.CloseTimeout))
		}
	}
}

// killAdopted kills the escapees among the Reaper's children (see above) with their descendants, and
// logs what it killed and why it looked (when); it waits for them until deadline, or hurryWait after
// ctx is done. Concurrent calls take turns.
func (r *Reaper) killAdopted(ctx context.Context, when string, deadline time.Time) {
	r.adoptMu.Lock()
	defer r.adoptMu.Unlock()
	start := time.Now()
	w := proc.NewWalker()
	self, ok := w.Stat(r.pid)
	if !ok {
		return
	}
	registered := r.kids.registered()
	var candidates []proc.Stat
	for _, pid := range w.Children(self) {
		if registered[pid] {
			continue
		}
		if st, ok := w.Stat(pid); ok && st.PPid == r.pid && !st.Dead() {
			candidates = append(candidates, st)
		}
	}
	if len(candidates) == 0 {
		return
	}
	owned := r.owned(w)
	seeds := make(map[int]uint64)
	for _, st := range candidates {
		if !owned(st) {
			seeds[st.Pid] = st.Start
		}
	}
	if len(seeds) == 0 {
		return
	}
	// The escapees and everything below them. Skip: the registered are the Reaper's own.
	found, _ := w.Find(proc.Query{Self: r.pid, Seeds: seeds, Skip: registered})
	hs := w.Verify(found)
	defer proc.CloseAll(hs)
	killed := make([]proc.Proc, 0, len(hs))
	for _, h := range hs {
		killed = append(killed, proc.Describe(h.Pid))
	}
	if err := proc.SignalAll(hs, unix.SIGKILL); err != nil {
		r.log.Warn("signal failed", "scope", "escapees", "error", err)
	}
	wctx, cancel := deathWait(ctx)
	defer cancel()
	left := w.WaitGone(wctx, hs, deadline)
	rep := KillReport{Killed: len(hs), Walked: len(hs), Found: len(hs), Duration: time.Since(start)}
	for _, h := range left {
		rep.Remaining = append(rep.Remaining, proc.Describe(h.Pid))
	}
	r.obs.Teardown(rep) // counted as escapees found and killed by the walk
	r.log.Warn("killed escapees: processes that left every session (adopted by reaper outside its sessions)",
		"when", when, "count", len(killed), "processes", killed)
}

// owned returns what tells an adopted child that belongs to a session from an escapee: in cgroup
// containment, being in the Reaper's slice (read once, now, after the children were listed, so a
// child listed there was in the slice before or has left it since); in process containment, the
// marker of a live session, or a place in a live session's memory of its processes.
func (r *Reaper) owned(w *proc.Walker) func(proc.Stat) bool {
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
		sessions = append(sessions, s)
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
