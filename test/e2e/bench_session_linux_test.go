package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/guard"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkSessionStart measures a whole stdio session as a client lives it: start the server,
// initialize, one bash call (`echo hi`), close. The client's Close closes the server's input and
// waits for it to exit, so the time includes reaper's whole start (the guard, the server it
// re-executes, the instance's slice) and its whole end (the session's teardown, the slice's removal,
// the guard's exit). It reports the total beside the lean server's, and also each phase: connect
// (start and initialize), call, close. "host" runs on the machine as it is; "crowded" with 2000 more
// sleeping processes on it (not the session's), which is how cost that grows with the machine's
// processes shows. Each runs with and without PID namespaces (pidns=on, off, and auto, the default,
// which gives them where they can be made): with them, the first call also starts the session's init,
// and the close kills it; the resident memory of that init (its Rss and Pss, read after the call) is
// reported too. cpu-ms is the CPU time a session's processes used, from the rusage of the server's
// exit, which counts every process it waited for: reaper's guard, server, init and task; the lean
// server and its task. unguarded-ms is the same session of reaper's server started by the benchmark
// as its guard would start it (unguardedCmd): the floor of a design in which the guard, a second Go
// program's start before the server's and its exit after, stands in series on a stdio session's
// path; unguarded-ratio is its ratio to the lean server.
//
//	go test -run '^$' -bench BenchmarkSessionStart -benchtime 50x ./test/e2e
func BenchmarkSessionStart(b *testing.B) {
	for _, crowd := range []int{0, 2000} {
		name := "host"
		if crowd > 0 {
			name = "crowded"
		}
		// auto, the default, decides namespaces by a probe that runs beside the start-up; on waits
		// for it before serving.
		for _, ns := range append(pidNSModes, "auto") {
			b.Run(name+"/pidns="+ns, func(b *testing.B) {
				if ns == "on" {
					needPIDNamespaces(b)
				}
				if crowd > 0 {
					crowdHost(b, crowd)
				}
				benchSessionStart(b, ns)
			})
		}
	}
}

func benchSessionStart(b *testing.B, ns string) {
	args := append(append([]string{"serve"}, benchPlace(b).args()...), "--pid-namespace", ns)
	var initRss, initPss, inits int
	leanPath := leanBin(b)
	type phases struct{ connect, call, close, cpu time.Duration }
	cycle := func(cmd *exec.Cmd) phases {
		var stderr testutil.Buffer
		cmd.Stderr = &stderr
		var p phases
		start := time.Now()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatalf("connect to %s: %v\n%s", cmd.Path, err, stderr.String())
		}
		p.connect = time.Since(start)
		d, res := timedCall(b, cs, "echo hi")
		if !strings.Contains(payload(res), "hi") {
			b.Fatalf("echo hi returned %q", textOf(res))
		}
		p.call = d
		if rss, pss, ok := sessionInitMemory(cmd.Process.Pid); ok {
			initRss, initPss, inits = initRss+rss, initPss+pss, inits+1
		}
		start = time.Now()
		cs.Close()
		p.close = time.Since(start)
		if !cmd.ProcessState.Success() {
			b.Fatalf("%s exited with %v\n%s", cmd.Path, cmd.ProcessState, stderr.String())
		}
		p.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return p
	}
	var lean, reaper, unguarded phases
	add := func(sum *phases, p phases) {
		sum.connect += p.connect
		sum.call += p.call
		sum.close += p.close
		sum.cpu += p.cpu
	}
	runLean := func() { add(&lean, cycle(exec.Command(leanPath))) }
	runReaper := func() { add(&reaper, cycle(reaperCmd(args...))) }
	runUnguarded := func() {
		cmd, done := unguardedCmd(b, args...)
		defer done()
		add(&unguarded, cycle(cmd))
	}
	runLean()
	runReaper()
	runUnguarded()
	lean, reaper, unguarded = phases{}, phases{}, phases{}
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			runLean()
			runReaper()
			runUnguarded()
		} else {
			runUnguarded()
			runReaper()
			runLean()
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(b.N) }
	b.ReportMetric(ms(reaper.connect), "reaper-connect-ms")
	b.ReportMetric(ms(lean.connect), "lean-connect-ms")
	b.ReportMetric(ms(reaper.call), "reaper-call-ms")
	b.ReportMetric(ms(lean.call), "lean-call-ms")
	b.ReportMetric(ms(reaper.close), "reaper-close-ms")
	b.ReportMetric(ms(lean.close), "lean-close-ms")
	b.ReportMetric(ms(reaper.cpu), "reaper-cpu-ms")
	b.ReportMetric(ms(lean.cpu), "lean-cpu-ms")
	reportPair(b, "ms", reaper.connect+reaper.call+reaper.close, lean.connect+lean.call+lean.close)
	b.ReportMetric(ms(unguarded.connect+unguarded.call+unguarded.close), "unguarded-ms")
	b.ReportMetric(float64(unguarded.connect+unguarded.call+unguarded.close)/float64(lean.connect+lean.call+lean.close), "unguarded-ratio")
	if inits > 0 {
		b.ReportMetric(float64(initRss)/float64(inits), "init-rss-KiB")
		b.ReportMetric(float64(initPss)/float64(inits), "init-pss-KiB")
	}
}

