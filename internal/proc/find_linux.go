package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Query names a scope's processes: everything that descends (by parent pid) from a seed or from a
// trusted thread, and every descendant of Self whose environment carries Marker, with its own
// descendants. Only descendants of Self are considered: as child subreaper, Self keeps everything it
// started below it even when their parents die.
type Query struct {
	// Self is the subreaper whose descendants are searched.
	Self int
	// Seeds are processes known to belong, with their descendants, whether below Self or not: pid ->
	// start time; a start time of 0 matches any.
	Seeds map[int]uint64
	// Trusted are ids just listed in the scope's cgroup (cgroup.threads): members, whose stat is not
	// even read, so that a cgroup of a thousand processes costs only its listing. They may be thread
	// ids: a process's pid is its main thread's id, and a child belongs to the thread that forked it.
	// Trusted ids are not reported.
	Trusted map[int]bool
	// Known are processes the caller has already handled: they are searched through but not reported.
	Known map[int]bool
	// Skip are children of Self that belong to other scopes (other tasks' main processes): their
	// subtrees are not read for the marker.
	Skip map[int]bool
	// Marker is an environment entry ("KEY=value") that every process of the scope inherits; empty
	// means the marker is not looked for.
	Marker string
	// Exited, if set, tells a child of Self that has exited and awaits its reaping without reading
	// /proc; the walk for the marker passes over such children unread (after a kill Self may have a
	// thousand zombies not reaped yet).
	Exited func(pid int) bool
}

// Find returns the processes of q's scope that are not Known or Trusted, the cheaper way. Walking
// the process tree reads one children file per trusted thread, and the stat and children of every
// other process it visits; scanning /proc reads the stat of every process on the machine but the
// trusted. The tree is walked when the trusted are fewer than the processes a scan would read, with a
// budget of a tenth of the scan for what is not trusted; past it the walk gives up and /proc is
// scanned, so a wrong guess costs at most about 20%.
func (w *Walker) Find(q Query) ([]Stat, error) {
	scan := machineProcs() - len(q.Trusted)
	if len(q.Trusted) < scan {
		if found, ok := w.tree(q, len(q.Trusted)+max(scan/10, 8)); ok {
			return found, nil
		}
	}
	return w.scan(q)
}

// scan answers q by reading the stat of every process in /proc.
func (w *Walker) scan(q Query) ([]Stat, error) {
	procs, err := w.Snapshot(q.Trusted)
	if err != nil {
		return nil, err
	}
	kids := make(map[int][]int, len(procs))
	byPid := make(map[int]int, len(procs))
	for i, p := range procs {
		kids[p.PPid] = append(kids[p.PPid], i)
		byPid[p.Pid] = i
	}
	// member: the seeds, the trusted, and their descendants.
	member := make(map[int]bool)
	var stack []int
	for pid := range q.Trusted {
		stack = append(stack, kids[pid]...)
	}
	for pid, start := range q.Seeds {
		if i, ok := byPid[pid]; ok && (start == 0 || procs[i].Start == start) {
			stack = append(stack, i)
		}
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if member[procs[i].Pid] {
			continue
		}
		member[procs[i].Pid] = true
		stack = append(stack, kids[procs[i].Pid]...)
	}
	// Walk Self's subtree, and the seeds' where they are not in it (as tree does: a process forked
	// into a PID namespace is its forker's child, not the init's); a process is in the scope if it
	// is a member, carries the marker, or descends from one that is.
	type item struct {
		i      int
		inside bool
	}
	var out []Stat
	var walk []item
	for _, i := range kids[q.Self] {
		walk = append(walk, item{i, false})
	}
	for pid, start := range q.Seeds {
		if i, ok := byPid[pid]; ok && pid != q.Self && (start == 0 || procs[i].Start == start) {
			walk = append(walk, item{i, true})
		}
	}
	for pid := range q.Trusted {
		for _, i := range kids[pid] {
			walk = append(walk, item{i, true})
		}
	}
	visited := make(map[int]bool)
	for len(walk) > 0 {
		it := walk[len(walk)-1]
		walk = walk[:len(walk)-1]
		p := procs[it.i]
		if visited[p.Pid] {
			continue
		}
		visited[p.Pid] = true
		inside := it.inside || member[p.Pid] || q.Marker != "" && !p.Dead() && w.Marked(p.Pid, q.Marker)
		for _, c := range kids[p.Pid] {
			walk = append(walk, item{c, inside})
		}
		if inside && !q.Known[p.Pid] && !p.Dead() {
			out = append(out, p)
		}
	}
	return out, nil
}

