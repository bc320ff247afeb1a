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
// In cgroup containment a child of the Reaper that is not a task's main process and sits outside
// every slice of the Reaper moved itself out: it is killed, with whatever it started. Where sessions
// have PID namespaces their orphans go to their inits, and the periodic check, every adoptionPeriod,
// looks at each init's children too; the check at the end of a session looks under the Reaper.
//
// In process containment an adopted orphan belongs to the session of this Reaper whose marker it
// carries, or that remembered it (Session.rememberProcs); the ending session's own teardown kills
// what carries its marker. Any other is killed at the end of the next session to end (the known limit
// of process containment) and when the Reaper closes; not periodically, as it might be a live
// session's. With PID namespaces no orphan is unattributable: it dies with its session's namespace.

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

// adopters are the Reaper and, in cgroup containment, the init of every session's PID namespace. In
// process containment every child of an init is its session's, and dies with it.
//
// Each adopter left out spares a read of every thread's children file. The Reaper is left out until
// it has started a task outside a PID namespace (before that its children are its inits and the
// processes it waits for itself); so is the init of a session whose teardown has begun (the kernel
// kills its namespace), and one whose namespace holds nothing but itself (pidns.Init.Quiet). At the
// end of a session (ending set) the inits are left out altogether: other sessions' escapees are the
// periodic check's, and where hundreds of sessions end at once their checks, which take turns, would
// each look under every init still alive.
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
