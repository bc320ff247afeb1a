package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkBaseline measures this tree's binary beside another reaper binary, the baseline (an
// earlier commit's, built by the caller and named by REAPER_BASELINE), in the same run, calls
// alternating: a foreground `echo hi` over stdio, the start of a background task over stdio (while
// another runs on), and an
// HTTP session's end (its DELETE, after one `echo hi`), each with PID namespaces on; and the memory
// of a session's init (Private_Dirty and Pss of /proc/<pid>/smaps_rollup, once its session has run a
// command) beside that of an idle bash task of the same session, which a session that runs anything
// pays anyway. Figures are reported as new-<unit> and base-<unit>, and the ratio new/base.
//
//	git worktree add /tmp/base <commit> && (cd /tmp/base && go build -o /tmp/reaper-base ./cmd/reaper)
//	REAPER_BASELINE=/tmp/reaper-base go test -run '^$' -bench BenchmarkBaseline -benchtime 300x ./test/e2e
func BenchmarkBaseline(b *testing.B) {
	base := os.Getenv("REAPER_BASELINE")
	if base == "" {
		b.Skip("skipped: REAPER_BASELINE names no baseline binary to compare with")
	}
	needPIDNamespaces(b)
	b.Run("echo", func(b *testing.B) {
		nw, bs := baselineStdio(b, staticBin), baselineStdio(b, base)
		call := func(cs *mcp.ClientSession) func() time.Duration {
			return func() time.Duration { d, _ := timedCall(b, cs, "echo hi"); return d }
		}
		call(nw)()
		call(bs)()
		tb, tn := alternated(b, call(bs), call(nw))
		reportBaseline(b, "µs", tn, tb)
	})
	b.Run("background", func(b *testing.B) {
		nw, bs := baselineStdio(b, staticBin), baselineStdio(b, base)
		// A task that runs on meanwhile, as an agent's server or watcher would: the init waits for
		// its children, which must not delay what it is asked.
		for _, cs := range []*mcp.ClientSession{nw, bs} {
			timedTool(b, cs, "bash", "command", "sleep 1000", "run_in_background", true)
		}
		call := func(cs *mcp.ClientSession) func() time.Duration {
			return func() time.Duration {
				d, _ := timedTool(b, cs, "bash", "command", "true", "run_in_background", true)
				return d
			}
		}
		call(nw)()
		call(bs)()
		tb, tn := alternated(b, call(bs), call(nw))
		reportBaseline(b, "µs", tn, tb)
	})
	b.Run("teardown", func(b *testing.B) {
		nw, bs := baselineHTTP(b, staticBin), baselineHTTP(b, base)
		end := func(url string) func() time.Duration {
			return func() time.Duration {
				cs, err := mcptest.DialHTTP(context.Background(), url, mcptest.Options{})
				if err != nil {
					b.Fatal(err)
				}
				timedCall(b, cs, "echo hi")
				start := time.Now()
				if err := cs.Close(); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
		}
		tb, tn := alternated(b, end(bs), end(nw))
		reportBaseline(b, "µs", tn, tb)
	})
	b.Run("memory", func(b *testing.B) {
		for _, side := range []struct{ name, bin string }{{"new", staticBin}, {"base", base}} {
			cs, server := baselineStdioServer(b, side.bin)
			timedCall(b, cs, "echo hi")
			inits := initsBelow(server)
			if len(inits) != 1 {
				b.Fatalf("%s: %d inits below the server %d, want 1", side.name, len(inits), server)
			}
			_, res := timedTool(b, cs, "bash", "command", "exec bash", "run_in_background", true, "stdin", true)
			var started struct {
				TaskID string `json:"task_id"`
			}
			decode(b, res, &started)
			var shell int
			testutil.Eventually(b, "the idle bash task", func() bool {
				for _, c := range childrenOf(inits[0]) {
					if b, _ := os.ReadFile("/proc/" + strconv.Itoa(c) + "/comm"); string(b) == "bash\n" {
						shell = c
						return true
					}
				}
				// Where the server forked it (the baseline's entry into the namespace).
				for _, c := range childrenOf(server) {
					if b, _ := os.ReadFile("/proc/" + strconv.Itoa(c) + "/comm"); string(b) == "bash\n" {
						shell = c
						return true
					}
				}
				return false
			})
			time.Sleep(200 * time.Millisecond) // both settle
			initPriv, initPss := smapsRollup(b, inits[0])
			shellPriv, shellPss := smapsRollup(b, shell)
			b.ReportMetric(float64(initPriv), side.name+"-init-private-KiB")
			b.ReportMetric(float64(initPss), side.name+"-init-pss-KiB")
			b.ReportMetric(float64(shellPriv), side.name+"-bash-private-KiB")
			b.ReportMetric(float64(shellPss), side.name+"-bash-pss-KiB")
		}
	})
}

// baselineStdio starts binary (`serve`, PID namespaces on) over stdio in a placement of its own and
// connects the go-sdk client; cleanup ends it.
func baselineStdio(b *testing.B, binary string) *mcp.ClientSession {
	cs, _ := baselineStdioServer(b, binary)
	return cs
}

// baselineStdioServer is baselineStdio, and also returns the pid of the server below the guard.
func baselineStdioServer(b *testing.B, binary string) (*mcp.ClientSession, int) {
	b.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--pid-namespace", "on"}, benchPlace(b).args()...)...)
	cmd.WaitDelay = 10 * time.Second
	cmd.Stderr = &testutil.Buffer{}
	cs := connectCommand(b, cmd)
	return cs, serverOf(b, cmd.Process.Pid)
}

// baselineHTTP starts binary over HTTP (PID namespaces on) and returns its MCP endpoint.
func baselineHTTP(b *testing.B, binary string) string {
	b.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--http", "127.0.0.1:0", "--pid-namespace", "on"}, benchPlace(b).args()...)...)
	cmd.WaitDelay = 10 * time.Second
	p := startCmd(b, cmd, nil, nil)
	p.awaitServing(b)
	return p.url
}

// initsBelow returns the children of server that are the init of a PID namespace below its own:
// pid 1 in the last namespace their NSpid line names.
func initsBelow(server int) []int {
	var out []int
	for _, c := range childrenOf(server) {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c), "status"))
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "NSpid:" && f[len(f)-1] == "1" {
				out = append(out, c)
			}
		}
	}
	return out
}

// smapsRollup returns the Private_Dirty and Pss of a process, in KiB.
func smapsRollup(b testing.TB, pid int) (private, pss int) {
	b.Helper()
	s, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(s)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "Private_Dirty:":
			private = n
		case "Pss:":
			pss = n
		}
	}
	return private, pss
}

// reportBaseline reports the new binary's and the baseline's totals as means per iteration in unit,
// and their ratio.
func reportBaseline(b *testing.B, unit string, nw, base time.Duration) {
	mean := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N) }
	b.ReportMetric(mean(nw), "new-"+unit)
	b.ReportMetric(mean(base), "base-"+unit)
	b.ReportMetric(float64(nw)/float64(base), "ratio")
}
