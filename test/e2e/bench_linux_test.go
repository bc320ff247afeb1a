package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The benchmarks in this package measure reaper (the real binary) beside the lean server
// (test/bench/lean: the same go-sdk, plain os/exec), both driven by the go-sdk client in the same
// run, their calls alternating so that drift and other load hit both alike. Each reports the two
// figures as reaper-<unit> and lean-<unit>, and ratio, reaper's over the lean server's: above 1,
// reaper costs more. `go run ./test/bench` runs them all and prints one table.

// lean is the lean server's binary, built on first use (only benchmarks need it).
var leanBuild struct {
	once sync.Once
	path string
	err  error
}

// leanBin returns the lean server's binary, built as reaper's is (static), beside it.
func leanBin(b testing.TB) string {
	b.Helper()
	leanBuild.once.Do(func() {
		leanBuild.path = filepath.Join(filepath.Dir(staticBin), "lean")
		leanBuild.err = buildPackage("github.com/cgreaper/reaper/test/bench/lean", leanBuild.path, "CGO_ENABLED=0")
	})
	if leanBuild.err != nil {
		b.Fatalf("building the lean server: %v", leanBuild.err)
	}
	return leanBuild.path
}

// startLeanHTTP starts the lean server over HTTP and returns its endpoint and process; cleanup stops it.
func startLeanHTTP(b testing.TB) (string, *exec.Cmd) {
	b.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(b))
	cmd := exec.Command(leanBin(b), "-http", addr)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListening(b, addr)
	return "http://" + addr + "/mcp", cmd
}

// benchPlace is place for a benchmark: a unique cgroup root as in every test, and a state directory
// beside where reaper keeps it by default (instance.DefaultStateDir: /run/reaper for root, a memory
// file system), not in the test's temporary directory: each command rewrites its session's record
// there, which costs more on a disk file system.
func benchPlace(b *testing.B) placement {
	b.Helper()
	p := place(b, "")
	dir, err := os.MkdirTemp(filepath.Dir(instance.DefaultStateDir()), "reaper-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			b.Errorf("cleanup: state left in %s: %v", dir, entries)
		}
		os.RemoveAll(dir)
	})
	p.stateDir = dir
	return p
}

// served is a server under benchmark: the client's session and the server's processes (reaper's
// guard and server, or the lean server).
type served struct {
	cs   *mcp.ClientSession
	pids []int
}

// benchPair connects the go-sdk client to a fresh reaper (with extra flags) and a fresh lean server
// over transport ("stdio" or "http").
func benchPair(b *testing.B, transport string, extra ...string) (reaper, lean served) {
	b.Helper()
	args := append(benchPlace(b).args(), extra...)
	if transport == "stdio" {
		cs, cmd, _ := connectStdio(b, args...)
		reaper = served{cs, []int{cmd.Process.Pid, serverOf(b, cmd.Process.Pid)}}
		cmd = exec.Command(leanBin(b))
		return reaper, served{connectCommand(b, cmd), []int{cmd.Process.Pid}}
	}
	p := startHTTP(b, args...)
	url, cmd := startLeanHTTP(b)
	return served{p.connect(b), []int{p.cmd.Process.Pid, serverOf(b, p.cmd.Process.Pid)}},
		served{connectHTTP(b, url, ""), []int{cmd.Process.Pid}}
}

// withInits adds to reaper's processes the inits of its sessions' PID namespaces, which their first
// calls started: what users run, and what its CPU and memory figures count, includes them.
func withInits(s served) served {
	s.pids = append(s.pids, initsOf(s.pids[len(s.pids)-1:])...)
	return s
}

// alternateCPU is alternate, and also reports the CPU time the servers' processes used per
// iteration (their own, not their commands'), which depends less than wall time on what else the
// machine runs.
func alternateCPU(b *testing.B, unit string, reaper, lean served, leanOp, reaperOp func() time.Duration) {
	r0, l0 := threadsCPU(b, reaper.pids), threadsCPU(b, lean.pids)
	alternate(b, unit, leanOp, reaperOp)
	per := func(d time.Duration) float64 { return float64(d) / 1e3 / float64(b.N) }
	b.ReportMetric(per(threadsCPU(b, reaper.pids)-r0), "reaper-cpu-µs")
	b.ReportMetric(per(threadsCPU(b, lean.pids)-l0), "lean-cpu-µs")
}

// alternate runs lean and reaper, each once per iteration, in alternating order, and reports their
// mean durations in unit (µs or ms) and the ratio of reaper's to lean's.
func alternate(b *testing.B, unit string, lean, reaper func() time.Duration) {
	tl, tr := alternated(b, lean, reaper)
	reportPair(b, unit, tr, tl)
}

// alternated resets the timer, runs lean and reaper once per iteration, in alternating order so that
// neither always goes first, and returns the sum of the durations each reported.
func alternated(b *testing.B, lean, reaper func() time.Duration) (tl, tr time.Duration) {
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			tl += lean()
			tr += reaper()
		} else {
			tr += reaper()
			tl += lean()
		}
	}
	return tl, tr
}

