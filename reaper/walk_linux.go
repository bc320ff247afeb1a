package reaper

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// procStat is what the walk needs from /proc/<pid>/stat.
type procStat struct {
	pid, ppid int
	threads   int    // field 20
	start     uint64 // field 22: start time in clock ticks since boot; with pid, a process's identity
	state     byte
}

// walker reads /proc. It reuses its buffers, so one walker must not be used concurrently.
//
// It reads /proc/<pid>/stat with raw syscalls into one buffer instead of prometheus/procfs, which
// allocates a Proc and parses every field for each process: on a host with 2000 processes procfs took
// 55 ms per pass and raw reads 30 ms, and teardown may walk several times.
type walker struct {
	buf  []byte
	path []byte
}

func newWalker() *walker {
	return &walker{buf: make([]byte, 4096), path: make([]byte, 0, 64)}
}

// snapshot returns every process in /proc but those in skip, whose stat it does not read.
func (w *walker) snapshot(skip map[int]bool) ([]procStat, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]procStat, 0, len(names))
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil || skip[pid] {
			continue
		}
		if st, ok := w.stat(pid); ok {
			out = append(out, st)
		}
	}
	return out, nil
}

// stat reads one process's stat; ok is false if it is gone.
func (w *walker) stat(pid int) (procStat, bool) {
	b, ok := w.read(pid, "/stat", 0)
	if !ok {
		return procStat{}, false
	}
	return parseStat(pid, b)
}

// parseStat parses the fields after the command name, which may itself contain spaces and ')'.
func parseStat(pid int, b []byte) (procStat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procStat{}, false
	}
	st := procStat{pid: pid, state: b[i+2]}
	field := 3 // b[i+2] is field 3 (state)
	var v uint64
	for _, c := range b[i+3:] {
		if c == ' ' {
			switch field {
			case 4:
				st.ppid = int(v)
			case 20:
				st.threads = int(v)
			case 22:
				st.start = v
				return st, true
			}
			field++
			v = 0
			continue
		}
		v = v*10 + uint64(c-'0')
	}
	return procStat{}, false
}

// read reads /proc/<pid><file> into the walker's buffer, growing it up to max bytes (0: one page).
func (w *walker) read(pid int, file string, max int) ([]byte, bool) {
	w.path = append(strconv.AppendInt(append(w.path[:0], "/proc/"...), int64(pid), 10), file...)
	fd, err := unix.Open(string(w.path), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	n := 0
	for {
		k, err := unix.Read(fd, w.buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, false
		}
		if k == 0 {
			return w.buf[:n], true
		}
		n += k
		if n == len(w.buf) {
			if max > 0 && n >= max {
				return w.buf[:n], true
			}
			w.buf = append(w.buf, make([]byte, len(w.buf))...)
		}
	}
}

// marked reports whether pid's environment holds the exact entry marker ("KEY=value").
func (w *walker) marked(pid int, marker string) bool {
	key, _, _ := strings.Cut(marker, "=")
	v, ok := w.env(pid, key)
	return ok && key+"="+v == marker
}

// env returns the value of key in pid's environment. A process in the middle of execve may show an
// empty environment for an instant; an empty one is read again a few times before it is believed.
func (w *walker) env(pid int, key string) (string, bool) {
	var b []byte
	for try := 0; try < 3; try++ {
		var ok bool
		if b, ok = w.read(pid, "/environ", 1<<20); !ok {
			return "", false
		}
		if len(b) > 0 {
			break
		}
		time.Sleep(50 * time.Microsecond)
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			i = len(b)
		}
		if k, v, ok := bytes.Cut(b[:i], []byte{'='}); ok && string(k) == key {
			return string(v), true
		}
		b = b[min(i+1, len(b)):]
	}
	return "", false
}

// find returns the processes that belong to a scope but are not in known: every descendant (by
// parent pid) of a process in seeds (pid -> start time; a start time of 0 matches any) or in trusted,
// and every descendant of self whose environment carries marker. Only descendants of self are
// considered: as child subreaper, everything this program started stays below it even when its
// parents die. trusted are ids just listed in the scope's slice: members and descendants of self
// whose stat is not even read, so that a slice of a thousand processes costs only their listing.
// They may be thread ids (cgroup.threads): a process's pid is its main thread's id, and the ids of
// other threads match no process in /proc.
func (w *walker) find(self int, seeds map[int]uint64, trusted, known map[int]bool, marker string) ([]procStat, error) {
	procs, err := w.snapshot(trusted)
	if err != nil {
		return nil, err
	}
	kids := make(map[int][]int, len(procs))
	byPid := make(map[int]int, len(procs))
	for i, p := range procs {
		kids[p.ppid] = append(kids[p.ppid], i)
		byPid[p.pid] = i
	}
	// member: the seeds, the trusted, and their descendants.
	member := make(map[int]bool)
	var stack []int
	for pid := range trusted {
		stack = append(stack, kids[pid]...)
	}
	for pid, start := range seeds {
		if i, ok := byPid[pid]; ok && (start == 0 || procs[i].start == start) {
			stack = append(stack, i)
		}
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if member[procs[i].pid] {
			continue
		}
		member[procs[i].pid] = true
		stack = append(stack, kids[procs[i].pid]...)
	}
	var out []procStat
	stack = append(stack[:0], kids[self]...)
	for pid := range trusted {
		stack = append(stack, kids[pid]...)
	}
	visited := make(map[int]bool)
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		p := procs[i]
		if visited[p.pid] {
			continue
		}
		visited[p.pid] = true
		stack = append(stack, kids[p.pid]...)
		if known[p.pid] || p.state == 'Z' {
			continue
		}
		if member[p.pid] || marker != "" && w.marked(p.pid, marker) {
			out = append(out, p)
		}
	}
	return out, nil
}

