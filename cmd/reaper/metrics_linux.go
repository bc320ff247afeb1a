package main

import (
	"log/slog"

	"github.com/cgreaper/reaper/internal/metrics"
	"github.com/cgreaper/reaper/mcpserver"
	"github.com/cgreaper/reaper/reaper"
)

// newMetrics makes the metrics, with every task status shown from the start; what a scrape cannot
// collect goes to log.
func newMetrics(version string, log *slog.Logger) *metrics.Metrics {
	statuses := []string{string(reaper.Completed), string(reaper.Failed), string(reaper.Killed), string(reaper.TimedOut)}
	return metrics.New(metrics.Options{Version: version, TaskStatuses: statuses, Logger: log})
}

// reaperMetrics is the Reaper's Observer that feeds the metrics.
type reaperMetrics struct{ m *metrics.Metrics }

func (o reaperMetrics) SessionEnded(e reaper.SessionEnd) {
	o.m.SessionEnded(e.Reason, e.Report.Duration)
	if e.UsageCounted {
		o.m.SessionUsed(metrics.SessionUse{CPU: e.Usage.CPU, MemoryPeak: e.Usage.MemoryPeak, MemoryCounted: e.Usage.MemoryCounted})
	}
}

func (o reaperMetrics) TaskEnded(e reaper.TaskEnd) { o.m.TaskEnded(string(e.Status), e.OOMKilled) }

// Teardown counts the processes a teardown ended by phase: Killed includes Walked, which a walk of
// /proc found outside the slice and killed; the rest died with the slice.
func (o reaperMetrics) Teardown(k reaper.KillReport) {
	o.m.Killed(metrics.Kills{
		SIGTERM: k.Terminated, CgroupKill: k.Killed - k.Walked, Walk: k.Walked,
		Escapees: k.Found, Remaining: len(k.Remaining),
	})
}

func (o reaperMetrics) Swept(rep reaper.SweepReport) {
	n := 0
	for _, d := range rep.Dead {
		n += len(d.Processes)
	}
	o.m.Swept(len(rep.Dead), n)
}

// mcpMetrics is the MCP server's Observer that feeds the metrics.
type mcpMetrics struct{ m *metrics.Metrics }

func (o mcpMetrics) Operation(op mcpserver.Operation) {
	o.m.MCPOperation(metrics.Operation{
		Method: op.Method, Tool: op.Tool, ErrorType: op.ErrorType, Transport: op.Transport,
		ProtocolVersion: op.ProtocolVersion, Duration: op.Duration,
	})
}

func (o mcpMetrics) SessionEnded(si mcpserver.SessionInfo) {
	o.m.MCPSessionEnded(si.Transport, si.ProtocolVersion, si.Duration)
}

func (o mcpMetrics) Refused(limit string) { o.m.Refused(limit) }

// connectionsRefused names httpguard's limits as reaper_refused_total does.
var connectionsRefused = map[string]string{"total": "connections", "unauthenticated": "connections_unauthenticated", "peer": "connections_peer", "identity": "connections_identity"}

// watchReaper records the containment mode and reads the sessions' usage at each scrape.
func watchReaper(m *metrics.Metrics, r *reaper.Reaper) {
	ci := r.Containment()
	kill := "none"
	if ci.Mode == reaper.ContainCgroup {
		kill = ci.Cgroup.Kill.String()
	}
	m.SetContainment(ci.Mode.String(), kill)
	m.WatchUsage(func() metrics.Usage {
		u := r.Usage()
		return metrics.Usage{
			Sessions: u.Sessions, Counted: u.Counted, MemoryCounted: u.MemoryCounted, PidsCounted: u.PidsCounted,
			ThrottlingCounted: u.ThrottlingCounted, Processes: u.Processes, Memory: u.Memory, MemoryPeak: u.MemoryPeak,
			CPU: u.CPU, OOMKills: u.Hits.OOMKills, ForksRefused: u.Hits.ForksRefused, Throttled: u.Hits.Throttled,
			ThrottledTime: u.Hits.ThrottledTime, OutputBytes: u.OutputBytes, OutputBudget: r.Limits().TotalOutputBudget,
		}
	})
}
