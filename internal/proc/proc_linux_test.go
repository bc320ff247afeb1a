package proc

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	// A command name may hold spaces and ')'; parsing starts after the last ')'.
	line := "4242 (a) b (c)) T 17 4242 4200 0 -1 4194564 0 0 0 0 0 0 0 0 20 0 3 0 987654 1000 200 18446744073709551615"
	st, ok := ParseStat(4242, []byte(line))
	want := Stat{Pid: 4242, PPid: 17, Pgid: 4242, Sid: 4200, Flags: 4194564, Threads: 3, Start: 987654, State: 'T'}
	if !ok || st != want {
		t.Errorf("ParseStat = %+v, %v; want %+v", st, ok, want)
	}
	if !st.Exiting() || st.Dead() {
		t.Errorf("flags %#x carry PF_EXITING with 3 threads: Exiting should be true, Dead false (the main thread exits alone)", st.Flags)
	}
	for _, bad := range []string{"", "12 (x", "12 (x) S 1 2", "12 (x) S 1 2 3 4 5 6 7 8 9 1 2 3 4 5 6 7 8 9 x"} {
		if st, ok := ParseStat(12, []byte(bad)); ok {
			t.Errorf("ParseStat(%q) = %+v, want failure", bad, st)
		}
	}
}

// start runs argv with env in a process group of its own and returns it; cleanup kills the whole
// group (the children a shell started too, which would outlive it otherwise) and waits for it.
func start(t testing.TB, env []string, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return cmd
}

// TestMarkerAnywhere: a marker buried behind megabytes of other variables is found, wherever it sits,
// and nothing that merely starts like it or is cut counts.
func TestMarkerAnywhere(t *testing.T) {
	filler := strings.Repeat("x", 100<<10)
	var env []string
	for i := range 15 { // 1.5 MB before the markers: within the kernel's 2 MB for an 8 MB stack
		env = append(env, "FILL"+strconv.Itoa(i)+"="+filler)
	}
	env = append(env, "REAPER_SESSION=other", "REAPER_SESSION=ours/s-1", "REAPER_TASK=t-1"+filler)
	// Not os/exec, which keeps only the last of duplicate keys.
	pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "1000"}, &syscall.ProcAttr{Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p, _ := os.FindProcess(pid)
		p.Kill()
		p.Wait()
	})
	w := NewWalker()
	// ForkExec returns once the exec is past its point of no return, before the kernel has placed
	// the environment in the new memory; a reader then sees it empty or not at all (scanEnv waits a
	// while, and TestMarkedDuringExec tests that). Here the process must be settled first: sleeping.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if st, ok := w.Stat(pid); ok && st.State == 'S' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never went to sleep", pid)
		}
	}
	for marker, want := range map[string]bool{
		"REAPER_SESSION=ours/s-1": true,  // not the first entry with that key
		"REAPER_SESSION=other":    true,  // the first
		"REAPER_SESSION=ours":     false, // a prefix of an entry
		"REAPER_SESSION=ours/s-":  false,
		"REAPER_TASK=t-1":         false, // an entry that goes on
		"FILL14=" + filler:        true,
	} {
		if got := w.Marked(pid, marker); got != want {
			t.Errorf("Marked(%.40q) = %v, want %v", marker, got, want)
		}
	}
	if v, ok := w.Env(pid, "REAPER_SESSION"); !ok || v != "other" {
		t.Errorf("Env(REAPER_SESSION) = %q, %v; want the first entry's value", v, ok)
	}
	if v, ok := w.Env(pid, "REAPER_TASK"); !ok || len(v) != maxValue {
		t.Errorf("Env(REAPER_TASK) = %d bytes, %v; want the value cut to %d bytes", len(v), ok, maxValue)
	}
	if _, ok := w.Env(pid, "MISSING"); ok {
		t.Error("Env found a variable that is not there")
	}
	if w.Marked(1<<30, "A=b") {
		t.Error("a pid that does not exist is marked")
	}
}