// descendants returns every live descendant of self.
func (w *walker) descendants(self int) ([]procStat, error) {
	return w.find(self, map[int]uint64{self: 0}, nil, nil, "")
}

// children returns the children of the process st, from /proc/<pid>/task/<tid>/children of each
// of its threads (a child belongs to the thread that forked it, or that adopted it as subreaper).
func (w *walker) children(st procStat) []int {
	var out []int
	if st.threads == 1 {
		return w.threadChildren(st.pid, strconv.Itoa(st.pid), out)
	}
	w.path = strconv.AppendInt(append(w.path[:0], "/proc/"...), int64(st.pid), 10)
	d, err := os.Open(string(w.path) + "/task")
	if err != nil {
		return nil
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	for _, tid := range tids {
		out = w.threadChildren(st.pid, tid, out)
	}
	return out
}

func (w *walker) threadChildren(pid int, tid string, out []int) []int {
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

// selfStat describes this process for children().
func (w *walker) selfStat(self int) procStat {
	st, _ := w.stat(self)
	return st
}

// orphans returns the processes that carry marker among self's direct children (orphans adopted as
// subreaper, such as what a finished command left running), with their descendants. It reads only
// self's children and those subtrees, not all of /proc.
func (w *walker) orphans(self int, marker string) []int {
	found, _ := w.findTree(self, nil, nil, nil, nil, marker, -1)
	out := make([]int, len(found))
	for i, p := range found {
		out[i] = p.pid
	}
	return out
}

// findTree answers the same question as find, but reads only the subtrees that can hold members
// instead of every process in /proc: those of the seeds and of the trusted, and those of self's
// children that are not in skip (the Reaper's live task processes) and carry marker. trusted are
// thread ids just listed in the scope's slice (cgroup.threads): their stat is not read, only the
// children each thread forked or adopted; a trusted id is neither reported nor walked twice. It
// misses one case find covers, a marked process whose parent is some other live process of ours,
// which only a command that copies another session's marker can make. Reading a process's children
// costs about twice reading its stat, so it gives up (false) once it has read more than budget
// processes, and the caller scans instead; a negative budget means no limit.
func (w *walker) findTree(self int, seeds map[int]uint64, trusted, known, skip map[int]bool, marker string, budget int) ([]procStat, bool) {
	var queue []procStat
	seen := make(map[int]bool, len(trusted)+len(seeds))
	for tid := range trusted {
		seen[tid] = true
	}
	for tid := range trusted {
		for _, c := range w.threadChildren(tid, strconv.Itoa(tid), nil) {
			if seen[c] {
				continue
			}
			seen[c] = true
			if st, ok := w.stat(c); ok {
				queue = append(queue, st)
			}
		}
	}
	for pid, start := range seeds {
		if seen[pid] {
			continue
		}
		if st, ok := w.stat(pid); ok && (start == 0 || st.start == start) {
			queue = append(queue, st)
			seen[pid] = true
		}
	}
	if marker != "" {
		for _, c := range w.children(w.selfStat(self)) {
			if seen[c] || skip[c] {
				continue
			}
			if st, ok := w.stat(c); ok && st.state != 'Z' && w.marked(c, marker) {
				queue = append(queue, st)
				seen[c] = true
			}
		}
	}
	var out []procStat
	for len(queue) > 0 {
		if budget >= 0 && len(seen) > budget {
			return nil, false
		}
		p := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if p.state == 'Z' {
			continue
		}
		if !known[p.pid] {
			out = append(out, p)
		}
		for _, c := range w.children(p) {
			if seen[c] {
				continue
			}
			if budget >= 0 && len(seen) > budget {
				return nil, false
			}
			seen[c] = true
			if st, ok := w.stat(c); ok {
				queue = append(queue, st)
			}
		}
	}
	return out, true
}

// machineProcs estimates the number of processes on the machine from /proc/loadavg (it counts
// threads, an upper bound), or returns 0.
func (w *walker) machineProcs() int {
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

// findScope finds a scope's processes outside known the cheaper way. trusted are thread ids just
// listed in the scope's slice (see find and findTree). Walking the process tree reads one children
// file per trusted thread, and the stat and children of every other process it visits; scanning
// /proc reads the stat of every process on the machine but the trusted. The tree is walked when the
// trusted are fewer than the processes a scan would read, with a budget of a tenth of the scan for
// what is not trusted; past it the walk gives up and /proc is scanned, so a wrong guess costs at
// most about 20%. skip names processes that belong to the Reaper's other tasks.
func (w *walker) findScope(self int, seeds map[int]uint64, trusted, known, skip map[int]bool, marker string) ([]procStat, error) {
	scan := w.machineProcs() - len(trusted)
	if len(trusted) < scan {
		if found, ok := w.findTree(self, seeds, trusted, known, skip, marker, len(trusted)+max(scan/10, 8)); ok {
			return found, nil
		}
	}
	return w.find(self, seeds, trusted, known, marker)
}
