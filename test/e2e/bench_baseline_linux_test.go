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
// HTTP session's end (its DELETE, after one `echo hi`), each with PID namespaces on; and what a live
// session with an idle bash task costs (see sessionMemory): its init (Private_Dirty and Pss of
// /proc/<pid>/smaps_rollup) beside that bash, which a session that runs anything pays anyway. Figures are reported as new-<unit> and base-<unit>, and the ratio new/base.
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
		nw, _ := baselineHTTP(b, staticBin)
		bs, _ := baselineHTTP(b, base)
		end := func(url string) func() time.Duration {
			return func() time.Duration {
				cs, err := mcptest.DialHTTP(context.Background(), url, mcptest.Options{Token: baselineToken})
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
			sessionMemory(b, side.name, side.bin)
		}
	})
}

// memorySessions is how many sessions sessionMemory opens.
const memorySessions = 20

// sessionMemory opens memorySessions HTTP sessions to binary, each with an idle bash task (a shell
// waiting for its input), and reports what one such session costs, in KiB: its init's Private_Dirty
// and Pss, its bash's, and the server's growth in Private_Dirty. (The kernel's part, its namespaces,
// cgroups, page tables and threads' stacks, shows only in the machine's MemAvailable, which other load
// moves more than this.)
func sessionMemory(b *testing.B, name, binary string) {
	url, server := baselineHTTP(b, binary)
	timedCall(b, connectHTTP(b, url, baselineToken), "echo warm") // the server's first session, not counted
	time.Sleep(time.Second)
	server0, _ := smapsRollup(b, server)
	for range memorySessions {
		cs := connectHTTP(b, url, baselineToken)
		timedTool(b, cs, "bash", "command", "exec bash", "run_in_background", true, "stdin", true)
	}
	var inits, shells []int
	testutil.Eventually(b, "every session's init and bash", func() bool {
		inits, shells = nil, nil
		// The sessions' inits are those with a bash (the warm session's has none, nor one kept
		// ready); the baseline's server forks the tasks into the namespaces itself, and its inits
		// are one per session but the warm one.
		isBash := func(pid int) bool {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			return string(b) == "bash\n"
		}
		all := initsBelow(server)
		for _, in := range all {
			for _, c := range childrenOf(in) {
				if isBash(c) {
					inits, shells = append(inits, in), append(shells, c)
				}
			}
		}
		for _, c := range childrenOf(server) {
			if isBash(c) {
				shells = append(shells, c)
			}
		}
		if len(inits) == 0 && len(all) > memorySessions { // the baseline's
			inits = all[:memorySessions] // alike: each holds nothing but itself
		}
		return len(inits) >= memorySessions && len(shells) >= memorySessions
	})
	time.Sleep(time.Second) // everything settles
	sum := func(pids []int) (private, pss int) {
		for _, pid := range pids {
			a, b := smapsRollup(b, pid)
			private, pss = private+a, pss+b
		}
		return private, pss
	}
	per := func(kib int) float64 { return float64(kib) / memorySessions }
	initPriv, initPss := sum(inits)
	shellPriv, shellPss := sum(shells)
	server1, _ := smapsRollup(b, server)
	b.ReportMetric(per(initPriv), name+"-init-private-KiB")
	b.ReportMetric(per(initPss), name+"-init-pss-KiB")
	b.ReportMetric(per(shellPriv), name+"-bash-private-KiB")
	b.ReportMetric(per(shellPss), name+"-bash-pss-KiB")
	b.ReportMetric(per(server1-server0), name+"-server-private-KiB")
}

// baselineStdio starts binary (`serve`, PID namespaces on) over stdio in a placement of its own and
// connects the go-sdk client; cleanup ends it.
func baselineStdio(b *testing.B, binary string) *mcp.ClientSession {
	b.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--pid-namespace", "on"}, benchPlace(b).args()...)...)
	cmd.WaitDelay = 10 * time.Second
	cmd.Stderr = &testutil.Buffer{}
	return connectCommand(b, cmd)
}

// baselineToken is the token the servers over HTTP take from a file (see baselineHTTP).
const baselineToken = "tok-baseline"

// baselineHTTP starts binary over HTTP (PID namespaces on), taking baselineToken, and returns its MCP
// endpoint and its server's pid.
func baselineHTTP(b *testing.B, binary string) (string, int) {
	b.Helper()
	tokens := filepath.Join(b.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("bench "+baselineToken+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	args := append([]string{"serve", "--http", "127.0.0.1:0", "--pid-namespace", "on", "--token-file", tokens}, benchPlace(b).args()...)
	cmd := exec.Command(binary, args...)
	cmd.WaitDelay = 10 * time.Second
	p := startCmd(b, cmd, nil, nil)
	p.awaitServing(b)
	return p.url, serverOf(b, cmd.Process.Pid)
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
