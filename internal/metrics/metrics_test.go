package metrics

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	usage := Usage{Sessions: 2, Counted: true, MemoryCounted: true, PidsCounted: true, Processes: []int{3, 5}, Memory: []int64{100, 300},
		MemoryPeak: []int64{900, 700}, CPU: 2500 * time.Millisecond, OOMKills: 1, ForksRefused: 12, Throttled: 40, ThrottledTime: time.Second}
	m.WatchUsage(func() Usage { return usage })
	m.SetContainment("process", "none")

	m.TaskEnded("failed", false)
	m.TaskEnded("failed", true)
	m.Killed(Kills{SIGTERM: 2, CgroupKill: 3, Walk: 2, Escapees: 3, Remaining: 1})
	m.SessionEnded("idle", 30*time.Millisecond)
	m.SessionUsed(SessionUse{CPU: 2 * time.Second, MemoryPeak: 3 << 20, MemoryCounted: true})
	m.SessionUsed(SessionUse{CPU: 20 * time.Millisecond})
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
		`reaper_session_memory_peak_largest_bytes 900`,
		`reaper_session_cpu_seconds_total 2.5`,
		`reaper_session_oom_kills_total 1`,
		`reaper_session_forks_refused_total 12`,
		`reaper_session_cpu_seconds_count 2`,
		`reaper_session_cpu_seconds_bucket{le="0.1"} 1`,
		`reaper_session_memory_peak_bytes_count 1`,
		`reaper_session_memory_peak_bytes_bucket{le="4.194304e+06"} 1`,
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

	// Throttling is not counted without a CPU limit: no sample rather than a false 0.
	if strings.Contains(out, "reaper_session_cpu_throttled") {
		t.Errorf("throttling reported without a CPU limit:\n%s", out)
	}

	// In process containment nothing counts processes per slice: no sample rather than a false 0.
	usage = Usage{Sessions: 1, MemoryCounted: true, PidsCounted: true, ThrottlingCounted: true}
	out = scrape(t, m)
	for _, family := range []string{"reaper_session_processes ", "reaper_session_memory_bytes", "reaper_session_cpu_seconds_total",
		"reaper_session_oom_kills_total", "reaper_session_forks_refused_total", "reaper_session_cpu_throttled_periods_total"} {
		if strings.Contains(out, family) {
			t.Errorf("%s reported without slices:\n%s", family, out)
		}
	}
	usage = Usage{Sessions: 1, Counted: true, ThrottlingCounted: true, Throttled: 3, ThrottledTime: 250 * time.Millisecond}
	out = scrape(t, m)
	for _, want := range []string{"reaper_session_cpu_throttled_periods_total 3\n", "reaper_session_cpu_throttled_seconds_total 0.25\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

// TestExpositionFormats: the handler answers in OpenMetrics when the scraper's Accept header asks for
// it, as Prometheus's does, in the protobuf format when that comes first, and in the Prometheus text
// format otherwise; the text formats hold the same samples, and none has _created samples.
func TestExpositionFormats(t *testing.T) {
	m := New(Options{Version: "v1.2.3", TaskStatuses: []string{"failed"}})
	m.TaskEnded("failed", false)
	const text, om, proto = "text/plain; version=0.0.4", "application/openmetrics-text; version=1.0.0", "application/vnd.google.protobuf"
	for _, tc := range []struct{ accept, contentType string }{
		{"", text},
		{"text/plain", text},
		{"application/openmetrics-text; version=1.0.0; charset=utf-8", om},
		// What Prometheus 2.x and 3.x send by default: OpenMetrics first, the text format as a fallback.
		{"application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.1", om},
		// With the protobuf format first (scrape_protocols, for native histograms).
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3", proto},
		{"text/plain;version=0.0.4, application/openmetrics-text;version=1.0.0;q=0.5", text},
		{"application/openmetrics-text;q=0, text/plain;q=0.1", text},
		{"application/json", text},
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
		if tc.contentType == proto {
			continue
		}
		// OpenMetrics names a counter's family without _total and ends with # EOF.
		openMetrics := tc.contentType == om
		eof := strings.HasSuffix(body, "# EOF\n")
		family := strings.Contains(body, "# TYPE reaper_tasks_ended counter\n")
		if eof != openMetrics || family != openMetrics {
			t.Errorf("Accept %q: OpenMetrics # EOF %v, counter family without _total %v; want %v\n%s", tc.accept, eof, family, openMetrics, body)
		}
		if !strings.Contains(body, `reaper_tasks_ended_total{status="failed"} 1`) || strings.Contains(body, "_created") {
			t.Errorf("Accept %q: the sample is missing, or _created samples are there:\n%s", tc.accept, body)
		}
	}
}

// TestCompressed: a scraper that accepts gzip gets the scrape compressed, and the same samples.
func TestCompressed(t *testing.T) {
	m := New(Options{})
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, req)
	if enc := rec.Header().Get("Content-Encoding"); enc != "gzip" {
		t.Fatalf("Content-Encoding %q, want gzip", enc)
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || !bytes.Contains(b, []byte("reaper_build_info{version=\"unknown\"} 1\n")) {
		t.Errorf("gzipped scrape: %v\n%s", err, b)
	}
}

// TestInvalidUTF8: a label value that is not UTF-8 is counted with U+FFFD in its place, where
// Prometheus's client would refuse (and WithLabelValues panic): neither an event nor a scrape breaks
// on a value a client sent.
func TestInvalidUTF8(t *testing.T) {
	m := New(Options{Version: "v\xff"})
	m.MCPSessionEnded("tcp", "\xff\xfe2025", time.Second)
	m.MCPOperation(Operation{Method: "tools/call", Tool: "a\\b\"c\nd\xc3", Transport: "tcp"})
	out := scrape(t, m)
	for _, want := range []string{
		"mcp_server_session_duration_seconds_count{mcp_protocol_version=\"\uFFFD2025\",network_transport=\"tcp\"} 1",
		`gen_ai_tool_name="a\\b\"c\nd` + "\uFFFD\"",
		"reaper_build_info{version=\"v\uFFFD\"} 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if !utf8.ValidString(out) {
		t.Errorf("invalid UTF-8 in the scrape:\n%s", out)
	}
}

// TestDocumentedMetrics: every metric of docs/operations.md's table is in a scrape, with the type and
// the label names the table gives it, and so are the Go runtime's and the process's metrics the page
// names; every reaper_ and mcp_ family of a scrape is in the table.
func TestDocumentedMetrics(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := New(Options{TaskStatuses: []string{"completed"}})
	m.WatchUsage(func() Usage {
		return Usage{Sessions: 1, Counted: true, MemoryCounted: true, PidsCounted: true, ThrottlingCounted: true,
			Processes: []int{1}, Memory: []int64{1}, MemoryPeak: []int64{1}}
	})
	m.SetContainment("cgroup", "cgroup.kill")
	m.SessionEnded("idle", time.Second)
	m.MCPOperation(Operation{Method: "initialize", Transport: "stdio"})
	m.MCPSessionEnded("stdio", "2025-11-25", time.Second)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(scrape(t, m)))
	if err != nil {
		t.Fatal(err)
	}

	row := regexp.MustCompile("(?m)^\\| (`.+`) \\| (counter|gauge|histogram) \\|")
	name := regexp.MustCompile("`([a-z_]+)(?:\\{([a-z_,]+)\\})?`")
	documented := map[string]bool{}
	for _, r := range row.FindAllStringSubmatch(string(doc), -1) {
		for _, n := range name.FindAllStringSubmatch(r[1], -1) {
			documented[n[1]] = true
			f := fams[n[1]]
			if f == nil {
				t.Errorf("%s is documented but not in a scrape", n[1])
				continue
			}
			if got := strings.ToLower(f.GetType().String()); got != r[2] {
				t.Errorf("%s is a %s, documented as a %s", n[1], got, r[2])
			}
			var want []string
			if n[2] != "" {
				want = strings.Split(n[2], ",")
				slices.Sort(want)
			}
			if got := labelNames(f); !slices.Equal(got, want) {
				t.Errorf("%s has labels %v, documented %v", n[1], got, want)
			}
		}
	}
	if len(documented) < 15 {
		t.Fatalf("only %d metrics read from the table: the parse is broken", len(documented))
	}
	for n := range fams {
		if (strings.HasPrefix(n, "reaper_") || strings.HasPrefix(n, "mcp_")) && !documented[n] {
			t.Errorf("%s is served but not documented in docs/operations.md", n)
		}
	}
	for _, n := range []string{"go_goroutines", "go_threads", "go_info", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes",
		"go_sched_gomaxprocs_threads", "go_gc_duration_seconds", "process_cpu_seconds_total", "process_resident_memory_bytes",
		"process_virtual_memory_bytes", "process_start_time_seconds", "process_open_fds", "process_max_fds"} {
		if fams[n] == nil {
			t.Errorf("%s is not in a scrape", n)
		} else if !strings.Contains(string(doc), "`"+n+"`") && !strings.Contains(string(doc), "`"+n+"{") {
			t.Errorf("%s is not named in docs/operations.md", n)
		}
	}
}

// labelNames lists the names of a family's labels, sorted, without a histogram's le.
func labelNames(f *dto.MetricFamily) []string {
	var names []string
	if len(f.GetMetric()) > 0 {
		for _, l := range f.GetMetric()[0].GetLabel() {
			names = append(names, l.GetName())
		}
	}
	slices.Sort(names)
	return names
}
