package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/admin"
	"github.com/cgreaper/reaper/internal/metrics"
	"github.com/cgreaper/reaper/mcpserver"
	"github.com/cgreaper/reaper/reaper"
)

// ops is what operators see of a server: the admin endpoint and the metrics behind it. Without
// --admin it holds nothing and every method does nothing.
type ops struct {
	admin   *admin.Server
	metrics *metrics.Metrics
	url     string
}

// startOps checks --admin (loopback unless there is an admin token), opens its listener and starts
// serving, not ready yet. It returns a non-zero exit status on failure, having said why.
func startOps(c serveConfig, log *slog.Logger, stderr io.Writer) (*ops, int) {
	o := &ops{}
	if c.admin == "" {
		return o, 0
	}
	token, err := c.adminTokenValue()
	if err != nil {
		fmt.Fprintf(stderr, "reaper serve: %v\n", err)
		return o, 2
	}
	loop, err := isLoopback(c.admin)
	if err != nil {
		fmt.Fprintf(stderr, "reaper serve: --admin %s: %v\n", c.admin, err)
		return o, 2
	}
	if !loop && token == "" {
		fmt.Fprintf(stderr, "reaper serve: refusing to serve the admin endpoint on %s without an admin token: /metrics would be open to anyone who can reach it. "+
			"Set --admin-token, REAPER_ADMIN_TOKEN or --admin-token-file (/healthz and /readyz stay open), or listen on loopback such as 127.0.0.1:9090.\n", c.admin)
		return o, 2
	}
	ln, err := net.Listen("tcp", c.admin)
	if err != nil {
		fmt.Fprintf(stderr, "reaper serve: --admin: %v\n", err)
		return o, 1
	}
	o.metrics = newMetrics(versionString(), log)
	o.admin = admin.New(admin.Options{Token: token, Metrics: o.metrics.Handler(), Logger: log})
	o.admin.Serve(ln)
	o.url = strings.TrimSuffix(endpointURL(c.admin, ln.Addr()), "/mcp")
	return o, 0
}

// reaperObserver is the Reaper's Observer: the metrics', or none.
func (o *ops) reaperObserver() reaper.Observer {
	if o.metrics == nil {
		return nil
	}
	return reaperMetrics{o.metrics}
}

// mcpObserver is the MCP server's Observer: the metrics', or none.
func (o *ops) mcpObserver() mcpserver.Observer {
	if o.metrics == nil {
		return nil
	}
	return mcpMetrics{o.metrics}
}

// ready starts the metrics of r and makes /readyz answer ready, with warning first if there is one.
func (o *ops) ready(r *reaper.Reaper, warning string) {
	if o.admin == nil {
		return
	}
	watchReaper(o.metrics, r)
	text := readyText(r.Containment())
	if warning != "" {
		text = warning + "; " + text
	}
	o.admin.SetReady(true, text)
}

// connectionRefused counts an HTTP connection refused at one of httpguard's limits.
func (o *ops) connectionRefused(limit string) {
	if o.metrics != nil {
		o.metrics.Refused(connectionsRefused[limit])
	}
}

// readyText is /readyz's body: the containment, PID namespaces, why, and the per-session limits.
func readyText(ci reaper.ContainmentInfo) string {
	s := "containment " + ci.String() + "; pid namespace " + ci.PIDNamespace.String()
	if l := limitsText(ci.Limits); l != "" {
		s += "; per-session limits: " + l
	}
	if ci.LimitsDropped != "" {
		s += "; " + ci.LimitsDropped
	}
	return s
}

// limitsText lists limits as the cgroup files they are written to; empty for none.
func limitsText(l cgroup.Limits) string {
	var parts []string
	if l.MemoryMax > 0 {
		parts = append(parts, fmt.Sprintf("memory.max=%d", l.MemoryMax))
	}
	if l.PidsMax > 0 {
		parts = append(parts, fmt.Sprintf("pids.max=%d", l.PidsMax))
	}
	if l.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("cpu.max=%g CPUs", l.CPUs))
	}
	return strings.Join(parts, ", ")
}

// stopping makes /readyz answer not ready: the server is shutting down.
func (o *ops) stopping() {
	if o.admin != nil {
		o.admin.SetReady(false, "shutting down")
	}
}

// close stops the admin endpoint, letting a request under way finish. It is idempotent.
func (o *ops) close() {
	if o.admin != nil {
		o.admin.Close()
		o.admin = nil
	}
}

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