// unguardedCmd returns the command of reaper's server started as its guard would start it (see
// internal/guard), by the benchmark itself: in a session of its own, with the benchmark's pid as its
// guard's and a pipe for its announcements, which done closes once the server has exited. It
// measures what a session costs without the guard's own start and end; it is no way to run reaper,
// whose guard the server's orphans and a crash's clean-up need.
func unguardedCmd(b *testing.B, args ...string) (cmd *exec.Cmd, done func()) {
	b.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd = reaperCmd(args...)
	cmd.Env = append(os.Environ(), guard.EnvPid+"="+strconv.Itoa(os.Getpid()), guard.EnvFD+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: guard.Signal}
	return cmd, func() {
		w.Close()
		r.Close()
	}
}

// sessionInitMemory returns the resident memory (Rss, and Pss: shared pages divided among those that
// map them, as the init shares the binary's with the server) of the init of a session's PID namespace
// below guard, in KiB; ok is false where there is none (a lean server, or no namespace).
func sessionInitMemory(guard int) (rss, pss int, ok bool) {
	inits := initsOf([]int{childOf(guard)})
	if len(inits) == 0 {
		return 0, 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(inits[0]) + "/smaps_rollup")
	if err != nil {
		return 0, 0, false
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "Rss:" {
			rss, _ = strconv.Atoi(f[1])
		} else if len(f) >= 2 && f[0] == "Pss:" {
			pss, _ = strconv.Atoi(f[1])
		}
	}
	return rss, pss, true
}

// childrenOf returns pid's children, from every thread's children file; childOf the first of them.
func childrenOf(pid int) []int {
	var out []int
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			out = append(out, n)
		}
	}
	return out
}

func childOf(pid int) int {
	if c := childrenOf(pid); len(c) > 0 {
		return c[0]
	}
	return 0
}

