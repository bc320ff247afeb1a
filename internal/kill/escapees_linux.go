package kill

import (
	"bytes"
	"context"
	"os"
	"sync"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
)

// Escapees (see docs/containment.md). A process can leave every trail a teardown follows but its
// adopter's child table, so a child of an adopter that the adopter did not start and that no live
// session owns is an escapee, and dies with everything below it.

// Adopter is a process orphans are re-parented to: a child subreaper (a Reaper), or the init of a
// PID namespace; Started are the children it started itself (tasks), which are no escapees.
type Adopter struct {
	Pid     int
	Started map[int]bool
}

// Escapees says where the escapee check looks and what tells an escapee from a live session's
// process. The caller knows; the check reads only what it names, when it looks.
type Escapees struct {
	// Adopters are the processes whose adopted children are looked at.
	Adopters []Adopter
	// Owners, in cgroup containment, is the slice below which every session's slice is: an adopted
	// child in it belongs to a session. Nil in process containment.
	Owners *cgroup.Slice
	// In process containment, an adopted child belongs to a session if it carries an environment
	// entry that starts with Prefix (every session's processes inherit one: REAPER_SESSION=<the
	// Reaper>/…) and is not Ended (the marker of the session that is ending, which owns nothing any
	// more); or if Known names it (pid -> start time: processes sessions remember).
	Prefix, Ended string
	Known         map[int]uint64
	// When says, in the log, why the check ran ("periodic check", "session S ended").
	When string
	// Turns, if set, is held while the check runs: the checks of one Reaper take turns.
	Turns *sync.Mutex
}

// Escapees kills the escapees among the adopters' children (see above) with their descendants, and
// logs what it killed and why it looked; it waits for them until deadline, or HurryWait after ctx is
// done. It returns what it did.
func (p Policy) Escapees(ctx context.Context, e Escapees, deadline time.Time) Report {
	c := newClock(ctx, deadline)
	defer c.stop()
	start := time.Now()
	rep := p.escapees(c, e)
	rep.Duration = time.Since(start)
	return rep
}

// maxAdoptedPasses bounds the escapee check's looks: a chain of successors dies in a few (each look
// kills what it finds before it can fork again, most of the time).
const maxAdoptedPasses = 64

// escapees is the check, on c's time. It looks again after each kill, until a look finds neither an
// escapee nor a child it had not seen that exited before it could be read (maxAdoptedPasses at most):
// a process that forks its successor and exits, over and over, may fork and exit before its signal,
// and its successor is handed to the adopter after the look read the children. Such a chain always
// leaves a trace in the next look at its adopter (its successor alive, or a new child gone), so a
// pass after the first looks again only at the adopters where the one before saw one: an orphan
// stays with the adopter it was handed to.
func (p Policy) escapees(c *clock, e Escapees) Report {
	if len(e.Adopters) == 0 {
		return Report{} // nothing to look at: no turn to wait for (a session's end with namespaces)
	}
	if e.Turns != nil {
		e.Turns.Lock()
		defer e.Turns.Unlock()
	}
	w := p.walker()
	if e.Owners != nil {
		e.Owners = e.Owners.Spare(p.Spare)
	}
	var rep Report
	var killed []proc.Proc
	seen := make(map[int]bool)
	adopters := e.Adopters
	for pass := 0; pass < maxAdoptedPasses && len(adopters) > 0; pass++ {
		seeds, moved, lookStarved := e.look(w, adopters, seen)
		var hs []proc.Handle
		again := adopters[:0:0]
		for i, a := range adopters {
			if len(seeds[i]) > 0 {
				// The escapees and everything below them. Skip: the started are tasks.
				found, _ := w.Find(proc.Query{Self: a.Pid, Seeds: seeds[i], Skip: a.Started})
				hs = append(hs, w.Verify(found)...)
			}
			if moved[i] {
				again = append(again, a)
			}
		}
		// A look refused a descriptor may have missed one: look again, after a pause, while there
		// is time; a look that saw a child go looks again at once.
		starved := w.Starved() != nil || lookStarved
		if len(hs) == 0 {
			if starved && c.pause() {
				continue // at every adopter: the one refused is not known
			}
			if len(again) > 0 && !starved && !c.over() {
				adopters = again
				continue
			}
			break
		}
		if !starved {
			adopters = again
		}
		ks, left, err := killAll(c, w, hs)
		if err != nil {
			p.log().Warn("signal failed", "scope", "escapees", "error", err)
		}
		killed = append(killed, ks...)
		rep.Killed += len(hs)
		rep.Remaining = append(rep.Remaining, left...)
	}
	if len(killed) > 0 {
		rep.Walked, rep.Found = rep.Killed, rep.Killed
		p.log().Warn("killed escapees: processes that left every session (adopted by reaper or a session's init outside its sessions)",
			"when", e.When, "count", len(killed), "processes", killed)
	}
	return rep
}

