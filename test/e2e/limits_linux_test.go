package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Per-session limits on a host whose cgroup2 root enables the controllers for its children, as
// systemd hosts do: this development machine's hybrid cgroup2 offers none of them, so these tests
// skip here and run in the VM lane's guests (test/vm). Each asserts counts and bytes the kernel
// keeps in the session's slice, not times.

func init() {
	// alloc allocates E2E_ALLOC_MIB MiB a MiB at a time, writing every page, and says how far it got.
	helpers["alloc"] = func() int {
		n, _ := strconv.Atoi(os.Getenv("E2E_ALLOC_MIB"))
		var held [][]byte
		for i := 1; i <= n; i++ {
			b := make([]byte, 1<<20)
			for j := range len(b) / 4096 {
				b[j*4096] = 1
			}
			held = append(held, b)
			if i%16 == 0 {
				fmt.Println("allocated", i, "MiB")
			}
		}
		fmt.Println("allocated all", len(held), "MiB")
		return 0
	}
}

// limitedPlace returns a cgroup placement for reaper with per-session limits, skipping the test
// where the host's cgroup2 root does not enable each of controllers for its children: reaper never
// enables a controller on the machine's true root, so without that the limits cannot be applied.
func limitedPlace(t *testing.T, controllers ...string) placement {
	t.Helper()
	pl := place(t, "cgroup")
	parent := filepath.Dir(pl.root)
	b, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range controllers {
		if !slices.Contains(strings.Fields(string(b)), c) {
			t.Skipf("skipped: the cgroup2 root %s does not enable the %s controller for its children (subtree_control: %q); "+
				"a unified host does (test/vm runs this test on two)", parent, c, strings.TrimSpace(string(b)))
		}
	}
	return pl
}

// sessionSlice returns the cgroup directory of the one session that runs under pl.
func sessionSlice(t *testing.T, pl placement) string {
	t.Helper()
	var slices []string
	testutil.Eventually(t, "one session's slice", func() bool {
		slices, _ = filepath.Glob(filepath.Join(pl.root, "r*", "s-*"))
		return len(slices) == 1
	})
	return slices[0]
}

// cgroupValue returns the value of key in a flat-keyed cgroup file (memory.events, cpu.stat, ...).
func cgroupValue(t *testing.T, dir, file, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s/%s: %q", dir, file, line)
			}
			return n
		}
	}
	t.Fatalf("%s/%s has no %s:\n%s", dir, file, key, b)
	return 0
}

// subtreeSum adds up key of file in dir and every cgroup below it: the kernel counts some events
// (pids.events max, before Linux 6.2) in the cgroup of the process they happened to, a leaf below a
// session's slice.
func subtreeSum(t *testing.T, dir, file, key string) int64 {
	t.Helper()
	var sum int64
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(path, file)) // a leaf may go meanwhile
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+" "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				sum += n
			}
		}
		return nil
	})
	return sum
}