// TestMarkedDuringExec: an orphan read as soon as its parent exited, while it is inside execve,
// still shows its marker. The test process is the orphans' subreaper, as reaper is, for the test's
// length. Read once through one descriptor, one such orphan in six showed an empty environment.
func TestMarkedDuringExec(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	w := NewWalker()
	self, _ := w.Stat(os.Getpid())
	const rounds = 1000
	missed := 0
	for i := range rounds {
		marker := "E2E_EXEC=" + strconv.Itoa(i)
		cmd := exec.Command("bash", "-c", "sleep 1000 & exit 1")
		cmd.Env = []string{marker, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Run()
		orphans := w.Children(self)
		for _, pid := range orphans {
			if !w.Marked(pid, marker) {
				missed++
			}
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, pid := range orphans {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, 0, nil)
		}
		if len(orphans) != 1 {
			t.Fatalf("round %d: %d orphans adopted, want the shell's one child", i, len(orphans))
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d orphans read inside execve did not show their marker", missed, rounds)
	}
}

// TestHandles: a handle signals the process it was verified for, WaitGone sees it exit, and a
// handle whose start time does not match is not made.
func TestHandles(t *testing.T) {
	cmd := start(t, nil, "/bin/sleep", "1000")
	w := NewWalker()
	st, ok := w.Stat(cmd.Process.Pid)
	if !ok {
		t.Fatal("the sleep is gone")
	}
	stale := st
	stale.Start--
	if hs := w.Verify([]Stat{stale}); len(hs) != 0 {
		t.Errorf("Verify accepted a start time that does not match: %+v", hs)
	}
	hs := w.Verify([]Stat{st})
	defer CloseAll(hs)
	if len(hs) != 1 || !hs[0].HasFD() {
		t.Fatalf("Verify = %+v, want one handle with a pidfd", hs)
	}
	if alive := w.WaitGone(context.Background(), hs, time.Now().Add(10*time.Millisecond)); len(alive) != 1 {
		t.Fatalf("WaitGone before any signal = %v, want the process alive", alive)
	}
	if hs[0].Exited() {
		t.Fatal("Exited reports a live process as exited")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if alive := w.WaitGone(ctx, hs, time.Now().Add(time.Hour)); len(alive) != 1 {
		t.Fatalf("WaitGone with a cancelled context = %v, want it to return at once", alive)
	}
	if err := SignalAll(hs, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// A pidfd becomes readable when its process exits: a zombie counts, nobody need reap it first.
	if alive := w.WaitGone(context.Background(), hs, time.Now().Add(30*time.Second)); len(alive) != 0 {
		t.Fatalf("the killed process is still alive: %v", alive)
	}
	if !hs[0].Exited() {
		t.Error("Exited reports a killed process, seen gone, as alive")
	}
	if (Handle{Stat: st, fd: -1}).Exited() {
		t.Error("Exited without a pidfd claims to know")
	}
	// Signalling a process that is gone is not an error.
	if err := hs[0].Signal(unix.SIGKILL); err != nil {
		t.Errorf("signal to an exited process: %v", err)
	}
}

// TestFind builds two small trees below this process and finds their processes by seed, by thread
// and by marker, with the tree walk and with the scan of /proc alike.
func TestFind(t *testing.T) {
	// The first shell carries the marker; it starts one child that keeps it and one that clears its
	// environment. The second shell does not carry it and starts one child that gets it, and one that
	// does not.
	marked := start(t, []string{"PATH=/usr/bin:/bin", "MARK=yes"}, "/bin/sh", "-c", `sleep 1000 & env -i /bin/sleep 1001 & wait`)
	plain := start(t, []string{"PATH=/usr/bin:/bin"}, "/bin/sh", "-c", `MARK=yes sleep 1002 & sleep 1003 & wait`)
	w := NewWalker()
	self := unix.Getpid()
	// children waits until the shell has two children that are sleep (until then env(1) still
	// carries the marker it clears) and returns them, sorted.
	children := func(cmd *exec.Cmd) (Stat, []int) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, _ := w.Stat(cmd.Process.Pid)
			kids := w.Children(st)
			if len(kids) == 2 && Describe(kids[0]).Comm == "sleep" && Describe(kids[1]).Comm == "sleep" {
				slices.Sort(kids)
				return st, kids
			}
			if time.Now().After(deadline) {
				t.Fatalf("the shell's children did not appear: %v", kids)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	sh, kids := children(marked)
	sh2, kids2 := children(plain)
	sorted := func(ps ...int) []int { slices.Sort(ps); return ps }
	all := sorted(sh.Pid, kids[0], kids[1])
	markedKid := kids2[0]
	if !w.Marked(markedKid, "MARK=yes") {
		markedKid = kids2[1]
	}
	pids := func(ss []Stat) []int {
		out := make([]int, len(ss))
		for i, s := range ss {
			out[i] = s.Pid
		}
		return sorted(out...)
	}
	for _, tc := range []struct {
		name string
		q    Query
		want []int
	}{
		{"seed", Query{Self: self, Seeds: map[int]uint64{sh.Pid: sh.Start}}, all},
		{"stale seed", Query{Self: self, Seeds: map[int]uint64{sh.Pid: sh.Start + 1}}, []int{}},
		// A seed that is not below Self (a task forked into a PID namespace whose init is Self).
		{"seed elsewhere", Query{Self: sh2.Pid, Seeds: map[int]uint64{sh.Pid: sh.Start}}, all},
		{"trusted", Query{Self: self, Trusted: map[int]bool{sh.Pid: true}, Known: map[int]bool{sh.Pid: true}}, kids},
		// The marked shell with both its children (one cleared the marker but descends from it), and
		// the marked child of the other shell; not that shell, nor its other child.
		{"marker", Query{Self: self, Marker: "MARK=yes"}, sorted(sh.Pid, kids[0], kids[1], markedKid)},
		{"known", Query{Self: self, Seeds: map[int]uint64{sh.Pid: 0}, Known: map[int]bool{kids[0]: true}}, sorted(sh.Pid, kids[1])},
		{"skip", Query{Self: self, Seeds: map[int]uint64{sh2.Pid: 0}, Skip: map[int]bool{sh.Pid: true}, Marker: "MARK=yes"}, sorted(sh2.Pid, kids2[0], kids2[1])},
	} {
		tree, ok := w.tree(tc.q, -1)
		if !ok {
			t.Fatalf("%s: the tree walk gave up without a budget", tc.name)
		}
		scan, err := w.scan(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		found, err := w.Find(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		for how, got := range map[string][]Stat{"tree": tree, "scan": scan, "Find": found} {
			want := tc.want
			switch {
			case how == "scan" && tc.name == "skip":
				continue // Skip only spares the tree walk reading subtrees; the scan reads everything anyway
			case how != "scan" && tc.name == "marker" && !slices.Equal(pids(got), want):
				// The tree walk looks for the marker among Self's children only: it misses a marked
				// process whose parent is another live process of Self's (documented), and Find may
				// have walked the tree.
				want = slices.DeleteFunc(slices.Clone(want), func(p int) bool { return p == markedKid })
			}
			if g := pids(got); !slices.Equal(g, want) {
				t.Errorf("%s by %s = %v, want %v", tc.name, how, g, want)
			}
		}
	}
	// Descendants follows the children files; a scan of all of /proc must agree with it.
	d, err := w.Descendants(self)
	if err != nil || len(d) < 6 {
		t.Errorf("Descendants = %v, %v; want at least the two shells and their children", pids(d), err)
	}
	scanned, err := w.scan(Query{Self: self, Seeds: map[int]uint64{self: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if g, want := pids(d), pids(scanned); !slices.Equal(g, want) {
		t.Errorf("Descendants = %v, a scan of /proc found %v", g, want)
	}
	if _, err := w.Descendants(1 << 30); err == nil {
		t.Error("Descendants of a missing pid gave no error")
	}
}

func TestDescribe(t *testing.T) {
	cmd := start(t, nil, "/bin/sleep", "1000")
	p := Describe(cmd.Process.Pid)
	if p.Comm != "sleep" || p.State != "S" && p.State != "R" || p.Age < 0 || p.Age > time.Minute {
		t.Errorf("Describe = %+v", p)
	}
	if gone := Describe(1 << 30); gone.State != "?" {
		t.Errorf("Describe of a missing pid = %+v", gone)
	}
}

// TestCgroup: a process's cgroup v2 path is the "0::" line of its /proc/<pid>/cgroup; a process that
// is gone has none.
func TestCgroup(t *testing.T) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for line := range strings.Lines(string(b)) {
		if path, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "0::"); ok {
			want = path
		}
	}
	if want == "" {
		t.Skip("skipped: no cgroup v2 line in /proc/self/cgroup")
	}
	if got := Cgroup(os.Getpid()); got != want {
		t.Errorf("Cgroup(self) = %q, want %q", got, want)
	}
	if got := Cgroup(1 << 30); got != "" {
		t.Errorf("Cgroup of a missing pid = %q", got)
	}
}

// TestKernelThreadNotInExec: a kernel thread's env_start is always 0, the sign of a process inside
// execve; it must not be taken for one, or every read of its environment would wait maxExecWait.
func TestKernelThreadNotInExec(t *testing.T) {
	w := NewWalker()
	st, ok := w.Stat(2) // kthreadd, outside a PID namespace
	if !ok || st.Flags&pfKthread == 0 {
		t.Skip("skipped: pid 2 is not a kernel thread here (a PID namespace)")
	}
	b, _ := w.read(2, "/stat", 0)
	if v, ok := statField(b, 50); !ok || v != 0 {
		t.Skipf("skipped: this kernel shows env_start %d for a kernel thread", v)
	}
	if _, inExec := w.emptyEnv(2); inExec {
		t.Error("kthreadd was taken for a process inside execve")
	}
}

// TestCommandLineBounded: a process with 1 MiB of arguments is described by 512 bytes of them.
func TestCommandLineBounded(t *testing.T) {
	args := []string{"-c", "read x", "sh"}
	for range 16 {
		args = append(args, strings.Repeat("a", 64<<10)) // an argument is at most 128 KiB
	}
	cmd := exec.Command("/bin/sh", args...)
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	// Start returns once the exec is past its point of no return, which is before the kernel has
	// set up the new command line: until then it reads as empty.
	var got string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if got = CommandLine(cmd.Process.Pid); strings.HasPrefix(got, "/bin/sh") {
			break
		}
	}
	if len(got) != maxCmdline || !strings.HasPrefix(got, "/bin/sh -c read x sh aaa") || !strings.HasSuffix(got, "aaa...") {
		t.Errorf("CommandLine of 1 MiB of arguments: %d bytes: %.30q...%q", len(got), got, got[max(0, len(got)-10):])
	}
}

// TestChildless: a shell that has started a child is not childless, nor after the child has exited
// and before it is reaped (a zombie); a process without children is; and a process that is not the
// one named (another start time) cannot be told.
func TestChildless(t *testing.T) {
	w := NewWalker()
	dir := t.TempDir()
	// The shell starts a sleep, says so, and waits to be told to let it go (a zombie, as the shell
	// does not wait for it: it execs a sleep of its own after killing it).
	fifo := dir + "/go"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ready := dir + "/ready"
	shell := start(t, nil, "/bin/sh", "-c", `sleep 1000 & echo $! > `+ready+`.tmp; mv `+ready+`.tmp `+ready+`; read x < `+fifo+`; kill -9 $!; exec sleep 1000`)
	var kid int
	for deadline := time.Now().Add(30 * time.Second); kid == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the shell has not said its child's pid within 30 s")
		}
		b, _ := os.ReadFile(ready)
		kid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	st, ok := w.Stat(shell.Process.Pid)
	if !ok {
		t.Fatal("the shell's stat cannot be read")
	}
	if childless, ok := w.Childless(st); childless || !ok {
		t.Errorf("Childless of a shell with a running child = %v, %v; want false, true", childless, ok)
	}
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if k, ok := w.Stat(kid); ok && k.State == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed child is not a zombie within 30 s")
		}
	}
	if childless, ok := w.Childless(st); childless || !ok {
		t.Errorf("Childless of a process with a zombie child = %v, %v; want false, true", childless, ok)
	}
	lone := start(t, nil, "/bin/sleep", "1000")
	lst, _ := w.Stat(lone.Process.Pid)
	if childless, ok := w.Childless(lst); !childless || !ok {
		t.Errorf("Childless of a sleep = %v, %v; want true, true", childless, ok)
	}
	other := lst
	other.Start++
	if _, ok := w.Childless(other); ok {
		t.Error("Childless of a process with another start time could tell")
	}
	if _, ok := w.Childless(Stat{Pid: lst.Pid}); ok {
		t.Error("Childless without a start time could tell")
	}
}

// TestSignalWithoutPidfd: a handle that holds no pidfd (the descriptor limit refused one) signals
// only the process of its start time: it pins the pid with a pidfd for the moment and checks the start
// time through it, and never signals a bare pid that may have been reused.
func TestSignalWithoutPidfd(t *testing.T) {
	cmd := start(t, nil, "/bin/sleep", "1000")
	w := NewWalker()
	st, ok := w.Stat(cmd.Process.Pid)
	if !ok {
		t.Fatal("the sleep is gone")
	}
	other := st
	other.Start-- // as a reused pid would be: another process's start time
	if err := NewHandle(other, -1).Signal(unix.SIGKILL); err != nil {
		t.Errorf("a signal to a pid that is another process now: %v, want nothing done", err)
	}
	time.Sleep(50 * time.Millisecond)
	if now, ok := w.Stat(st.Pid); !ok || now.Start != st.Start || now.Dead() {
		t.Fatal("a handle of another start time killed the process")
	}
	if err := NewHandle(Stat{Pid: st.Pid}, -1).Signal(unix.SIGKILL); err == nil {
		t.Error("a handle without a pidfd and without a start time signalled: it cannot tell the process")
	}
	h := NewHandle(st, -1)
	if err := h.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if alive := w.WaitGone(context.Background(), []Handle{h}, time.Now().Add(30*time.Second)); len(alive) != 0 {
		t.Fatalf("the process its handle signalled is alive: %v", alive)
	}
}
