package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// startAdmin starts reaper over HTTP with its admin endpoint on a free loopback port, and returns it
// with the endpoint's base URL.
func startAdmin(t testing.TB, args ...string) (*reaperProc, string) {
	t.Helper()
	p := startHTTP(t, append([]string{"--admin", "127.0.0.1:0"}, args...)...)
	awaitReady(t, p.admin)
	return p, p.admin
}

// awaitReady polls /readyz until it answers 200: the MCP listener opens before the admin endpoint's,
// which answers 503 until containment is set up.
func awaitReady(t testing.TB, base string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/readyz", nil)
		res, err := testutil.Do(req)
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				return string(b)
			}
			if res.StatusCode != 503 || !strings.Contains(string(b), "starting") {
				t.Fatalf("/readyz: %d %q", res.StatusCode, b)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: not ready within 30 s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sample returns the value of one series ("name" or "name{labels}", labels as the client library
// sorts them) in a scrape, and whether it is there.
func sample(body, series string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// awaitSample scrapes until the series satisfies cond, and fails the test if it does not within 30 s.
func awaitSample(t testing.TB, base, series string, cond func(float64) bool) float64 {
	t.Helper()
	var body string
	var v float64
	var ok bool
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body = testutil.Get(t, base+"/metrics", "")
		if v, ok = sample(body, series); ok && cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v (present %v) after 30 s:\n%s", series, v, ok, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
func equal(n float64) func(float64) bool   { return func(v float64) bool { return v == n } }

// TestMetricsThroughASessionsLife scrapes /metrics of the real binary while a session runs a command,
// starts processes that escape, and ends with the client's DELETE: the counters move at each step.
func TestMetricsThroughASessionsLife(t *testing.T) {
	pl := place(t, "")
	p, base := startAdmin(t, append(pl.args(), "--grace", grace.String())...)
	_, body := testutil.Get(t, base+"/metrics", "")
	for series, want := range map[string]float64{
		"reaper_sessions_active": 0, `reaper_tasks_ended_total{status="completed"}`: 0,
		`reaper_processes_killed_total{phase="sigterm"}`: 0, "reaper_sweep_dead_instances_total": 0,
	} {
		if v, ok := sample(body, series); !ok || v != want {
			t.Errorf("at start %s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	mode := "process"
	if pl.root != "" {
		mode = "cgroup"
	}
	if !strings.Contains(body, `reaper_containment_info{kill=`) || !strings.Contains(body, `mode="`+mode+`"} 1`) {
		t.Errorf("no containment info for mode %s:\n%s", mode, body)
	}

	cs := p.connect(t)
	bash(t, cs, "echo hi")
	awaitSample(t, base, "reaper_sessions_active", equal(1))
	awaitSample(t, base, `reaper_tasks_ended_total{status="completed"}`, equal(1))
	awaitSample(t, base, `mcp_server_operation_duration_seconds_count{error_type="",gen_ai_tool_name="bash",mcp_method_name="tools/call",mcp_protocol_version="2025-11-25",network_transport="tcp"}`, equal(1))
	ps := escapees(t, cs)
	if mode == "cgroup" {
		awaitSample(t, base, "reaper_session_processes", atLeast(float64(len(ps))))
	}

	cs.Close() // DELETE
	testutil.AwaitDead(t, ps, grace+5*time.Second)
	awaitSample(t, base, `reaper_sessions_ended_total{reason="delete"}`, equal(1))
	awaitSample(t, base, "reaper_sessions_active", equal(0))
	awaitSample(t, base, `reaper_tasks_ended_total{status="killed"}`, equal(1))
	awaitSample(t, base, "reaper_session_teardown_duration_seconds_count", equal(1))
	awaitSample(t, base, `mcp_server_session_duration_seconds_count{mcp_protocol_version="2025-11-25",network_transport="tcp"}`, atLeast(1))
	_, body = testutil.Get(t, base+"/metrics", "")
	var killed float64
	for _, phase := range []string{"sigterm", "cgroup_kill", "walk"} {
		v, _ := sample(body, `reaper_processes_killed_total{phase="`+phase+`"}`)
		killed += v
	}
	if killed < float64(len(ps)) {
		t.Errorf("%v processes killed by the phases, want at least the %d started:\n%s", killed, len(ps), body)
	}
	if v, _ := sample(body, "reaper_escapees_found_total"); mode == "process" && v < float64(len(ps)) {
		t.Errorf("process containment: %v found by the walk, want at least %d", v, len(ps))
	}
}

// TestReadyz asks /readyz in each containment mode: it names the mode and why, and whether sessions
// get PID namespaces.
func TestReadyz(t *testing.T) {
	for _, mode := range []string{"cgroup", "process"} {
		t.Run(mode, func(t *testing.T) {
			_, base := startAdmin(t, place(t, mode).args()...)
			if code, body := testutil.Get(t, base+"/healthz", ""); code != 200 {
				t.Errorf("/healthz: %d %q", code, body)
			}
			code, body := testutil.Get(t, base+"/readyz", "")
			if code != 200 || !strings.HasPrefix(body, "ready: containment "+mode+" (") || !strings.Contains(body, "; pid namespace o") {
				t.Errorf("/readyz: %d %q", code, body)
			}
			t.Logf("/readyz: %s", strings.TrimSpace(body))
		})
	}
}

// TestAdminBeyondLoopback serves the admin endpoint on every interface with an admin token: probes
// need nothing, /metrics needs the token; without a token reaper refuses to start.
func TestAdminBeyondLoopback(t *testing.T) {
	p := start(t, []string{"serve", "--http", "127.0.0.1:0", "--admin", "0.0.0.0:0"}, nil, nil)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("reaper served a non-loopback admin endpoint without a token")
	}
	if !strings.Contains(p.stderr.String(), "without an admin token") {
		t.Errorf("refusal: %v\n%s", p.err, p.stderr)
	}

	file := filepath.Join(t.TempDir(), "admin-token")
	os.WriteFile(file, []byte("adm1n-s3cret\n"), 0o600)
	p = startHTTP(t, append(cgroupArgs(t), "--admin", "0.0.0.0:0", "--admin-token-file", file)...)
	if !strings.HasPrefix(p.admin, "http://0.0.0.0:") {
		t.Fatalf("reaper logged admin endpoint %q, want the address asked for, 0.0.0.0, with its port", p.admin)
	}
	base := "http://127.0.0.1:" + strings.TrimPrefix(p.admin, "http://0.0.0.0:")
	awaitReady(t, base) // without the token
	if code, body := testutil.Get(t, base+"/metrics", ""); code != 401 || strings.Contains(body, "reaper_") {
		t.Errorf("/metrics without the token: %d %q", code, body)
	}
	if code, body := testutil.Get(t, base+"/metrics", "adm1n-s3cret"); code != 200 || !strings.Contains(body, "reaper_sessions_active") {
		t.Errorf("/metrics with the token: %d", code)
	}
	if strings.Contains(p.stderr.String(), "adm1n-s3cret") {
		t.Errorf("the admin token is in the log:\n%s", p.stderr)
	}
}

// TestJSONLogs runs reaper with --log-format json through a session and a crash of its server, and
// parses every line of its stderr, the guard's included: each is one JSON object; the session's end
// is one line with its reason and counts; no line holds an empty error, the token or the session id.
func TestJSONLogs(t *testing.T) {
	const token = "mcp-t0ken-that-must-not-be-logged"
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte(token+"\n"), 0o600)
	p := startHTTP(t, append(cgroupArgs(t), "--log-format", "json", "--token-file", file, "--grace", grace.String())...)
	cs := connectHTTP(t, p.url, token)
	id := cs.ID()
	bash(t, cs, "sleep 1000 & echo started")
	cs.Close() // DELETE
	if !p.stderr.Await(`"msg":"session ended"`) {
		t.Fatalf("no session end logged:\n%s", p.stderr)
	}
	syscall.Kill(serverOf(t, p.cmd.Process.Pid), syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the guard did not exit after its server was killed:\n%s", p.stderr)
	}

	var ends, guard []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not a JSON object: %q: %v", line, err)
			continue
		}
		if m["time"] == nil || m["level"] == nil || m["msg"] == nil {
			t.Errorf("line without time, level or msg: %q", line)
		}
		if _, ok := m["err"]; ok || strings.Contains(line, "<nil>") {
			t.Errorf("an err key or an empty error: %q", line)
		}
		for _, secret := range []string{token, id} {
			if strings.Contains(line, secret) {
				t.Errorf("a secret (%q) in the log: %q", secret, line)
			}
		}
		if m["msg"] == "session ended" {
			ends = append(ends, m)
		}
		if m["guard"] != nil {
			guard = append(guard, m)
		}
	}
	if len(ends) != 1 {
		t.Fatalf("%d session-end lines, want 1:\n%s", len(ends), p.stderr)
	}
	e := ends[0]
	if e["reason"] != "delete" || e["tasks"] != 0.0 && e["tasks"] != 1.0 || e["processes_ended"].(float64) < 1 ||
		!strings.HasPrefix(e["session"].(string), "mcp-") || e["error"] != nil {
		t.Errorf("session-end line: %v", e)
	}
	for _, key := range []string{"lifetime_seconds", "teardown_seconds", "by_sigterm", "by_cgroup_kill", "by_walk", "escapees", "remaining"} {
		if _, ok := e[key].(float64); !ok {
			t.Errorf("session-end line: %s is not a number: %v", key, e)
		}
	}
	if len(guard) == 0 {
		t.Errorf("the guard logged nothing as JSON after its server was killed:\n%s", p.stderr)
	}
}

// TestLimitsOnThisHost asks for a per-session memory limit. This machine's cgroup2 offers no memory
// controller: --containment cgroup refuses to start and names it; auto starts, warns, and /readyz says
// the limit is not applied. Where the host offers it, the limit is in the session's slice.
func TestLimitsOnThisHost(t *testing.T) {
	pl := place(t, "cgroup")
	if b, _ := os.ReadFile(filepath.Join(filepath.Dir(pl.root), "cgroup.controllers")); strings.Contains(string(b), "memory") {
		_, base := startAdmin(t, append(pl.args(), "--containment", "cgroup", "--memory-max", "64M")...)
		if body := awaitReady(t, base); !strings.Contains(body, "memory.max=67108864") {
			t.Errorf("/readyz does not name the memory limit: %q", body)
		}
		return
	}
	p := start(t, append([]string{"serve", "--containment", "cgroup", "--memory-max", "64M"}, pl.args()...), nil, nil)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("reaper started with a memory limit the host cannot apply under --containment cgroup")
	}
	if p.cmd.ProcessState.ExitCode() != 1 || !strings.Contains(p.stderr.String(), "memory controller is not offered") {
		t.Errorf("exit %v:\n%s", p.err, p.stderr)
	}
	t.Logf("refused: %s", strings.TrimSpace(p.stderr.String()))

	p, base := startAdmin(t, append(pl.args(), "--memory-max", "64M", "--pids-max", "100")...)
	body := awaitReady(t, base)
	if !strings.Contains(body, "containment cgroup") || !strings.Contains(body, "memory, pids limits not applied") {
		t.Errorf("/readyz under auto: %q", body)
	}
	if !p.stderr.Await("per-session limits not applied") {
		t.Errorf("no warning:\n%s", p.stderr)
	}
	cs := p.connect(t)
	if r := bash(t, cs, "echo unlimited"); r.Output != "unlimited\n" {
		t.Errorf("a command under auto without the limit: %+v", r)
	}
}
