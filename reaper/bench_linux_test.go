package reaper

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/shell"
	"github.com/cgreaper/reaper/internal/testutil"
)

// BenchmarkSpawnTrue measures spawn-to-exit of `true` through a session (cgroup containment: a leaf
// per task, clone3 into it, the output pump, the working-directory trap) beside plain os/exec of the
// same shell command. os/exec's Wait and a Reaper's wait4 loop cannot share a process, so the two
// alternate in rounds of 50 within the run, os/exec while no Reaper exists; ratio is session over
// os/exec.
//
//	go test -run '^$' -bench BenchmarkSpawnTrue -benchtime 1000x ./reaper
func BenchmarkSpawnTrue(b *testing.B) {
	shell, err := shell.Find("")
	if err != nil {
		b.Fatal(err)
	}
	var plain, session time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(50, b.N-done)
		b.StopTimer()
		start := time.Now()
		for range n {
			if err := exec.Command(shell, "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
		plain += time.Since(start)
		r, err := New(Options{Containment: ContainCgroup, Cgroup: benchRoot(b), StateDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		s, err := r.NewSession("bench", SessionOptions{WorkDir: "/"})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start = time.Now()
		for range n {
			if res, err := s.Run(context.Background(), "true", RunOptions{}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		}
		session += time.Since(start)
		b.StopTimer()
		if err := r.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	b.ReportMetric(float64(plain.Microseconds())/float64(b.N), "exec-µs")
	b.ReportMetric(float64(session.Microseconds())/float64(b.N), "session-µs")
	b.ReportMetric(float64(session)/float64(plain), "ratio")
}

// benchRoot returns cgroup options for a uniquely named root, removed when the benchmark ends.
func benchRoot(b *testing.B) cgroup.Options {
	b.Helper()
	info := cgroup.Detect(cgroup.Options{})
	if os.Geteuid() != 0 || !info.Usable() {
		b.Skipf("skipped: needs root and a writable cgroup2 hierarchy: %s", info)
	}
	root := filepath.Join(info.Mountpoint, "reaper-bench-"+newID("")[:12])
	b.Cleanup(func() { os.Remove(root) })
	return cgroup.Options{Root: root}
}

// BenchmarkClose measures Session.Close of a session holding 10, 100 and 1000 sleeping processes
// (SIGTERM ends them, so the polite phase suffices; then the /proc walks and the slice's removal),
// beside the cgroup floor measured in the same run on an identical session: one write to the
// slice's cgroup.kill and a poll until cgroup.events reads "populated 0". ratio is close over floor.
// Each runs with and without a PID namespace per session (pidns=on, off): with one, Close also kills
// the session's init and waits for it, and the floor leaves the init alone.
//
//	go test -run '^$' -bench BenchmarkClose -benchtime 5x ./reaper
func BenchmarkClose(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		for _, ns := range []PIDNamespace{PIDNamespaceOn, PIDNamespaceOff} {
			b.Run(fmt.Sprintf("procs=%d/pidns=%s", n, ns), func(b *testing.B) {
				benchClose(b, n, ns)
			})
		}
	}
}

// BenchmarkCloseLarge is BenchmarkClose with 10,000 processes, reaper's default mode only: how the
// teardown grows past 1000 (issue 23). Filling a session takes seconds: run it once a round.
//
//	go test -run '^$' -bench BenchmarkCloseLarge -benchtime 1x ./reaper
func BenchmarkCloseLarge(b *testing.B) {
	b.Run("procs=10000/pidns=on", func(b *testing.B) { benchClose(b, 10000, PIDNamespaceOn) })
}

func benchClose(b *testing.B, n int, ns PIDNamespace) {
	r := newTestReaper(b, ContainCgroup, Options{Grace: new(5 * time.Second), PIDNamespace: ns})
	var floor, closing time.Duration
	for i := range b.N {
		b.StopTimer()
		s := fullSession(b, r, fmt.Sprintf("floor-%d", i), n)
		slice := s.slice.Path()
		start := time.Now()
		testutil.RawKill(b, slice)
		floor += time.Since(start)
		s.Close(context.Background())

		s = fullSession(b, r, fmt.Sprintf("close-%d", i), n)
		b.StartTimer()
		start = time.Now()
		rep, err := s.Close(context.Background())
		closing += time.Since(start)
		b.StopTimer()
		if err != nil || rep.Total() != n+1 {
			b.Fatalf("Close: %v, %v (want %d processes)", rep, err, n+1)
		}
	}
	b.ReportMetric(float64(floor.Microseconds())/1e3/float64(b.N), "floor-ms")
	b.ReportMetric(float64(closing.Microseconds())/1e3/float64(b.N), "close-ms")
	b.ReportMetric(float64(closing)/float64(floor), "ratio")
}

// fullSession returns a session whose one task left n sleeping processes and itself sleeps.
func fullSession(b testing.TB, r *Reaper, id string, n int) *Session {
	b.Helper()
	return sleepers(b, r, id, "i=0; while [ $i -lt "+strconv.Itoa(n)+" ]; do sleep 1000 & i=$((i+1)); done; exec sleep 1000", n)
}

// crowdedSession returns a session with n sleeping processes (n a multiple of 1000), in a tree three
// deep: the task's main process, a child per thousand, their thousand children each. One shell slows
// down as its job table grows (20,000 took over 100 s); a thousand each keeps it at about a second
// per thousand.
func crowdedSession(b *testing.B, r *Reaper, n int) *Session {
	b.Helper()
	groups := n / 1000
	return sleepers(b, r, "walk", "g=0; while [ $g -lt "+strconv.Itoa(groups)+" ]; do "+
		"( i=0; while [ $i -lt 1000 ]; do sleep 1000 & i=$((i+1)); done; exec sleep 1000 ) & g=$((g+1)); done; exec sleep 1000",
		n+groups)
}

// sleepers returns a session whose one task runs script, which must leave n processes besides its
// main process, all sleeping.
func sleepers(b testing.TB, r *Reaper, id, script string, n int) *Session {
	b.Helper()
	s, err := r.NewSession(id, SessionOptions{WorkDir: "/"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Start(script, ""); err != nil {
		b.Fatal(err)
	}
	// A shell forks about a thousand of them a second on a fast host, a hundred on a slow one: the
	// wait gives up only once no process has started for 30 s.
	seen, moved := 0, time.Now()
	for {
		s.mu.Lock()
		pids, _ := s.slice.Pids()
		s.mu.Unlock()
		if len(pids) == n+1 {
			break
		}
		if len(pids) > seen {
			seen, moved = len(pids), time.Now()
		}
		if time.Since(moved) > 30*time.Second {
			b.Fatalf("%d of %d processes started, none in the last 30 s", len(pids), n+1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// cgroup.events notifications come at most every 10 ms; let the one for "populated 1" pass.
	time.Sleep(20 * time.Millisecond)
	return s
}

// BenchmarkWalk measures the /proc walk of a teardown on a host with about 2,000 and about 20,000
// processes (that many sleeping ones started for it, below this process, beside the machine's own;
// see crowdedSession),
// beside a raw read of every /proc/<pid>/stat into one buffer in the same run. "slice" is the
// cgroup-containment walk before the kill (the slice's pids are listed, only processes outside it
// are read); "tree" is the process-containment walk (every descendant of the task is found by parent
// pid). ratio is walk over raw. 20,000 processes need that many free pids below pid_max and
// threads-max (the benchmark skips, saying so, where they are missing) and take 20 s (a fast host) to
// 3 minutes (a slow one) to start;
// they are killed with the Reaper at cleanup, and sleep at most 1000 s should that fail.
//
//	go test -run '^$' -bench BenchmarkWalk -benchtime 30x ./reaper
func BenchmarkWalk(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(fmt.Sprintf("procs=%d", n), func(b *testing.B) {
			requirePids(b, n)
			r := newTestReaper(b, ContainCgroup, Options{})
			s := crowdedSession(b, r, n)
			s.mu.Lock()
			var task *task
			for _, t := range s.tasks {
				task = t
			}
			pids, _ := s.slice.Pids()
			s.mu.Unlock()
			known := make(map[int]bool, len(pids))
			for _, p := range pids {
				known[p] = true
			}
			w := proc.NewWalker()
			for _, tc := range []struct {
				name string
				walk func() int
			}{
				{"slice", func() int {
					f, _ := w.Find(proc.Query{Self: r.pid, Trusted: known, Known: known, Marker: s.marker})
					return len(f)
				}},
				{"tree", func() int {
					f, _ := w.Find(proc.Query{Self: r.pid, Seeds: map[int]uint64{task.pid: task.start}, Marker: s.marker})
					return len(f)
				}},
			} {
				b.Run(tc.name, func(b *testing.B) {
					var raw, walk time.Duration
					var procs, found int
					for range b.N {
						start := time.Now()
						procs = rawStatRead(b)
						raw += time.Since(start)
						start = time.Now()
						found = tc.walk()
						walk += time.Since(start)
					}
					b.ReportMetric(float64(procs), "procs")
					b.ReportMetric(float64(found), "found")
					b.ReportMetric(float64(raw.Microseconds())/1e3/float64(b.N), "raw-ms")
					b.ReportMetric(float64(walk.Microseconds())/1e3/float64(b.N), "walk-ms")
					b.ReportMetric(float64(walk)/float64(raw), "ratio")
				})
			}
		})
	}
}

// requirePids skips the benchmark unless n more processes fit below the machine's pid_max and
// threads-max with a margin of 4096 for everything else running.
func requirePids(b *testing.B, n int) {
	b.Helper()
	read := func(file string) int {
		v, err := os.ReadFile(file)
		if err != nil {
			b.Skipf("skipped: %v", err)
		}
		i, _ := strconv.Atoi(strings.TrimSpace(string(v)))
		return i
	}
	load, err := os.ReadFile("/proc/loadavg") // field 4: runnable/total threads
	if err != nil {
		b.Skipf("skipped: %v", err)
	}
	_, total, _ := strings.Cut(strings.Fields(string(load))[3], "/")
	threads, _ := strconv.Atoi(total)
	for _, file := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		if limit := read(file); threads+n+4096 > limit {
			b.Skipf("skipped: %d more processes do not fit: %d threads run and %s is %d", n, threads, file, limit)
		}
	}
}

// rawStatRead reads every /proc/<pid>/stat into one buffer and returns how many it read.
func rawStatRead(b *testing.B) int {
	d, err := os.Open("/proc")
	if err != nil {
		b.Fatal(err)
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	buf := make([]byte, 4096)
	n := 0
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		fd, err := unix.Open("/proc/"+name+"/stat", unix.O_RDONLY, 0)
		if err != nil {
			continue
		}
		unix.Read(fd, buf)
		unix.Close(fd)
		n++
	}
	return n
}

// BenchmarkIdleSessionHeap measures the Go heap an idle session holds in this package: 1000 sessions
// that each ran one command (`echo hi`), beside 1000 sessions that ran nothing, in the same run
// (heap in use after two collections, divided by the sessions). ran-B/session is the figure,
// bare-B/session its baseline.
//
//	go test -run '^$' -bench BenchmarkIdleSessionHeap -benchtime 1x ./reaper
func BenchmarkIdleSessionHeap(b *testing.B) {
	const sessions = 1000
	r := newTestReaper(b, ContainCgroup, Options{})
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	perSession := func(run bool) float64 {
		h0 := heap()
		ss := make([]*Session, sessions)
		for i := range ss {
			s, err := r.NewSession(fmt.Sprintf("heap-%d", i), SessionOptions{WorkDir: "/"})
			if err != nil {
				b.Fatal(err)
			}
			if run {
				if res, err := s.Run(context.Background(), "echo hi", RunOptions{Timeout: time.Minute}); err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
			}
			ss[i] = s
		}
		h1 := heap()
		for _, s := range ss {
			if _, err := s.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		return (float64(h1) - float64(h0)) / sessions
	}
	var bare, ran float64
	for range b.N {
		bare += perSession(false)
		ran += perSession(true)
	}
	b.ReportMetric(ran/float64(b.N), "ran-B/session")
	b.ReportMetric(bare/float64(b.N), "bare-B/session")
}
