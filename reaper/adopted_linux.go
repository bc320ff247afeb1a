package reaper

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/cgreaper/reaper/internal/kill"
)

// Escapees (see the package documentation). The Reaper's child table is the one trail a process
// cannot leave, and the escapee check (kill.Policy.Escapees) follows it.
//
// In cgroup containment every process a session starts is born in the session's slice, and an orphan
// of a session is adopted there. A child of the Reaper that is not a task's main process (registered
// with the child reaper) and sits outside every slice of the Reaper did not get there innocently: it
// moved itself out, and it is killed, with whatever it started. Where sessions have PID namespaces,
// their orphans go to their inits instead, and the periodic check runs over each init's children
// too: an escapee dies within adoptionPeriod rather than with its session. That check is cheap (the
// Reaper's children and the slice's cgroup.procs files) and runs every adoptionPeriod; the check at
// the end of every session looks under the Reaper (see adopters).
//
// In process containment there is no slice to sit in. An adopted orphan that carries the marker of a
// session of this Reaper belongs to it (the ending session's marker excepted: its own teardown's check
// kills what carries it); one that a live session remembered (Session.rememberProcs) too. Any other
// cannot be attributed to a session, and it is killed at the end of the next session to end (of
// any session: it may have been started by one still alive, which is the known limit of process
// containment), and when the Reaper closes; not periodically, as it might be a live session's. With
// PID namespaces no orphan is unattributable: it sits in its own session's namespace, below its init,
// and dies with that session.
//
// Why tasks get no cgroup namespace of their own is in the package documentation.

// adoptionPeriod is how often the Reaper looks for escapees in cgroup containment.
const adoptionPeriod = 2 * time.Second

// watchAdopted runs the escapee check every adoptionPeriod until stop is closed. The Reaper starts it
// in cgroup containment and waits for it.
func (r *Reaper) watchAdopted(stop <-chan struct{}) {
	defer r.wg.Done()
	tick := time.NewTicker(adoptionPeriod)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if rep := r.policy.Escapees(context.Background(), r.escapees("periodic check", nil), time.Now().Add(r.lim.CloseTimeout)); rep.Killed > 0 {
				r.obs.Teardown(killReport(rep)) // counted as escapees found and killed by the walk
			}
		}
	}
}

// escapees is what the escapee check needs to know (see kill.Escapees): where to look (adopters) and
// what tells a session's process (owners). ending, if set, is the session whose teardown runs the
// check: listed until its files are gone, it owns nothing any more.
func (r *Reaper) escapees(when string, ending *Session) kill.Escapees {
	e := kill.Escapees{Adopters: r.adopters(ending), When: when, Turns: &r.adoptMu}
	if r.instance != nil {
		e.Owners = r.instance
		return e
	}
	// Process containment: the sessions' markers, and what live sessions remember.
	e.Prefix = EnvSession + "=" + r.name + "/"
	if ending != nil {
		e.Ended = ending.marker
	}
	r.mu.Lock()
	sessions := slices.Collect(maps.Keys(r.sessions))
	r.mu.Unlock()
	for _, s := range sessions {
		if s == ending {
			continue
		}
		s.mu.Lock()
		for pid, start := range s.known {
			if e.Known == nil {
				e.Known = make(map[int]uint64)
			}
			e.Known[pid] = start
		}
		s.mu.Unlock()
	}
	return e
}

// adopters are the Reaper and, in cgroup containment, the init of every session's PID namespace:
// orphans of a session with a namespace go to its init. In process containment every child of an
// init belongs to its session (nothing but the session's processes is in its namespace), and dies with
// it.
//
// The Reaper is left out until it has started a task outside a PID namespace: a process in one is
// re-parented to its namespace's init, or killed with it, never to the Reaper, whose children are
// then its inits and the short-lived processes it waits for itself. So is the init of every session
// whose teardown has begun: that teardown kills it, and the kernel kills what is left in its
// namespace, escapees too; and an init that has said its namespace holds nothing but itself
// (pidns.Init.Quiet), an idle session's. Each adopter left out spares a read of every thread's
// children file, and the dentries those reads leave for the kernel to drop when the process is
// reaped.
//
// At the end of a session (ending set) the inits are left out altogether: the session's own dies
// with it, and another session's escapees are the periodic check's, within adoptionPeriod, or die
// with that session. The checks take turns, and where hundreds of sessions end at once (a shutdown,
// a storm of DELETEs) each of their checks would otherwise look under every init still alive: the
// ends would follow one another at a pace that slows with every session held.
func (r *Reaper) adopters(ending *Session) []kill.Adopter {
	var out []kill.Adopter
	if r.direct.Load() {
		out = append(out, kill.Adopter{Pid: r.pid, Started: r.kids.Registered()})
	}
	if r.instance == nil || ending != nil {
		return out
	}
	r.mu.Lock()
	sessions := slices.Collect(maps.Keys(r.sessions))
	r.mu.Unlock()
	for _, s := range sessions {
		in := s.ns.live()
		if in == nil || in.Err() != nil || in.Quiet() {
			continue
		}
		out = append(out, kill.Adopter{Pid: in.Pid(), Started: in.Registered()})
	}
	return out
}
