package reaper

import (
	"maps"
	"slices"
	"sort"

	"github.com/cgreaper/reaper/internal/proc"
)

// Listing is what a session has running.
type Listing struct {
	// Tasks are the session's background tasks, oldest first, including finished ones that are still
	// kept.
	Tasks []TaskInfo
	// Leftovers are processes that finished foreground commands left running in the session; they
	// die with the session at the latest.
	Leftovers []Leftover
}

// Leftover is what one finished foreground command left running.
type Leftover struct {
	TaskID  string
	Command string
	// Pids are the processes as the session's commands see them: in its PID namespace, where it has
	// one.
	Pids []int
}

// List describes the session's tasks and leftover processes.
func (s *Session) List() Listing {
	s.prune()
	s.mu.Lock()
	tasks := slices.Collect(maps.Values(s.tasks))
	recent := maps.Clone(s.recent)
	starting := s.starting // a task being started is none's leftover either
	s.mu.Unlock()
	// Read after starting: a ready shell is published before it is no longer being started.
	ready := s.ready.id() // reaper's own, waiting for the next command: no leftover
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].started.Before(tasks[j].started) })

	// In process containment one walk finds all of the session's processes, grouped by task. A
	// ready shell started during the walk is no leftover either: its ids are looked at again.
	var byTask map[string][]int
	if s.r.root == nil {
		byTask = s.processesByTask(tasks)
		delete(byTask, ready)
		delete(byTask, starting)
		s.mu.Lock()
		delete(byTask, s.starting)
		s.mu.Unlock()
		delete(byTask, s.ready.id())
	}
	var l Listing
	w := proc.NewWalker()
	for _, t := range tasks {
		var pids []int
		if t.leaf != nil {
			pids, _ = t.leaf.Pids()
		} else {
			pids = byTask[t.id]
			delete(byTask, t.id)
		}
		if t.isBackground() {
			l.Tasks = append(l.Tasks, s.infoOf(w, t, pids))
		} else if t.currentStatus().Terminal() && len(pids) > 0 {
			l.Leftovers = append(l.Leftovers, Leftover{TaskID: t.id, Command: t.command, Pids: s.sessionPids(w, pids)})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(byTask)) {
		l.Leftovers = append(l.Leftovers, Leftover{TaskID: id, Command: recent[id], Pids: s.sessionPids(w, byTask[id])})
	}
	return l
}

// SessionPid returns the pid the process host (its pid here) has where the session's commands run:
// in the session's PID namespace, where it has one (the one a level below this process's: /proc's
// NSpid line lists a process's pid in each namespace from this one inward), else host itself. An
// agent acts on the pids it is given with the session's own commands (kill, wait, ps): they must be
// the session's.
func (s *Session) SessionPid(host int) int { return s.sessionPid(proc.NewWalker(), host) }

func (s *Session) sessionPid(w *proc.Walker, host int) int {
	if ns := w.NSPids(host); len(ns) > s.r.nsLevel {
		return ns[s.r.nsLevel]
	}
	return host
}

// sessionPids is sessionPid of each of pids, in place.
func (s *Session) sessionPids(w *proc.Walker, pids []int) []int {
	for i, p := range pids {
		pids[i] = s.sessionPid(w, p)
	}
	return pids
}

// processesByTask walks /proc once for the session's processes and groups them by the task marker
// they carry ("" for processes that cleared it but descend from a task).
func (s *Session) processesByTask(tasks []*task) map[string][]int {
	seeds := make(map[int]uint64)
	for _, t := range tasks {
		if !t.currentStatus().Terminal() {
			seeds[t.pid] = t.start
		}
	}
	w := proc.NewWalker()
	found, _ := w.Find(s.sessionQuery(seeds))
	s.rememberProcs(found)
	out := make(map[string][]int)
	for _, p := range found {
		id, _ := w.Env(p.Pid, EnvTask)
		out[id] = append(out[id], p.Pid)
	}
	return out
}