// tree answers q by reading only the subtrees that can hold members, instead of every process in
// /proc: those of the seeds and of the trusted, and those of Self's children that are not in Skip and
// carry the marker. It misses one case scan covers, a marked process whose parent is some other live
// process of Self's, which only a command that copies another scope's marker can make. Reading a
// process's children costs about twice reading its stat, so it gives up (false) once it has read more
// than budget processes; a negative budget means no limit.
func (w *Walker) tree(q Query, budget int) ([]Stat, bool) {
	var queue []Stat
	seen := make(map[int]bool, len(q.Trusted)+len(q.Seeds))
	for tid := range q.Trusted {
		seen[tid] = true
	}
	for tid := range q.Trusted {
		for _, c := range w.threadChildren(tid, strconv.Itoa(tid), nil) {
			if seen[c] {
				continue
			}
			seen[c] = true
			if st, ok := w.Stat(c); ok {
				queue = append(queue, st)
			}
		}
	}
	for pid, start := range q.Seeds {
		if seen[pid] {
			continue
		}
		if st, ok := w.Stat(pid); ok && (start == 0 || st.Start == start) {
			queue = append(queue, st)
			seen[pid] = true
		}
	}
	if q.Marker != "" {
		self, _ := w.Stat(q.Self)
		for _, c := range w.Children(self) {
			if seen[c] || q.Skip[c] || q.Exited != nil && q.Exited(c) {
				continue
			}
			if st, ok := w.Stat(c); ok && !st.Dead() && w.Marked(c, q.Marker) {
				queue = append(queue, st)
				seen[c] = true
			}
		}
	}
	var out []Stat
	for len(queue) > 0 {
		if budget >= 0 && len(seen) > budget {
			return nil, false
		}
		p := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		// A dead process is not reported: after a kill, one that is exiting has left its cgroup
		// but not yet become a zombie, and was counted as the slice's already. A zombie's children
		// went to its reaper as it died; an exiting process may not have handed its on yet.
		if p.Dead() {
			if p.State == 'Z' {
				continue
			}
		} else if !q.Known[p.Pid] {
			out = append(out, p)
		}
		for _, c := range w.Children(p) {
			if seen[c] {
				continue
			}
			if budget >= 0 && len(seen) > budget {
				return nil, false
			}
			seen[c] = true
			if st, ok := w.Stat(c); ok {
				queue = append(queue, st)
			}
		}
	}
	return out, true
}

// Descendants returns every live descendant of self. It follows the children files down from self,
// so it costs a read of the stat and the children of each descendant, however many processes the
// machine runs. Like any reading of /proc it is a snapshot: a child forked after its parent's children
// were read is missed. A caller that kills what it finds and waits for it to be gone loses nothing by
// that: the child of a killed parent is re-parented to self (a subreaper) before the parent is reported
// gone, and the next call finds it.
func (w *Walker) Descendants(self int) ([]Stat, error) {
	if _, ok := w.Stat(self); !ok {
		return nil, fmt.Errorf("reading /proc/%d/stat: process gone or /proc unreadable", self)
	}
	found, _ := w.tree(Query{Self: self, Seeds: map[int]uint64{self: 0}, Known: map[int]bool{self: true}}, -1)
	return found, nil
}

// Orphans returns the processes that carry marker among self's direct children (orphans adopted by
// self as subreaper, such as what a finished command left running), with their descendants. It reads
// only self's children and those subtrees, not all of /proc.
func (w *Walker) Orphans(self int, marker string) []Stat {
	found, _ := w.tree(Query{Self: self, Marker: marker}, -1)
	return found
}

// Children returns the children of the process st, from /proc/<pid>/task/<tid>/children of each of
// its threads (a child belongs to the thread that forked it, or that adopted it as subreaper).
func (w *Walker) Children(st Stat) []int {
	var out []int
	if st.Threads == 1 {
		return w.threadChildren(st.Pid, strconv.Itoa(st.Pid), out)
	}
	tids, _ := w.names(unix.AT_FDCWD, "/proc/"+strconv.Itoa(st.Pid)+"/task")
	for _, tid := range tids {
		out = w.threadChildren(st.Pid, tid, out)
	}
	return out
}

// Childless reports whether the process p (its pid and start time) has no child, live or a zombie,
// from the children file of each of its threads; ok is false when that cannot be told: p is gone or
// another process now, its start time is unknown, or a file could not be read (a thread that exits
// meanwhile hands its children to another, perhaps one already read).
//
// Every file is read through a descriptor of p's directory in /proc, which refers to p for as long as
// it is open: once p has been reaped its files can no longer be opened through it, whichever process
// has its pid by then. So one look at the start time tells that all of them were p's (and lookups
// relative to it are faster).
func (w *Walker) Childless(p Stat) (childless, ok bool) {
	if p.Start == 0 {
		return false, false
	}
	w.path = strconv.AppendInt(append(w.path[:0], "/proc/"...), int64(p.Pid), 10)
	dir, err := w.open(unix.AT_FDCWD, string(w.path), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return false, false
	}
	defer w.close(dir)
	b, read := w.readAt(dir, "stat", 0)
	if !read {
		return false, false
	}
	if st, parsed := ParseStat(p.Pid, b); !parsed || st.Start != p.Start {
		return false, false
	}
	tids, err := w.names(dir, "task")
	if err != nil || len(tids) == 0 {
		return false, false
	}
	for _, tid := range tids {
		// Whether the file is empty is all that counts: its first page tells.
		b, read := w.readAt(dir, "task/"+tid+"/children", 1)
		if !read {
			return false, false
		}
		if len(bytes.TrimSpace(b)) > 0 {
			return false, true
		}
	}
	return true, true
}

func (w *Walker) threadChildren(pid int, tid string, out []int) []int {
	b, ok := w.read(pid, "/task/"+tid+"/children", 0)
	if !ok {
		return out
	}
	v := 0
	for _, c := range b {
		if c >= '0' && c <= '9' {
			v = v*10 + int(c-'0')
		} else if v > 0 {
			out = append(out, v)
			v = 0
		}
	}
	return out
}

// machineProcs estimates the number of processes on the machine from /proc/loadavg (it counts
// threads, an upper bound), or returns 0.
func machineProcs() int {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return 0
	}
	_, total, _ := strings.Cut(f[3], "/")
	n, _ := strconv.Atoi(total)
	return n
}
