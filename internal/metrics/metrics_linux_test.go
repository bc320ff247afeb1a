package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d", rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestEventsMoveTheMetrics(t *testing.T) {
	m := New(Options{Version: "v1.2.3", TaskStatuses: []string{"completed", "failed"}})
	usage := Usage{Sessions: 2, Counted: true, MemoryCounted: true, Processes: []int{3, 5}, Memory: []int64{100, 300}}
	m.WatchUsage(func() Usage { return usage })
	m.SetContainment("process", "none")

	m.TaskEnded("failed", false)
	m.TaskEnded("failed", true)
	m.Killed(Kills{SIGTERM: 2, CgroupKill: 3, Walk: 2, Escapees: 3, Remaining: 1})
	m.SessionEnded("idle", 30*time.Millisecond)
	m.Swept(1, 2)
	m.MCPOperation(Operation{Method: "tools/call", Tool: "bash", Transport: "tcp", ProtocolVersion: "2025-11-25", Duration: 40 * time.Millisecond})
	m.MCPSessionEnded("tcp", "", 3*time.Second)

	out := scrape(t, m)
	for _, want := range []string{
		`reaper_build_info{version="v1.2.3"} 1`,
		`reaper_containment_info{kill="none",mode="process"} 1`,
		`reaper_sessions_active 2`,
		`reaper_session_processes 8`,
		`reaper_session_processes_largest 5`,
		`reaper_session_memory_bytes 400`,
		`reaper_session_memory_largest_bytes 300`,
		`reaper_tasks_ended_total{status="failed"} 2`,
		`reaper_tasks_ended_total{status="completed"} 0`,
		`reaper_tasks_oom_killed_total 1`,
		`reaper_processes_killed_total{phase="sigterm"} 2`,
		`reaper_processes_killed_total{phase="cgroup_kill"} 3`,
		`reaper_processes_killed_total{phase="walk"} 2`,
		`reaper_escapees_found_total 3`,
		`reaper_processes_remaining_total 1`,
		`reaper_sessions_ended_total{reason="idle"} 1`,
		`reaper_session_teardown_duration_seconds_count 1`,
		`reaper_session_teardown_duration_seconds_bucket{le="0.05"} 1`,
		`reaper_sweep_dead_instances_total 1`,
		`reaper_sweep_processes_killed_total 2`,
		`mcp_server_operation_duration_seconds_bucket{error_type="",gen_ai_tool_name="bash",mcp_method_name="tools/call",mcp_protocol_version="2025-11-25",network_transport="tcp",le="0.05"} 1`,
		`mcp_server_session_duration_seconds_count{mcp_protocol_version="",network_transport="tcp"} 1`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(out, want+"\n") && !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}

	// In process containment nothing counts processes per slice: no sample rather than a false 0.
	usage = Usage{Sessions: 1}
	if out := scrape(t, m); strings.Contains(out, "reaper_session_processes ") || strings.Contains(out, "reaper_session_memory_bytes") {
		t.Errorf("per-slice gauges without slices:\n%s", out)
	}
}

// TestExpositionFormats: the handler answers in OpenMetrics when the scraper's Accept header asks for
// it, as Prometheus's does, and in the Prometheus text format otherwise; both hold the same samples.
func TestExpositionFormats(t *testing.T) {
	m := New(Options{Version: "v1.2.3", TaskStatuses: []string{"failed"}})
	m.TaskEnded("failed", false)
	for _, tc := range []struct {
		accept, contentType string
		openMetrics         bool
	}{
		{"", "text/plain; version=0.0.4", false},
		{"text/plain", "text/plain; version=0.0.4", false},
		{"application/openmetrics-text; version=1.0.0; charset=utf-8", "application/openmetrics-text; version=1.0.0", true},
		// What Prometheus 2.x and 3.x send by default: OpenMetrics first, the text format as a fallback.
		{"application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.1",
			"application/openmetrics-text; version=1.0.0", true},
		// With the protobuf format first (scrape_protocols): passed over, OpenMetrics is next.
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3",
			"application/openmetrics-text; version=1.0.0", true},
		{"text/plain;version=0.0.4, application/openmetrics-text;version=1.0.0;q=0.5", "text/plain; version=0.0.4", false},
		{"application/openmetrics-text;q=0, text/plain;q=0.1", "text/plain; version=0.0.4", false},
		{"application/json", "text/plain; version=0.0.4", false},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		m.Handler().ServeHTTP(rec, req)
		body := rec.Body.String()
		if ct := rec.Header().Get("Content-Type"); rec.Code != 200 || !strings.HasPrefix(ct, tc.contentType) {
			t.Errorf("Accept %q: %d, Content-Type %q, want %q", tc.accept, rec.Code, ct, tc.contentType)
		}
		// OpenMetrics names a counter's family without _total and ends with # EOF.
		eof := strings.HasSuffix(body, "# EOF\n")
		family := strings.Contains(body, "# TYPE reaper_tasks_ended counter\n")
		if eof != tc.openMetrics || family != tc.openMetrics {
			t.Errorf("Accept %q: OpenMetrics # EOF %v, counter family without _total %v; want %v\n%s", tc.accept, eof, family, tc.openMetrics, body)
		}
		if !strings.Contains(body, `reaper_tasks_ended_total{status="failed"} 1`) || strings.Contains(body, "_created") {
			t.Errorf("Accept %q: the sample is missing, or _created samples are there:\n%s", tc.accept, body)
		}
	}
}