// crowdHost starts n sleeping processes, children of one shell in a process group of its own, and
// waits until they all run; cleanup kills the group. They stand for the rest of a busy machine: no
// server under benchmark starts or owns them.
func crowdHost(b *testing.B, n int) {
	b.Helper()
	cmd := exec.Command("bash", "-c", "i=0; while [ $i -lt "+strconv.Itoa(n)+" ]; do sleep 1000 & i=$((i+1)); done; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	children := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children"
	testutil.Eventually(b, "the crowd", func() bool {
		c, _ := os.ReadFile(children)
		return len(strings.Fields(string(c))) >= n
	})
}

// BenchmarkTaskOutput measures reading finished background tasks over stdio: ten tasks of 24 KB
// each ("ten"), one of 1 MB ("1MB", below both servers' output limits of 1 MiB: reaper's
// --max-output is set to its ceiling, 1 MiB, for the comparison) and one of 2 MB ("2MB", over them:
// the client reads 1 MiB of it; reaper keeps all of it in the task's file, the lean server its head).
// In each iteration the tasks are started and left to finish (untimed); then the client reads each
// task with task_output until all that the server keeps of it has arrived, and the time and the
// number of calls are what is measured, beside the same with the lean server, whose task_output
// returns all new output in one read. ratio is of the times; reaper-calls and lean-calls are calls
// per iteration. More than one call per task to reaper fails the benchmark.
//
//	go test -run '^$' -bench BenchmarkTaskOutput -benchtime 30x ./test/e2e
func BenchmarkTaskOutput(b *testing.B) {
	const kept = 1 << 20 // the output both servers return of a task
	for _, tc := range []struct {
		name        string
		tasks, size int
	}{{"ten", 10, 24 << 10}, {"1MB", 1, 1000 * 1000}, {"2MB", 1, 2000 * 1000}} {
		want := min(tc.size, kept)
		b.Run(tc.name, func(b *testing.B) {
			r, l := benchPair(b, "stdio", "--max-output", "1048576")
			reaper, lean := r.cs, l.cs
			dir := b.TempDir()
			round := 0
			// read starts the tasks, waits for them to finish, then reads them all and returns the
			// time the reads took and how many calls they needed.
			read := func(cs *mcp.ClientSession) (time.Duration, int) {
				round++
				ids := make([]string, tc.tasks)
				var markers []string
				for i := range ids {
					marker := filepath.Join(dir, strconv.Itoa(round)+"-"+strconv.Itoa(i))
					markers = append(markers, marker)
					_, res := timedTool(b, cs, "bash", "command", filler(tc.size)+"; touch "+marker, "run_in_background", true)
					ids[i] = taskID(b, res)
				}
				testutil.Eventually(b, "the tasks' ends", func() bool {
					for _, m := range markers {
						if _, err := os.Stat(m); err != nil {
							return false
						}
					}
					return true
				})
				time.Sleep(50 * time.Millisecond) // the shells exit after touch
				calls := 0
				start := time.Now()
				for _, id := range ids {
					got := 0
					for got < want {
						calls++
						_, res := timedTool(b, cs, "task_output", "task_id", id)
						got += strings.Count(payload(res), "~")
						if calls > 10*tc.tasks {
							b.Fatalf("task %s: %d of %d bytes after %d calls", id, got, want, calls)
						}
					}
				}
				return time.Since(start), calls
			}
			read(reaper)
			read(lean)
			var cl, cr int
			timeLean := func() time.Duration { d, c := read(lean); cl += c; return d }
			timeReaper := func() time.Duration { d, c := read(reaper); cr += c; return d }
			tl, tr := alternated(b, timeLean, timeReaper)
			if cr > b.N*tc.tasks {
				// Issue 14: a finished task's output, up to the output limit, comes back in one read.
				b.Errorf("reaper needed %d calls for %d tasks in %d iterations: more than one per task", cr, tc.tasks, b.N)
			}
			b.ReportMetric(float64(cr)/float64(b.N), "reaper-calls")
			b.ReportMetric(float64(cl)/float64(b.N), "lean-calls")
			reportPair(b, "ms", tr, tl)
		})
	}
}

// taskID finds the id of the task a background bash call started: the structured task_id where the
// server sends one, else the last word of the text ("started task t3").
func taskID(b testing.TB, res *mcp.CallToolResult) string {
	b.Helper()
	if m, ok := res.StructuredContent.(map[string]any); ok {
		if id, ok := m["task_id"].(string); ok && id != "" {
			return id
		}
	}
	f := strings.Fields(textOf(res))
	if len(f) == 0 {
		b.Fatalf("no task id in %q", textOf(res))
	}
	return strings.TrimSuffix(f[len(f)-1], ".")
}
