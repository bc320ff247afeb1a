package testutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
)

// Proc is a process identified by pid and start time, so that a reused pid is never mistaken for it.
type Proc struct {
	Pid   int
	Start uint64
}

func (p Proc) String() string { return strconv.Itoa(p.Pid) }

// ProcOf identifies pid by its start time now; ok is false if it is gone or already dead.
func ProcOf(pid int) (Proc, bool) {
	st, ok := proc.NewWalker().Stat(pid)
	if !ok || st.Dead() {
		return Proc{}, false
	}
	return Proc{Pid: pid, Start: st.Start}, true
}

// Running reports whether p still runs: it exists with the same start time, is not a zombie, and is
// not exiting. A process with PF_EXITING counts as dead: a killed process leaves its cgroup inside
// do_exit, after its memory and files are released but before it becomes a zombie, so a cgroup can
// report "populated 0" while such a process still shows state R; it never runs user code again.
func Running(p Proc) bool {
	st, ok := proc.NewWalker().Stat(p.Pid)
	return ok && st.Start == p.Start && !st.Dead()
}

// KillPending reports whether pid's first thread has SIGKILL pending: it is as good as dead (it never
// runs user code again), but on a busy machine it may wait to be scheduled to die after whatever
// killed it is done. See killIn.
func KillPending(pid int) bool {
	status, ok := readStatus(pid)
	return ok && killIn(status)
}

// killIn reports whether status, as /proc/<pid>/status reads, has SIGKILL pending for the thread or
// its thread group: in SigPnd or ShdPnd, hexadecimal masks with signal n at bit n-1.
func killIn(status string) bool {
	for _, name := range []string{"SigPnd", "ShdPnd"} {
		v, _ := statusField(status, name)
		if m, err := strconv.ParseUint(v, 16, 64); err == nil && m&(1<<(9-1)) != 0 {
			return true
		}
	}
	return false
}

// StatusField returns field name of /proc/<id>/status (id a process's or a thread's), its value
// trimmed ("4096 kB" for VmHWM); ok is false if the process or the field is missing.
func StatusField(id int, name string) (string, bool) {
	status, ok := readStatus(id)
	if !ok {
		return "", false
	}
	return statusField(status, name)
}

// readStatus returns /proc/<id>/status; ok is false once the process or thread is gone.
func readStatus(id int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(id) + "/status")
	return string(b), err == nil
}

// IsInit reports whether pid is the init of a reaper session's PID namespace, by its command line.
func IsInit(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return pidns.IsInit(strings.Split(string(b), "\x00"))
}