// look is one look at the adopters: for each, the children that it did not start and no live session
// owns, with their start times (its escapees), and whether it moved: an escapee was found, or a
// child not in seen had exited or gone before it could be read (see adopted). Children in seen are
// passed over; those read are added to it.
//
// What tells a session's process is read once, after every adopter's children were listed (so that a
// process handed over since joining a session is seen in it), and only where there is a candidate. A
// look that cannot tell finds no escapee; one refused a descriptor for a child's environment finds
// none either, and has every adopter with a candidate move; starved says so, as w.Starved no longer
// does once look has asked it.
func (e Escapees) look(w *proc.Walker, adopters []Adopter, seen map[int]bool) (seeds []map[int]uint64, moved []bool, starved bool) {
	seeds = make([]map[int]uint64, len(adopters))
	moved = make([]bool, len(adopters))
	candidates := make([][]proc.Stat, len(adopters))
	some := false
	for i, a := range adopters {
		candidates[i], moved[i] = adopted(w, a, seen)
		some = some || len(candidates[i]) > 0
	}
	if !some {
		return seeds, moved, false
	}
	owned, ok := e.owned(w)
	if !ok {
		return seeds, moved, false // cannot tell: kill nothing
	}
	for i, cs := range candidates {
		for _, st := range cs {
			if !owned(st) {
				if seeds[i] == nil {
					seeds[i] = make(map[int]uint64)
				}
				seeds[i][st.Pid] = st.Start
			}
		}
	}
	starved = w.Starved() != nil
	for i := range adopters {
		if starved && len(candidates[i]) > 0 {
			// An environment unread for want of a descriptor is no proof of an escapee: look again.
			seeds[i], moved[i] = nil, true
		}
		moved[i] = moved[i] || len(seeds[i]) > 0
	}
	return seeds, moved, starved
}

// adopted returns the live children of a that it did not start and that are not in seen, and
// whether one of them had exited or gone by the time it was read.
func adopted(w *proc.Walker, a Adopter, seen map[int]bool) (out []proc.Stat, gone bool) {
	if reap.Childless(a.Pid) { // one waitid, where a listing reads every thread's children file
		return nil, false
	}
	self, ok := w.Stat(a.Pid)
	if !ok {
		return nil, false
	}
	children := w.Children(self)
	mine := a.Pid == os.Getpid() // its dead children are passed over unread (see proc.Query.Exited)
	for _, pid := range children {
		if a.Started[pid] || seen[pid] {
			continue
		}
		if seen != nil {
			seen[pid] = true
		}
		if mine && reap.Exited(pid) {
			gone = true
			continue
		}
		if st, ok := w.Stat(pid); ok && st.PPid == a.Pid && !st.Dead() {
			out = append(out, st)
		} else {
			gone = true
		}
	}
	return out, gone
}

// owned returns what tells an adopted child that belongs to a session from an escapee (see
// Escapees), or false where that cannot be told now.
func (e Escapees) owned(w *proc.Walker) (func(proc.Stat) bool, bool) {
	if e.Owners != nil {
		pids, err := e.Owners.Pids()
		if err != nil {
			return nil, false
		}
		in := make(map[int]bool, len(pids))
		for _, p := range pids {
			in[p] = true
		}
		return func(st proc.Stat) bool { return in[st.Pid] }, true
	}
	prefix, ended := []byte(e.Prefix), []byte(e.Ended)
	return func(st proc.Stat) bool {
		if start, ok := e.Known[st.Pid]; ok && start == st.Start {
			return true
		}
		mine := false
		w.EachEnv(st.Pid, func(entry []byte) bool {
			if len(prefix) > 0 && bytes.HasPrefix(entry, prefix) && !bytes.Equal(entry, ended) {
				mine = true
				return false
			}
			return true
		})
		return mine
	}, true
}
