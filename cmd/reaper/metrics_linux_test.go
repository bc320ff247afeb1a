package main

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/mcpserver"
	"github.com/cgreaper/reaper/reaper"
)

// TestMetricsAdapters: the Reaper's and the MCP server's events reach the metrics as they mean: a
// teardown's hard kills split between the slice and the walk, a sweep's processes summed over its
// instances, every task status shown from the start.
func TestMetricsAdapters(t *testing.T) {
	m := newMetrics("v1", nil)
	ro, mo := reaperMetrics{m}, mcpMetrics{m}
	ro.TaskEnded(reaper.TaskEnd{Status: reaper.Failed, OOMKilled: true})
	ro.Teardown(reaper.KillReport{Terminated: 2, Killed: 5, Walked: 2, Found: 3, Remaining: []reaper.Proc{{Pid: 9}}})
	ro.SessionEnded(reaper.SessionEnd{Reason: "idle", Report: reaper.KillReport{Duration: 30 * time.Millisecond}})
	ro.Swept(reaper.SweepReport{Dead: []reaper.DeadInstance{{Processes: []reaper.Proc{{Pid: 1}, {Pid: 2}}}, {Processes: []reaper.Proc{{Pid: 3}}}}})
	mo.Operation(mcpserver.Operation{Method: "tools/call", Tool: "bash", Transport: "tcp", ProtocolVersion: "2025-11-25", Duration: 40 * time.Millisecond})
	mo.SessionEnded(mcpserver.SessionInfo{Transport: "pipe", Duration: 3 * time.Second})

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	out := string(b)
	for _, want := range []string{
		`reaper_tasks_ended_total{status="failed"} 1`,
		`reaper_tasks_ended_total{status="completed"} 0`,
		`reaper_tasks_ended_total{status="killed"} 0`,
		`reaper_tasks_ended_total{status="timed_out"} 0`,
		`reaper_tasks_oom_killed_total 1`,
		`reaper_processes_killed_total{phase="sigterm"} 2`,
		`reaper_processes_killed_total{phase="cgroup_kill"} 3`,
		`reaper_processes_killed_total{phase="walk"} 2`,
		`reaper_escapees_found_total 3`,
		`reaper_processes_remaining_total 1`,
		`reaper_sessions_ended_total{reason="idle"} 1`,
		`reaper_sweep_dead_instances_total 2`,
		`reaper_sweep_processes_killed_total 3`,
		`mcp_server_operation_duration_seconds_count{error_type="",gen_ai_tool_name="bash",mcp_method_name="tools/call",mcp_protocol_version="2025-11-25",network_transport="tcp"} 1`,
		`mcp_server_session_duration_seconds_count{mcp_protocol_version="",network_transport="pipe"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}
