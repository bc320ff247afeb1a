package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpTarget is a server under an HTTP benchmark.
type httpTarget struct {
	url   string
	token string // the bearer token reaper requires; "" for lean
	pids  []int  // the processes whose memory and CPU count: reaper's guard and server, or lean
	// left counts the sessions the server still holds; 0 where a session ends with its DELETE.
	left func() int
}

// cpu returns the CPU time the target's processes have used so far, and that of the children they
// have reaped: the tasks, and for reaper the inits of its sessions' PID namespaces with the tasks
// those reaped. An init is counted once it has ended and been reaped (the one kept ready for the next
// session, in the next run).
func (t httpTarget) cpu(b *testing.B) (own, reaped time.Duration) {
	for _, pid := range t.pids {
		o, r := cpuTimes(b, pid)
		own, reaped = own+o, reaped+r
	}
	return own, reaped
}

// reaperTarget starts reaper over HTTP, with args added to its command line. Its sessions are counted
// by their directories in its state directory, which a session's teardown removes last, after its
// processes and its cgroup.
func reaperTarget(b *testing.B, args ...string) httpTarget {
	b.Helper()
	p := benchPlace(b)
	rp := startHTTP(b, append(p.args(), args...)...)
	guard := rp.cmd.Process.Pid
	return httpTarget{
		url:   rp.url,
		token: rp.token,
		pids:  []int{guard, serverOf(b, guard)},
		left: func() int {
			m, _ := filepath.Glob(filepath.Join(p.stateDir, "reaper-*", "s-*"))
			return len(m)
		},
	}
}

// leanTarget starts the lean server over HTTP.
func leanTarget(b *testing.B) httpTarget {
	b.Helper()
	url, cmd := startLeanHTTP(b)
	return httpTarget{url: url, pids: []int{cmd.Process.Pid}, left: func() int { return 0 }}
}

// openSessions opens n sessions to url, conc at a time, each with one bash call (`echo hi`), so that
// reaper has made each one's cgroup.
func openSessions(t httpTarget, client *http.Client, n, conc int) ([]*mcp.ClientSession, error) {
	out := make([]*mcp.ClientSession, n)
	err := parallel(n, conc, func(i int) error {
		cs, err := mcptest.DialHTTP(context.Background(), t.url, mcptest.Options{HTTPClient: client, Token: t.token})
		if err != nil {
			return err
		}
		out[i] = cs
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo hi"}})
		if err == nil && res.IsError {
			err = errors.New(textOf(res))
		}
		return err
	})
	if err != nil {
		closeSessions(out, conc)
	}
	return out, err
}

// closeSessions closes the sessions (a DELETE each), conc at a time.
func closeSessions(ss []*mcp.ClientSession, conc int) {
	parallel(len(ss), conc, func(i int) error {
		if ss[i] != nil {
			ss[i].Close()
		}
		return nil
	})
}

// parallel runs f(0) to f(n-1), conc at a time, and returns the first error.
func parallel(n, conc int, f func(int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, conc)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("session %d: %w", i, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// awaitEnded waits until the target holds no session, failing after two minutes.
func awaitEnded(b *testing.B, t httpTarget) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for t.left() > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("%d sessions still held two minutes after their DELETE", t.left())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rssKiB returns the resident memory of the processes, in KiB.
func rssKiB(b testing.TB, pids []int) int {
	b.Helper()
	total := 0
	for _, pid := range pids {
		s, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(s), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				n, _ := strconv.Atoi(f[1])
				total += n
			}
		}
	}
	return total
}

// initsPss returns the Pss, in KiB, of the inits of the PID namespaces of the sessions of the servers
// among pids (their children that are inits): shared pages counted once among all that map them, as
// the inits share the binary's with the server.
func initsPss(pids []int) int {
	total := 0
	for _, c := range initsOf(pids) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(c) + "/smaps_rollup")
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
				n, _ := strconv.Atoi(f[1])
				total += n
			}
		}
	}
	return total
}

