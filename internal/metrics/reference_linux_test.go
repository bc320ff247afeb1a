package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Prometheus's Go client, the reference writer of both exposition formats, is linked into this test
// only: reaper's binary does without it (see runtime_linux.go).

// referenceCollector hands Prometheus's client the families a scrape of ours gathered, as constant
// metrics, so that it writes the very same samples.
type referenceCollector struct{ fams []*family }

func (c referenceCollector) Describe(chan<- *prometheus.Desc) {} // unchecked: the families vary by scrape

func (c referenceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c.fams {
		desc := prometheus.NewDesc(f.name, f.help, f.labels, nil)
		for _, s := range f.series {
			switch f.kind {
			case counter:
				ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, s.value, s.values...)
			case gauge:
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, s.value, s.values...)
			case histogram:
				buckets := make(map[float64]uint64, len(f.buckets))
				var cum uint64
				for i, b := range f.buckets {
					cum += s.counts[i]
					buckets[b] = cum
				}
				cum += s.counts[len(f.buckets)]
				ch <- prometheus.MustNewConstHistogram(desc, cum, s.sum, buckets, s.values...)
			}
		}
	}
}

// TestReferenceExposition: for the same samples, the handler writes what Prometheus's Go client
// writes, byte for byte, in both formats: label and HELP escaping, ordering, number formats,
// OpenMetrics' counter family names, bucket bounds and # EOF.
func TestReferenceExposition(t *testing.T) {
	m := New(Options{Version: "v1.2.3", TaskStatuses: []string{"completed", "failed"}})
	m.WatchUsage(func() Usage {
		return Usage{Sessions: 2, Counted: true, MemoryCounted: true, Processes: []int{3, 5}, Memory: []int64{1 << 40, 300}}
	})
	m.SetContainment("cgroup", "cgroup.kill")
	m.TaskEnded("failed", true)
	m.Killed(Kills{SIGTERM: 2, CgroupKill: 1000003, Walk: 1})
	m.SessionEnded("idle", 30*time.Millisecond)
	m.SessionEnded("delete", 1234567*time.Microsecond)
	for _, op := range []Operation{
		{Method: "tools/call", Tool: "bash", Transport: "stdio", ProtocolVersion: "2025-11-25", Duration: 40 * time.Millisecond},
		{Method: "tools/call", Tool: "a\\b\"c\nd", ErrorType: "tool_error", Transport: "tcp", Duration: time.Hour},
		{Method: "initialize", Transport: "tcp", ProtocolVersion: "ünïcode", Duration: 0},
	} {
		m.MCPOperation(op)
	}
	m.MCPSessionEnded("tcp", "2025-06-18", 3*time.Second)

	for _, accept := range []string{"", "application/openmetrics-text; version=1.0.0"} {
		fams := m.gather()
		ours := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept", accept)
		handler(fams).ServeHTTP(ours, req)

		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(referenceCollector{fams})
		ref := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true, DisableCompression: true}).ServeHTTP(ref, req)
		refBody, _ := io.ReadAll(ref.Body)
		if ref.Code != 200 {
			t.Fatalf("Accept %q: the reference failed: %d %s", accept, ref.Code, refBody)
		}
		if got, want := ours.Body.String(), string(refBody); got != want {
			t.Errorf("Accept %q: exposition differs from the reference's\n%s", accept, lineDiff(got, want))
		}
		if got, want := ours.Header().Get("Content-Type"), ref.Header().Get("Content-Type"); !strings.HasPrefix(want, strings.TrimSuffix(got, "; charset=utf-8")) {
			t.Errorf("Accept %q: Content-Type %q, the reference's %q", accept, got, want)
		}
	}
}

// lineDiff lists the lines that differ, by position.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			b.WriteString("ours: " + gl + "\nref:  " + wl + "\n")
		}
	}
	return b.String()
}

// TestInvalidUTF8: a label value that is not UTF-8 is written with U+FFFD in its place, where
// Prometheus's client would panic: a scrape never breaks on a value a client sent.
func TestInvalidUTF8(t *testing.T) {
	m := New(Options{})
	m.MCPSessionEnded("tcp", "\xff\xfe2025", time.Second)
	out := scrape(t, m)
	if !strings.Contains(out, "mcp_protocol_version=\"\uFFFD2025\"") || !utf8.ValidString(out) {
		t.Errorf("invalid UTF-8 not replaced:\n%s", out)
	}
}