// cgroupFile returns a one-value cgroup file's content, trimmed.
func cgroupFile(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// endSession closes cs and waits until the processes ps are dead and the session's slice is gone.
func endSession(t *testing.T, cs *mcp.ClientSession, ps []testutil.Proc, slice string) {
	t.Helper()
	cs.Close()
	testutil.AwaitDead(t, ps, 30*time.Second)
	testutil.Eventually(t, "the session's slice to go", func() bool {
		_, err := os.Stat(slice)
		return os.IsNotExist(err)
	})
}

// usageReports are where reaper reports what a session used and the limits it hit, besides the
// results of its commands: `reaper ps`, /metrics and the session's end line.
type usageReports struct {
	pl     placement
	stderr *testutil.Buffer
	admin  string // the admin endpoint's base URL
}

// connectLimited starts a stdio reaper under pl, in cgroup containment with its admin endpoint and
// the limits given as flags, and connects to it.
func connectLimited(t *testing.T, pl placement, limits ...string) (*mcp.ClientSession, *exec.Cmd, usageReports) {
	t.Helper()
	args := append(pl.args(), "--containment", "cgroup", "--admin", "127.0.0.1:0")
	cs, cmd, stderr := connectStdio(t, append(args, limits...)...)
	u := usageReports{pl: pl, stderr: stderr}
	testutil.Eventually(t, "the admin endpoint in the start-up line", func() bool {
		line, _ := testutil.LogLine(stderr.String(), "reaper serving MCP over stdio")
		u.admin = line["admin"]
		return u.admin != ""
	})
	return cs, cmd, u
}

// ps returns what `reaper ps --json` says the one live session used.
func (u usageReports) ps(t *testing.T) psUsage {
	t.Helper()
	in := reaperPs(t, u.pl.args()...)
	if len(in.Instances) != 1 || len(in.Instances[0].Sessions) != 1 || in.Instances[0].Sessions[0].Usage == nil {
		t.Fatalf("reaper ps: want one instance with one session whose usage is counted: %+v", in)
	}
	usage := in.Instances[0].Sessions[0].Usage
	b, _ := json.Marshal(usage)
	t.Logf("reaper ps: the session's usage: %s", b)
	return *usage
}

// metric waits until the series on /metrics reaches least, and returns it.
func (u usageReports) metric(t *testing.T, series string, least float64) float64 {
	t.Helper()
	return awaitSample(t, u.admin, series, atLeast(least))
}

// ended returns the number key of the session's end line, once reaper has logged it.
func (u usageReports) ended(t *testing.T, key string) float64 {
	t.Helper()
	var line map[string]string
	testutil.Eventually(t, "the session's end line", func() bool {
		line, _ = testutil.LogLine(u.stderr.String(), "session ended")
		return line != nil
	})
	v, err := strconv.ParseFloat(line[key], 64)
	if err != nil {
		t.Fatalf("the session's end line has no number %s: %v", key, line)
	}
	return v
}

// value returns *p, failing the test where it is absent (what it counts is not counted).
func value[T int64 | float64](t *testing.T, what string, p *T) T {
	t.Helper()
	if p == nil {
		t.Fatalf("reaper ps gives no %s", what)
	}
	return *p
}

// TestSessionMemoryMax: with --memory-max 64M, a command that allocates 300 MiB is killed by the
// OOM killer within its session's slice. The result says so and names the limit; the slice's
// memory.events counts the kill; reaper and the session serve on, and the session's end leaves
// nothing. reaper ps, /metrics and the end line count the kill and the memory's peak.
func TestSessionMemoryMax(t *testing.T) {
	pl := limitedPlace(t, "memory")
	cs, cmd, rep := connectLimited(t, pl, "--memory-max", "64M")
	stderr := rep.stderr
	var ours []testutil.Proc // reaper's guard and server: outside the session's slice, no OOM kill may reach them
	for _, pid := range []int{cmd.Process.Pid, serverOf(t, cmd.Process.Pid)} {
		if p, ok := testutil.ProcOf(pid); ok {
			ours = append(ours, p)
		}
	}
	res := mcptest.Call(t, cs, "bash", map[string]any{"command": testutil.HelperEnv("alloc") + " E2E_ALLOC_MIB=300 " + strconv.Quote(os.Args[0])})
	var r bashResult
	decode(t, res, &r)
	text := textOf(res)
	slice := sessionSlice(t, pl)
	t.Logf("result: %s", text)
	if got := cgroupFile(t, slice, "memory.max"); got != strconv.Itoa(64<<20) {
		t.Errorf("the session's memory.max is %s, want %d", got, 64<<20)
	}
	if strings.Contains(r.Output, "allocated all") {
		t.Fatalf("the allocation of 300 MiB went through under a limit of 64 MiB:\n%s", text)
	}
	if !r.OOMKilled {
		t.Errorf("the allocation's result does not say oom_killed: %+v", r)
	}
	if want := "killed by the out-of-memory killer: this session's processes together reached its memory limit of 64 MiB"; !strings.Contains(text, want) {
		t.Errorf("the result does not say %q:\n%s", want, text)
	}
	if n := cgroupValue(t, slice, "memory.events", "oom_kill"); n < 1 {
		t.Errorf("the session's memory.events counts %d OOM kills, want at least 1", n)
	}
	if peak, err := os.ReadFile(filepath.Join(slice, "memory.peak")); err == nil { // Linux 5.19 and later
		t.Logf("the session's memory.peak: %s bytes", strings.TrimSpace(string(peak)))
	}
	if len(ours) != 2 || len(testutil.Alive(ours)) != 2 {
		t.Fatalf("reaper's guard and server %v: alive %v after its session's OOM kill:\n%s", ours, testutil.Alive(ours), stderr)
	}
	if r := bash(t, cs, "echo still serving"); r.Output != "still serving\n" {
		t.Errorf("after the OOM kill: %+v", r)
	}
	// The allocation got at least half way to the limit before the kill, and no further than a
	// little past it (the kernel charges a page before it reclaims or kills: 4 KiB past, seen).
	u := rep.ps(t)
	if n := value(t, "oom_kills", u.OOMKills); n < 1 {
		t.Errorf("reaper ps counts %d OOM kills, want at least 1", n)
	}
	if peak := value(t, "memory_peak_bytes", u.MemoryPeakBytes); peak < 32<<20 || peak > 65<<20 {
		t.Errorf("reaper ps gives a memory peak of %d bytes, want between 32 MiB and about the limit, 64 MiB", peak)
	}
	if m := value(t, "memory_max_bytes", u.MemoryMaxBytes); m != 64<<20 || u.CPUSeconds <= 0 {
		t.Errorf("reaper ps gives a memory limit of %d bytes and %v s of CPU", m, u.CPUSeconds)
	}
	rep.metric(t, "reaper_session_oom_kills_total", 1)
	rep.metric(t, "reaper_session_memory_peak_largest_bytes", 32<<20)
	endSession(t, cs, nil, slice)
	if n := rep.ended(t, "oom_kills"); n < 1 {
		t.Errorf("the session's end line counts %v OOM kills, want at least 1", n)
	}
	if peak := rep.ended(t, "memory_peak_bytes"); peak < 32<<20 {
		t.Errorf("the session's end line gives a memory peak of %v bytes, want at least 32 MiB", peak)
	}
}

// TestSessionPidsMax: with --pids-max 64, a fork loop stops at the limit: the loop's shell cannot
// fork (dash gives up at the first refusal), the slice never holds more than 64 processes, and its
// pids.events counts the refusals; so do the loop's result, reaper ps, /metrics and the session's end
// line. The session's end kills what the loop started.
func TestSessionPidsMax(t *testing.T) {
	pl := limitedPlace(t, "pids")
	cs, _, rep := connectLimited(t, pl, "--pids-max", "64")
	f := filepath.Join(t.TempDir(), "pids")
	res := mcptest.Call(t, cs, "bash", map[string]any{"command": fmt.Sprintf(`/bin/dash -c 'while :; do sleep 1000 & echo $! >> %s; done' 2>&1; %s`, f, testutil.ShowNS), "timeout": 600000})
	var r bashResult
	decode(t, res, &r)
	slice := sessionSlice(t, pl)
	t.Logf("result: %s", textOf(res))
	if got := cgroupFile(t, slice, "pids.max"); got != "64" {
		t.Errorf("the session's pids.max is %s, want 64", got)
	}
	b, _ := os.ReadFile(f)
	ns := testutil.NSIn(r.Output)
	sleeps := testutil.PidsInNS(t, ns, string(b))
	refused := subtreeSum(t, slice, "pids.events", "max")
	t.Logf("the loop started %d processes; pids.current %s, refused forks %d", len(sleeps), cgroupFile(t, slice, "pids.current"), refused)
	if !strings.Contains(r.Output, "fork") {
		t.Errorf("the loop's shell did not say it could not fork: %+v", r)
	}
	// The session holds the task's bash and the loop's shell too, and its PID namespace's init.
	if len(sleeps) >= 64 || len(sleeps) < 32 {
		t.Errorf("the loop started %d processes under pids.max 64, want fewer than 64 and, stopped by the limit alone, more than 32", len(sleeps))
	}
	if n, _ := strconv.Atoi(cgroupFile(t, slice, "pids.current")); n > 64 {
		t.Errorf("pids.current %d exceeds pids.max 64", n)
	}
	if refused < 1 {
		t.Errorf("pids.events in the session's slice and below counts %d refused forks, want at least 1", refused)
	}
	if want := "fork failed: the session's processes reached its limit of 64 (--pids-max)"; r.ForksRefused < 1 || !strings.Contains(textOf(res), want) {
		t.Errorf("the loop's result counts %d refused forks, want at least 1, and its text %q", r.ForksRefused, want)
	}
	u := rep.ps(t)
	if n := value(t, "forks_refused", u.ForksRefused); n < r.ForksRefused {
		t.Errorf("reaper ps counts %d refused forks, fewer than the loop's result (%d)", n, r.ForksRefused)
	}
	if limit, n := value(t, "pids_max", u.PidsMax), value(t, "pids", u.Pids); limit != 64 || n < int64(len(sleeps)) || n > 64 {
		t.Errorf("reaper ps gives %d processes of %d, want the %d sleeps at least and at most 64", n, limit, len(sleeps))
	}
	rep.metric(t, "reaper_session_forks_refused_total", float64(r.ForksRefused))
	endSession(t, cs, sleeps, slice)
	if n := rep.ended(t, "forks_refused"); n < float64(r.ForksRefused) {
		t.Errorf("the session's end line counts %v refused forks, fewer than the loop's result (%d)", n, r.ForksRefused)
	}
}

// TestSessionCPUMax: with --cpu-max 0.2, a busy loop in the background is held to a fifth of a CPU:
// over 30 periods of cpu.max the slice's cpu.stat counts the loop throttled in most of them, and
// its CPU time well below what it would use unthrottled (a whole CPU). The kernel stops a
// throttled loop at its next tick, so a period's quota can run over by a few milliseconds. The loop's
// result once stopped, reaper ps, /metrics and the session's end line count the periods too.
func TestSessionCPUMax(t *testing.T) {
	pl := limitedPlace(t, "cpu")
	cs, _, rep := connectLimited(t, pl, "--cpu-max", "0.2")
	loop := bash(t, cs, `echo $$; `+testutil.ShowNS+`; exec sh -c 'while :; do :; done'`, "run_in_background", true)
	var out string
	testutil.Eventually(t, "the busy loop's pid", func() bool {
		_, o := mcptest.TaskOutput(t, cs, loop.TaskID, false)
		out += o
		return strings.Count(out, "\n") >= 2
	})
	busy := testutil.PidsIn(t, out)
	slice := sessionSlice(t, pl)
	if got := cgroupFile(t, slice, "cpu.max"); got != "20000 100000" {
		t.Errorf("the session's cpu.max is %q, want 20000 100000", got)
	}
	usage0, throttled0 := cgroupValue(t, slice, "cpu.stat", "usage_usec"), cgroupValue(t, slice, "cpu.stat", "nr_throttled")
	start := time.Now()
	time.Sleep(3 * time.Second) // a span of 30 periods of cpu.max
	span := time.Since(start)
	usage := time.Duration(cgroupValue(t, slice, "cpu.stat", "usage_usec")-usage0) * time.Microsecond
	throttled := cgroupValue(t, slice, "cpu.stat", "nr_throttled") - throttled0
	t.Logf("the busy loop used %v of CPU in %v (%.2f of a CPU), throttled in %d periods", usage, span, usage.Seconds()/span.Seconds(), throttled)
	if usage > span*2/5 {
		t.Errorf("the session used %v of CPU in %v, more than twice what --cpu-max 0.2 allows", usage, span)
	}
	if periods := int64(span / (100 * time.Millisecond)); throttled < periods/2 {
		t.Errorf("the busy loop was throttled in %d periods of %d, want at least half", throttled, periods)
	}
	if !testutil.Running(busy[0]) {
		t.Error("the busy loop died: the limit must slow it, not kill it")
	}
	u := rep.ps(t)
	if n, limit := value(t, "cpu_throttled_periods", u.ThrottledPeriods), value(t, "cpu_max", u.CPUMax); n < throttled || limit != 0.2 || u.CPUSeconds <= 0 {
		t.Errorf("reaper ps counts %d throttled periods at %v CPUs, want at least the %d seen at 0.2", n, limit, throttled)
	}
	rep.metric(t, "reaper_session_cpu_throttled_periods_total", float64(throttled))
	rep.metric(t, "reaper_session_cpu_seconds_total", usage.Seconds())

	// The loop's result, once stopped, counts the periods it ran through.
	mcptest.Call(t, cs, "task_stop", map[string]any{"task_id": loop.TaskID})
	res := mcptest.Call(t, cs, "task_output", map[string]any{"task_id": loop.TaskID, "block": true})
	var stopped mcptest.OutputResult
	decode(t, res, &stopped)
	t.Logf("the stopped loop's result: %s", textOf(res))
	if stopped.CPUThrottledPeriods < throttled || !strings.Contains(textOf(res), "throttled: the session's processes used its CPU limit of 0.2 CPUs (--cpu-max)") {
		t.Errorf("the stopped loop's result counts %d throttled periods, want at least the %d seen, and says so:\n%s", stopped.CPUThrottledPeriods, throttled, textOf(res))
	}
	endSession(t, cs, busy, slice)
	if n := rep.ended(t, "cpu_throttled_periods"); n < float64(throttled) {
		t.Errorf("the session's end line counts %v throttled periods, want at least the %d seen", n, throttled)
	}
}