// initsOf returns the PID namespace inits among the children of pids.
func initsOf(pids []int) []int {
	var out []int
	for _, pid := range pids {
		for _, c := range childrenOf(pid) {
			if testutil.IsInit(c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// threadsCPU returns the CPU time the processes' threads have used, from the nanosecond clock of
// /proc/<pid>/task/<tid>/schedstat (/proc/<pid>/stat counts in 10 ms ticks, too coarse for idle
// servers). Threads that exit take their time with them; a Go server's rarely do.
func threadsCPU(b testing.TB, pids []int) time.Duration {
	b.Helper()
	var total time.Duration
	for _, pid := range pids {
		files, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
		if err != nil || len(files) == 0 {
			b.Fatalf("no threads of %d: %v", pid, err)
		}
		for _, file := range files {
			s, err := os.ReadFile(file)
			if err != nil {
				continue // the thread exited
			}
			ns, _ := strconv.ParseInt(strings.Fields(string(s))[0], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}

// BenchmarkIdleSessions opens 250, then 1000, concurrent HTTP sessions that each ran one command (so
// reaper has made each one's cgroup), and measures, for reaper and for the lean server, each in a fresh
// process: the memory a session holds (the growth of resident memory, reaper's guard and server
// together, over the sessions, read after the idle window; and, apart, the Pss of the sessions' PID
// namespace inits right after the sessions were opened: by the end of the window they have exited,
// their namespaces empty for 10 s), the CPU the server uses while they sit
// idle for ten seconds, from five seconds after the last was opened (ms of CPU per second; by then
// the work the burst left is done: reaper serve collects and returns memory to the kernel within two
// 2 s periods after a burst, and that is not idle cost; for reaper the window holds the inits' idle
// exits, which the server reaps), the same for ten more seconds once every init has exited
// (steady-idle-cpu-ms/s: what idle sessions cost for as long as they last), and the time
// from the clients' DELETEs to the end of the
// last session (for reaper, its state directory is gone: its processes are dead and its cgroup
// removed). open-ms is the time to open them, 16 at a time.
//
//	go test -run '^$' -bench BenchmarkIdleSessions -benchtime 1x ./test/e2e
func BenchmarkIdleSessions(b *testing.B) {
	// Two sizes, to say how each figure grows with the sessions held.
	for _, sessions := range []int{250, 1000} {
		b.Run("sessions="+strconv.Itoa(sessions), func(b *testing.B) { benchIdleSessions(b, sessions) })
	}
}

func benchIdleSessions(b *testing.B, sessions int) {
	const settle, window = 5 * time.Second, 10 * time.Second
	type figures struct {
		kib, init, cpu, steady, end, open float64
	}
	measure := func(t httpTarget) figures {
		client := benchClient(64)
		warm, err := openSessions(t, client, 1, 1)
		if err != nil {
			b.Fatal(err)
		}
		closeSessions(warm, 1)
		awaitEnded(b, t)
		before := rssKiB(b, t.pids)
		start := time.Now()
		ss, err := openSessions(t, client, sessions, 16)
		if err != nil {
			b.Fatal(err)
		}
		open := time.Since(start)
		inits := initsPss(t.pids)
		time.Sleep(settle) // what the burst left to do: the last calls, a collection, memory returned
		cpu0 := threadsCPU(b, t.pids)
		time.Sleep(window)
		cpu := threadsCPU(b, t.pids) - cpu0
		for deadline := time.Now().Add(time.Minute); len(initsOf(t.pids)) > 0; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("inits still there a minute after the idle window: %v", initsOf(t.pids))
			}
		}
		cpu0 = threadsCPU(b, t.pids)
		time.Sleep(window)
		steady := threadsCPU(b, t.pids) - cpu0
		after := rssKiB(b, t.pids)
		start = time.Now()
		closeSessions(ss, 64)
		awaitEnded(b, t)
		end := time.Since(start)
		return figures{
			kib:    float64(after-before) / float64(sessions),
			init:   float64(inits) / float64(sessions),
			cpu:    float64(cpu) / 1e6 / window.Seconds(),
			steady: float64(steady) / 1e6 / window.Seconds(),
			end:    float64(end.Milliseconds()),
			open:   float64(open.Milliseconds()),
		}
	}
	// Room for every session: the default cap (one per 64 MiB of memory) may be fewer.
	capArgs := []string{"--max-sessions", strconv.Itoa(sessions + 16)}
	var lean, reaper figures
	add := func(sum *figures, f figures) {
		sum.kib += f.kib
		sum.init += f.init
		sum.cpu += f.cpu
		sum.steady += f.steady
		sum.end += f.end
		sum.open += f.open
	}
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			add(&lean, measure(leanTarget(b)))
			add(&reaper, measure(reaperTarget(b, capArgs...)))
		} else {
			add(&reaper, measure(reaperTarget(b, capArgs...)))
			add(&lean, measure(leanTarget(b)))
		}
	}
	n := float64(b.N)
	b.ReportMetric(reaper.kib/n, "reaper-KiB/session")
	b.ReportMetric(reaper.init/n, "reaper-init-KiB/session")
	b.ReportMetric(lean.kib/n, "lean-KiB/session")
	b.ReportMetric(reaper.cpu/n, "reaper-idle-cpu-ms/s")
	b.ReportMetric(lean.cpu/n, "lean-idle-cpu-ms/s")
	b.ReportMetric(reaper.steady/n, "reaper-steady-idle-cpu-ms/s")
	b.ReportMetric(lean.steady/n, "lean-steady-idle-cpu-ms/s")
	b.ReportMetric(reaper.end/n, "reaper-end-ms")
	b.ReportMetric(lean.end/n, "lean-end-ms")
	b.ReportMetric(reaper.open/n, "reaper-open-ms")
	b.ReportMetric(lean.open/n, "lean-open-ms")
}

// BenchmarkChurn measures sessions per second under churn over HTTP: 1, 4, then 16, clients at once
// each open a session, run one bash call (`echo hi`) and close it (DELETE), 100 sessions in all per
// iteration; for reaper the iteration ends when the last session's teardown is done. ratio is of the
// times. With one client, the time per session is an HTTP session's start, first call and close, one
// after another, as a client lives it (session-ms), and the CPU a session costs is reported: the
// servers' own (reaper's guard and server; server-cpu-ms/session) and, in cpu-ms/session, with what
// they reaped added (the tasks, and reaper's PID namespace inits; see httpTarget.cpu), in ticks of
// 10 ms over 100 sessions a run. reaper runs with its default, a PID namespace per session where it
// can make one; clients=1/pidns=off runs one client without them.
//
//	go test -run '^$' -bench BenchmarkChurn -benchtime 10x ./test/e2e
func BenchmarkChurn(b *testing.B) {
	// Concurrencies of 4 and 16 say how the rate grows with the clients.
	for _, workers := range []int{1, 4, 16} {
		b.Run("clients="+strconv.Itoa(workers), func(b *testing.B) { benchChurn(b, workers) })
	}
	b.Run("clients=1/pidns=off", func(b *testing.B) { benchChurn(b, 1, "--pid-namespace", "off") })
}

// benchChurn is BenchmarkChurn with workers clients, reaper started with args added.
func benchChurn(b *testing.B, workers int, args ...string) {
	const sessions = 100
	type cpuUse struct{ own, reaped time.Duration } // see httpTarget.cpu
	var lc, rc cpuUse                               // lean's, reaper's: over the measured iterations
	churn := func(t httpTarget, c *cpuUse) func() time.Duration {
		client := benchClient(workers)
		return func() time.Duration {
			own, reaped := t.cpu(b)
			defer func() {
				own2, reaped2 := t.cpu(b)
				c.own += own2 - own
				c.reaped += reaped2 - reaped
			}()
			start := time.Now()
			err := parallel(sessions, workers, func(int) error {
				ss, err := openSessions(t, client, 1, 1)
				closeSessions(ss, 1)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			awaitEnded(b, t)
			return time.Since(start)
		}
	}
	lean, reaper := churn(leanTarget(b), &lc), churn(reaperTarget(b, args...), &rc)
	lean()
	reaper()
	lc, rc = cpuUse{}, cpuUse{} // the warm-up's
	tl, tr := alternated(b, lean, reaper)
	if workers == 1 {
		per := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(sessions*b.N) }
		b.ReportMetric(per(rc.own+rc.reaped), "reaper-cpu-ms/session")
		b.ReportMetric(per(lc.own+lc.reaped), "lean-cpu-ms/session")
		b.ReportMetric(per(rc.own), "reaper-server-cpu-ms/session")
		b.ReportMetric(per(lc.own), "lean-server-cpu-ms/session")
	}
	rate := func(d time.Duration) float64 { return float64(sessions*b.N) / d.Seconds() }
	b.ReportMetric(rate(tr), "reaper-sessions/s")
	b.ReportMetric(rate(tl), "lean-sessions/s")
	b.ReportMetric(1e3/rate(tr), "reaper-session-ms")
	b.ReportMetric(1e3/rate(tl), "lean-session-ms")
	b.ReportMetric(float64(tr)/float64(tl), "ratio")
}

// BenchmarkSessionApart measures an HTTP session (its start, one bash call, `echo hi`, and its close)
// as a server sees sessions that come one at a time, apart: each starts on an idle CPU, and the
// servers have first been left alone for longer than one of reaper's inits lives unused (so the init
// it had made ready at start-up has exited idle, as happens on any server between bursts of work).
// Where BenchmarkChurn's one client starts each session as the last one ends, and so weighs the CPU
// each costs, this weighs what a client waits on. Sessions alternate between the servers, sessionGap
// apart; the figures are means over apartSessions sessions of each, of the session and of its call,
// and of each of the session's requests as the client's HTTP transport saw it (see requestTimer):
// initialize, the initialized notification, the call's POST and the DELETE. reaper runs with its
// default (pidns=auto: a PID namespace per session where it can make one), then without namespaces.
//
//	go test -run '^$' -bench BenchmarkSessionApart -benchtime 1x ./test/e2e
func BenchmarkSessionApart(b *testing.B) {
	b.Run("pidns=auto", func(b *testing.B) { benchSessionApart(b) })
	b.Run("pidns=off", func(b *testing.B) { benchSessionApart(b, "--pid-namespace", "off") })
}

// benchSessionApart is BenchmarkSessionApart, reaper started with args added.
func benchSessionApart(b *testing.B, args ...string) {
	const (
		apartSessions = 100
		sessionGap    = 20 * time.Millisecond
		// quiet is longer than an init of reaper's lives in an empty namespace (initIdle, 10 s).
		quiet = 11 * time.Second
	)
	lean, reaper := leanTarget(b), reaperTarget(b, args...)
	leanRequests, reaperRequests := newRequestTimer(1), newRequestTimer(1)
	one := func(t httpTarget, requests *requestTimer) (session, call time.Duration) {
		start := time.Now()
		cs, err := mcptest.DialHTTP(context.Background(), t.url, mcptest.Options{HTTPClient: requests.client, Token: t.token})
		if err != nil {
			b.Fatal(err)
		}
		d, _ := timedCall(b, cs, "echo hi")
		cs.Close()
		session = time.Since(start)
		time.Sleep(sessionGap)
		return session, d
	}
	time.Sleep(quiet)
	b.ResetTimer()
	var ls, lc, rs, rc time.Duration // lean's sessions and calls, reaper's
	leanOne := func() { s, c := one(lean, leanRequests); ls, lc = ls+s, lc+c }
	reaperOne := func() { s, c := one(reaper, reaperRequests); rs, rc = rs+s, rc+c }
	for i := range b.N * apartSessions {
		if i%2 == 0 {
			leanOne()
			reaperOne()
		} else {
			reaperOne()
			leanOne()
		}
	}
	b.StopTimer()
	awaitEnded(b, reaper)
	mean := func(d time.Duration) float64 {
		return float64(d) / float64(time.Millisecond) / float64(b.N*apartSessions)
	}
	b.ReportMetric(mean(rs), "reaper-session-ms")
	b.ReportMetric(mean(ls), "lean-session-ms")
	b.ReportMetric(mean(rc), "reaper-call-ms")
	b.ReportMetric(mean(lc), "lean-call-ms")
	for _, kind := range timedRequests {
		if reaperRequests.total(kind) == 0 || leanRequests.total(kind) == 0 {
			b.Fatalf("no %s request was timed: the client's requests are not the ones requestTimer knows", kind.method)
		}
		b.ReportMetric(mean(reaperRequests.total(kind)), "reaper-"+kind.metric+"-ms")
		b.ReportMetric(mean(leanRequests.total(kind)), "lean-"+kind.metric+"-ms")
	}
	b.ReportMetric(float64(rs)/float64(ls), "ratio")
}

// A requestKind is one of the requests an MCP session makes over HTTP: a POST of a JSON-RPC method,
// or a request without a body (method is the HTTP method then).
type requestKind struct{ method, metric string }

// timedRequests are the requests whose times requestTimer adds up, with the names of their metrics.
// The GET a client opens for the server's messages is not one: it lasts as long as the session.
var timedRequests = []requestKind{
	{"initialize", "initialize"}, {"notifications/initialized", "initialized"},
	{"tools/call", "call-post"}, {http.MethodDelete, "delete"},
}

// requestTimer is an HTTP client for MCP sessions that adds up how long each kind of request took,
// from its sending until its response had been read to its end (a POST's response ends with the
// answer to it; a DELETE's has no body).
type requestTimer struct {
	client *http.Client
	next   http.RoundTripper

	// mu guards the field that follows.
	mu  sync.Mutex
	sum map[string]time.Duration // by requestKind.method
}

// newRequestTimer returns a requestTimer over benchClient(conns).
func newRequestTimer(conns int) *requestTimer {
	t := &requestTimer{next: benchClient(conns).Transport, sum: make(map[string]time.Duration)}
	t.client = &http.Client{Transport: t}
	return t
}

func (t *requestTimer) RoundTrip(r *http.Request) (*http.Response, error) {
	kind := r.Method
	if r.Method == http.MethodPost && r.GetBody != nil {
		body, err := r.GetBody()
		if err != nil {
			return nil, err
		}
		var msg struct{ Method string }
		err = json.NewDecoder(io.LimitReader(body, 1<<20)).Decode(&msg)
		body.Close()
		if err == nil && msg.Method != "" {
			kind = msg.Method
		}
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost && r.Method != http.MethodDelete {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	d := time.Since(start)
	t.mu.Lock()
	t.sum[kind] += d
	t.mu.Unlock()
	return resp, nil
}

// total returns the time requests of kind have taken so far.
func (t *requestTimer) total(kind requestKind) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sum[kind.method]
}