// statusField returns field name of status, as /proc/<pid>/status reads, trimmed.
func statusField(status, name string) (string, bool) {
	for line := range strings.Lines(status) {
		if k, v, ok := strings.Cut(line, ":"); ok && k == name {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// PidsIn identifies every whitespace-separated field of output that is a number as a process, now;
// it fails the test if one is already gone. A field that names a PID namespace, as ShowNS prints it
// ("pid:[4026532…]"), says that the numbers are pids in that namespace (a reaper session's): each is
// identified as this process sees it.
func PidsIn(t testing.TB, output string) []Proc {
	t.Helper()
	return PidsInNS(t, NSIn(output), output)
}

// ShowNS is shell code that prints the PID namespace of the shell running it, for PidsIn: a command
// of a reaper session that prints pids adds it.
const ShowNS = "readlink /proc/$$/ns/pid"

// Alive returns the processes of ps that still run.
func Alive(ps []Proc) []Proc {
	var out []Proc
	for _, p := range ps {
		if Running(p) {
			out = append(out, p)
		}
	}
	return out
}

// AssertDead fails the test for each process of ps that still runs.
func AssertDead(t testing.TB, ps []Proc) {
	t.Helper()
	for _, p := range Alive(ps) {
		t.Errorf("pid %d survived: %s", p.Pid, proc.Describe(p.Pid))
	}
}

// AwaitDead polls until every process of ps is dead and returns how long that took, failing the test
// if one still runs after within (stretched by Slow).
func AwaitDead(t testing.TB, ps []Proc, within time.Duration) time.Duration {
	t.Helper()
	within = Slow(within)
	start := time.Now()
	for {
		alive := Alive(ps)
		if len(alive) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("still running %v after %v: %v", within, time.Since(start), alive)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Eventually polls cond until it holds, failing the test after a generous deadline (30 s, stretched by
// Slow).
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Slow(30 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// AwaitLines returns shell code that waits, polling for up to 30 s (stretched by Slow), until file
// holds n lines, and then prints it. A foreground command that starts processes in the background
// ends with it, and each of those appends its pid to file once it is ready (its trap set, say): the
// command then returns only when they all are, instead of sleeping for a guessed while.
func AwaitLines(file string, n int) string {
	q := "'" + strings.ReplaceAll(file, "'", `'\''`) + "'"
	polls := Slow(30*time.Second) / (10 * time.Millisecond)
	return fmt.Sprintf(`__i=0; while [ $__i -lt %[3]d ] && [ "$(wc -l < %[1]s 2>/dev/null || echo 0)" -lt %[2]d ]; do sleep 0.01; __i=$((__i+1)); done; cat %[1]s`, q, n, polls)
}

// NSOf returns the PID namespace of pid as its /proc/<pid>/ns/pid link reads ("pid:[4026531836]"),
// or "" if it is gone.
func NSOf(pid int) string {
	s, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	return s
}

// HostPids maps the pids of the processes in the PID namespace ns (as NSOf names it) to their pids as
// this process sees them: a task of a reaper session prints its pids as its namespace numbers them.
// For this process's own namespace, or an empty ns, it returns nil: the pids are the same. It reads
// every process's namespace link and, for those in ns, its status. A zombie's link cannot be read: it
// counts as in ns when its parent is.
func HostPids(ns string) map[int]int {
	if ns == "" || ns == NSOf(os.Getpid()) {
		return nil
	}
	out := map[int]int{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		own := NSOf(pid)
		if own != "" && own != ns {
			continue
		}
		b, _ := os.ReadFile("/proc/" + d.Name() + "/status")
		v, _ := statusField(string(b), "NSpid")
		nspid := strings.Fields(v)
		v, _ = statusField(string(b), "PPid")
		ppid, _ := strconv.Atoi(v)
		if len(nspid) < 2 || own == "" && NSOf(ppid) != ns {
			continue
		}
		if n, err := strconv.Atoi(nspid[len(nspid)-1]); err == nil {
			out[n] = pid
		}
	}
	return out
}

// HostPid returns the pid, as this process sees it, of the process that is nspid in the PID
// namespace ns (see HostPids).
func HostPid(ns string, nspid int) (int, bool) {
	m := HostPids(ns)
	if m == nil {
		return nspid, true
	}
	pid, ok := m[nspid]
	return pid, ok
}

// PidsInNS is PidsIn for pids printed inside the PID namespace ns: each is identified as this process
// sees it. An empty ns is this process's own.
//
// It also holds ns open until the test ends. The kernel gives a freed namespace's inode number to
// the next namespace made, and NSOf names a namespace by that number: unpinned, a later HostPids(ns)
// of this test, made once the session's namespace is gone, would map its pids through another
// test's live namespace and take that test's processes for survivors.
func PidsInNS(t testing.TB, ns, output string) []Proc {
	t.Helper()
	hosts := HostPids(ns)
	if hosts != nil {
		pinNS(t, ns, hosts)
	}
	var out []Proc
	for _, f := range strings.Fields(output) {
		nspid, err := strconv.Atoi(f)
		if err != nil || nspid <= 0 {
			continue
		}
		pid, ok := nspid, true
		if hosts != nil {
			pid, ok = hosts[nspid]
		}
		p, alive := ProcOf(pid)
		if !ok || !alive {
			t.Fatalf("pid %d printed by the command (in %s) is already gone", nspid, cmpOr(ns, "this process's PID namespace"))
		}
		out = append(out, p)
	}
	return out
}

// NSIn returns the last PID namespace named in text as ShowNS prints it, or "".
func NSIn(text string) string {
	ns := ""
	for _, f := range strings.Fields(text) {
		if strings.HasPrefix(f, "pid:[") {
			ns = f
		}
	}
	return ns
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// PinNS returns HostPids(ns) and holds the PID namespace ns open until the test ends, as PidsInNS
// does, so that its name stays its own (see PidsInNS) for a test that reads pids printed there after
// the namespace may have died. It holds nothing for this process's namespace or once ns has no
// process left.
func PinNS(t testing.TB, ns string) map[int]int {
	t.Helper()
	hosts := HostPids(ns)
	if hosts != nil {
		pinNS(t, ns, hosts)
	}
	return hosts
}

// pinNS opens the namespace ns through one of its processes (hosts maps their pids, as HostPids
// does) and closes it when the test ends. With none of them left, nothing needs it held.
func pinNS(t testing.TB, ns string, hosts map[int]int) {
	t.Helper()
	for _, pid := range hosts {
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/pid")
		if err != nil {
			continue // gone meanwhile
		}
		// The pid may have been reused between HostPids and the open: name what was opened.
		if got, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); got != ns {
			f.Close()
			continue
		}
		t.Cleanup(func() { f.Close() })
		return
	}
}