// reportPair reports reaper's and lean's totals as means per iteration in unit, and their ratio.
func reportPair(b *testing.B, unit string, reaper, lean time.Duration) {
	per := time.Microsecond
	if unit == "ms" {
		per = time.Millisecond
	}
	mean := func(d time.Duration) float64 { return float64(d) / float64(per) / float64(b.N) }
	b.ReportMetric(mean(reaper), "reaper-"+unit)
	b.ReportMetric(mean(lean), "lean-"+unit)
	b.ReportMetric(float64(reaper)/float64(lean), "ratio")
}

// timedCall calls bash with command and returns how long the call took and its result, failing on a
// protocol or tool error.
func timedCall(b testing.TB, cs *mcp.ClientSession, command string) (time.Duration, *mcp.CallToolResult) {
	b.Helper()
	return timedTool(b, cs, "bash", "command", command)
}

// timedTool calls tool with the arguments given as name, value pairs and returns how long the call
// took and its result, failing on a protocol or tool error.
func timedTool(b testing.TB, cs *mcp.ClientSession, tool string, kv ...any) (time.Duration, *mcp.CallToolResult) {
	b.Helper()
	args := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		args[kv[i].(string)] = kv[i+1]
	}
	start := time.Now()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	d := time.Since(start)
	if err != nil {
		b.Fatalf("%s %v: %v", tool, args, err)
	}
	if res.IsError {
		b.Fatalf("%s %v: %s", tool, args, textOf(res))
	}
	return d, res
}

// payload returns the part of a result that carries a command's output: the structured content's
// "output" where the server sends one, else the text. Counting bytes in it works whichever way a
// server shapes its results.
func payload(res *mcp.CallToolResult) string {
	if m, ok := res.StructuredContent.(map[string]any); ok {
		if s, ok := m["output"].(string); ok {
			return s
		}
	}
	return textOf(res)
}

// filler returns a command that prints n bytes of '~', a byte no server's own notes contain, so that
// the benchmarks can count what arrived.
func filler(n int) string {
	return "head -c " + strconv.Itoa(n) + " /dev/zero | tr '\\0' '~'"
}

// BenchmarkRoundTrip measures one bash call (`echo hi`) from the go-sdk client to reaper and back,
// over stdio and over HTTP, with and without PID namespaces, beside the same call to the lean server;
// and the CPU time each server spent per call.
//
//	go test -run '^$' -bench BenchmarkRoundTrip -benchtime 500x ./test/e2e
func BenchmarkRoundTrip(b *testing.B) {
	for _, transport := range []string{"stdio", "http"} {
		for _, ns := range pidNSModes {
			b.Run(transport+"/pidns="+ns, func(b *testing.B) {
				roundTrip(b, transport, ns)
			})
		}
	}
}

// pidNSModes are reaper's --pid-namespace in the benchmarks that measure both.
var pidNSModes = []string{"on", "off"}

func roundTrip(b *testing.B, transport, ns string) {
	if ns == "on" {
		needPIDNamespaces(b)
	}
	reaper, lean := benchPair(b, transport, "--pid-namespace", ns)
	call := func(s served) func() time.Duration {
		return func() time.Duration {
			d, res := timedCall(b, s.cs, "echo hi")
			if !strings.Contains(payload(res), "hi") {
				b.Fatalf("echo hi returned %q", textOf(res))
			}
			return d
		}
	}
	call(reaper)()
	call(lean)()
	alternateCPU(b, "µs", withInits(reaper), lean, call(lean), call(reaper))
}

// BenchmarkOutput measures a bash call whose command prints 24 KB, and one that prints 1 MB (below
// the lean server's output limit, 1 MiB, and within reaper's --max-output, set to its ceiling so that
// both carry the whole output back; reaper also writes it into the command's output file), over stdio
// and over HTTP, beside the same calls to the lean server; and the CPU time each server spent per
// call. The time includes the command (head | tr) itself, alike for both.
//
//	go test -run '^$' -bench BenchmarkOutput -benchtime 100x ./test/e2e
func BenchmarkOutput(b *testing.B) {
	for _, transport := range []string{"stdio", "http"} {
		for _, size := range []struct {
			name string
			n    int
		}{{"24KB", 24 << 10}, {"1MB", 1000 * 1000}} {
			b.Run(transport+"/"+size.name, func(b *testing.B) {
				reaper, lean := benchPair(b, transport, "--max-output", "1048576")
				command := filler(size.n)
				call := func(s served) func() time.Duration {
					return func() time.Duration {
						d, res := timedCall(b, s.cs, command)
						if got := strings.Count(payload(res), "~"); got != size.n {
							b.Fatalf("%d bytes of output arrived, want %d", got, size.n)
						}
						return d
					}
				}
				call(reaper)()
				call(lean)()
				alternateCPU(b, "µs", withInits(reaper), lean, call(lean), call(reaper))
			})
		}
	}
}

// waitListening polls until something accepts connections at addr.
func waitListening(b testing.TB, addr string) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("nothing listens on %s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// benchClient is an HTTP client whose connections are reused by many concurrent sessions, so that
// the benchmarks that open hundreds of sessions do not exhaust the ephemeral ports.
func benchClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = conns
	return &http.Client{Transport: t}
}
