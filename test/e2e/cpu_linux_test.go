package e2e

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// cpuTime returns the CPU time pid has used so far (utime + stime).
func cpuTime(t testing.TB, pid int) time.Duration {
	own, _ := cpuTimes(t, pid)
	return own
}

// cpuTimes returns the CPU time pid has used so far (utime + stime), and that of its children it
// has waited for, with theirs in turn (cutime + cstime).
func cpuTimes(t testing.TB, pid int) (own, reaped time.Duration) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:])) // f[0] is field 3
	var v [4]int64                                                 // utime, stime, cutime, cstime: fields 14 to 17
	for i := range v {
		v[i], _ = strconv.ParseInt(f[11+i], 10, 64)
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }
	return tick(v[0] + v[1]), tick(v[2] + v[3])
}

// TestLeftoverWriterCostsLittle: a finished foreground command left `yes` writing into its output
// pipe. Nobody will read that output, so reaper must spend next to nothing on it, and the writer must
// neither die (a dev server started with `server &` lives on) nor block for good.
func TestLeftoverWriterCostsLittle(t *testing.T) {
	for _, mode := range []string{"cgroup", "process"} {
		t.Run(mode, func(t *testing.T) {
			cs, cmd, _ := connectStdio(t, place(t, mode).args()...)
			server := serverOf(t, cmd.Process.Pid)
			// The pid goes first, on a line of its own, and yes starts later: a writer that starts at
			// once can fill more than the output limit before the command's result is made, and then
			// the middle is dropped and a count of bytes stands there.
			r := bash(t, cs, testutil.ShowNS+"; (sleep 0.2; exec yes) & echo $!")
			ns, rest, _ := strings.Cut(r.Output, "\n")
			first, _, _ := strings.Cut(rest, "\n")
			yes := testutil.PidsIn(t, first+" "+ns)
			const period = 3 * time.Second
			before, wrote := cpuTime(t, server), written(t, yes[0].Pid)
			time.Sleep(period) // measuring over a period: the writer writes all along
			used := cpuTime(t, server) - before
			wrote = written(t, yes[0].Pid) - wrote
			t.Logf("reaper used %v of CPU in %v with a leftover yes writing into its pipe (%.1f%% of a core); yes wrote %d bytes",
				used, period, 100*used.Seconds()/period.Seconds(), wrote)
			if used > period/10 {
				t.Errorf("reaper used %v of CPU in %v reading output nobody reads", used, period)
			}
			if !testutil.Running(yes[0]) {
				t.Fatal("the leftover writer died")
			}
			if wrote == 0 {
				t.Error("the leftover writer is blocked: nothing empties its pipe")
			}
			if r := bash(t, cs, "echo still serving"); r.Output != "still serving\n" {
				t.Errorf("after the leftover: %+v", r)
			}
		})
	}
}

// written returns the bytes pid has written so far (wchar in /proc/<pid>/io).
func written(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatalf("no wchar in /proc/%d/io", pid)
	return 0
}
