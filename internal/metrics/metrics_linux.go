package metrics

import (
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configures Metrics. The zero value is ready to use.
type Options struct {
	// Version is reported as the version label of reaper_build_info; empty means "unknown".
	Version string
	// TaskStatuses are the values reaper_tasks_ended_total's status label takes, shown at 0 from the
	// start so that rate() sees the first; nil shows none before it happens.
	TaskStatuses []string
}

// Metrics holds the registry and every metric. Create it with New; it is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	// reaper's own.
	sessionsEnded   *prometheus.CounterVec
	sessionTeardown prometheus.Histogram
	tasksEnded      *prometheus.CounterVec
	tasksOOM        prometheus.Counter
	killed          *prometheus.CounterVec
	escapees        prometheus.Counter
	remaining       prometheus.Counter
	sweptInstances  prometheus.Counter
	sweptProcesses  prometheus.Counter
	containment     *prometheus.GaugeVec

	// MCP, as the OpenTelemetry conventions name them.
	operations *prometheus.HistogramVec
	sessions   *prometheus.HistogramVec
}

// Phases of the kill policy, the values of reaper_processes_killed_total's phase label.
const (
	PhaseSIGTERM    = "sigterm"     // exited within the grace period after SIGTERM
	PhaseCgroupKill = "cgroup_kill" // killed with the session's or task's slice (cgroup.kill, or the fallbacks)
	PhaseWalk       = "walk"        // found outside the slice by a walk of /proc and sent SIGKILL
)

// operationBuckets are the OpenTelemetry conventions' advice for mcp.server.operation.duration, with
// 600 s added: the bash tool's longest timeout.
var operationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600}

// sessionBuckets span a throwaway session (a client's server/discover probe) to a working day.
var sessionBuckets = []float64{0.1, 1, 10, 60, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400}

// teardownBuckets span an empty slice's removal to a grace period and a stuck process's deadline.
var teardownBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30}

// New makes the metrics and registers them, with Go's runtime and process metrics, in a registry of
// their own.
func New(opts Options) *Metrics {
	if opts.Version == "" {
		opts.Version = "unknown"
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		sessionsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reaper_sessions_ended_total",
			Help: "Sessions and workspaces that ran a command and ended, by reason: delete (the client's DELETE), idle (the idle timeout), disconnected (stdio EOF, a closed connection), keepalive (pings unanswered), close (workspace_close), expired (a workspace's lease ran out), shutdown, closed.",
		}, []string{"reason"}),
		sessionTeardown: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "reaper_session_teardown_duration_seconds",
			Help:    "Time a session's teardown took: SIGTERM, the grace period, the hard kill, the walks of /proc, the slice's removal.",
			Buckets: teardownBuckets,
		}),
		tasksEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reaper_tasks_ended_total",
			Help: "Commands (foreground and background tasks) that ended, by final status: completed, failed, killed, timed_out.",
		}, []string{"status"}),
		tasksOOM: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reaper_tasks_oom_killed_total",
			Help: "Commands of which the kernel's OOM killer killed a process (the session's memory limit was reached).",
		}),
		killed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reaper_processes_killed_total",
			Help: "Processes ended by reaper's kill policy (a session's end, a task stopped or timed out), by phase: sigterm (exited within the grace period), cgroup_kill (killed with the slice), walk (found outside the slice by a walk of /proc and killed).",
		}, []string{"phase"}),
		escapees: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reaper_escapees_found_total",
			Help: "Processes the walk of /proc found outside their session's slice (in process containment: every process of a session).",
		}),
		remaining: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reaper_processes_remaining_total",
			Help: "Processes still alive when a teardown's deadline passed (typically in uninterruptible sleep); each is logged.",
		}),
		sweptInstances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reaper_sweep_dead_instances_total",
			Help: "Dead reaper instances whose leftovers the sweep at start-up found (crash recovery).",
		}),
		sweptProcesses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reaper_sweep_processes_killed_total",
			Help: "Processes left by dead reaper instances that the sweep at start-up killed.",
		}),
		containment: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reaper_containment_info",
			Help: "How sessions' processes are contained: mode cgroup or process; kill is the strongest kill of a slice (cgroup.kill, freeze+SIGKILL, SIGKILL sweep; none in process containment). Always 1.",
		}, []string{"mode", "kill"}),
		operations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_server_operation_duration_seconds",
			Help:    "MCP request or notification duration as observed by the server, from its receipt until the result is sent (OpenTelemetry mcp.server.operation.duration).",
			Buckets: operationBuckets,
		}, []string{"mcp_method_name", "gen_ai_tool_name", "error_type", "network_transport", "mcp_protocol_version"}),
		sessions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_server_session_duration_seconds",
			Help:    "Duration of MCP sessions as observed by the server, from the first request to the end (OpenTelemetry mcp.server.session.duration).",
			Buckets: sessionBuckets,
		}, []string{"network_transport", "mcp_protocol_version"}),
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "reaper_build_info", Help: "The running reaper's version. Always 1.",
		ConstLabels: prometheus.Labels{"version": opts.Version},
	})
	build.Set(1)
	for _, p := range []string{PhaseSIGTERM, PhaseCgroupKill, PhaseWalk} {
		m.killed.WithLabelValues(p) // shown at 0 from the start, so that rate() sees the first kill
	}
	for _, s := range opts.TaskStatuses {
		m.tasksEnded.WithLabelValues(s)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), build,
		m.sessionsEnded, m.sessionTeardown, m.tasksEnded, m.tasksOOM, m.killed, m.escapees, m.remaining,
		m.sweptInstances, m.sweptProcesses, m.containment, m.operations, m.sessions,
	)
	return m
}

// Handler serves the metrics in OpenMetrics 1.0 to a scraper whose Accept header asks for
// application/openmetrics-text (Prometheus does by default), and in the Prometheus text format
// 0.0.4 otherwise. No _created samples: they double the series of every counter and histogram for
// scrapers that keep them as series.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

// SetContainment records the containment mode ("cgroup" or "process") and the strongest kill of a
// slice ("none" in process containment) as reaper_containment_info.
func (m *Metrics) SetContainment(mode, kill string) {
	m.containment.Reset()
	m.containment.WithLabelValues(mode, kill).Set(1)
}

// Usage is what the live sessions hold at one moment (see WatchUsage).
type Usage struct {
	// Sessions is the number of live sessions.
	Sessions int
	// Counted reports that Processes is known (cgroup containment), MemoryCounted that Memory is.
	Counted, MemoryCounted bool
	// Processes and Memory have one entry per session: its processes, its memory in bytes.
	Processes []int
	Memory    []int64
}

// WatchUsage registers the gauges read at each scrape from usage: live sessions, and the processes
// and memory in their slices, as totals and as the largest session's, never per session. It may be
// called once.
func (m *Metrics) WatchUsage(usage func() Usage) {
	m.reg.MustRegister(usageCollector{usage})
}

// SessionEnded counts a session that ran a command and ended, for reason (one of a closed set of
// short words: a label value), after a teardown that took teardown.
func (m *Metrics) SessionEnded(reason string, teardown time.Duration) {
	m.sessionsEnded.WithLabelValues(reason).Inc()
	m.sessionTeardown.Observe(teardown.Seconds())
}

// TaskEnded counts a command that ended with status (one of Options.TaskStatuses), and whether the
// OOM killer killed a process of it.
func (m *Metrics) TaskEnded(status string, oomKilled bool) {
	m.tasksEnded.WithLabelValues(status).Inc()
	if oomKilled {
		m.tasksOOM.Inc()
	}
}

// Kills is what one run of the kill policy ended, by phase (see the Phase constants).
type Kills struct {
	SIGTERM, CgroupKill, Walk int
	// Escapees were found outside their slice by a walk of /proc; Remaining were still alive at the
	// deadline.
	Escapees, Remaining int
}

// Killed counts what one run of the kill policy ended.
func (m *Metrics) Killed(k Kills) {
	m.killed.WithLabelValues(PhaseSIGTERM).Add(float64(k.SIGTERM))
	m.killed.WithLabelValues(PhaseCgroupKill).Add(float64(k.CgroupKill))
	m.killed.WithLabelValues(PhaseWalk).Add(float64(k.Walk))
	m.escapees.Add(float64(k.Escapees))
	m.remaining.Add(float64(k.Remaining))
}

// Swept counts the dead instances the sweep at start-up found, and the processes of theirs it killed.
func (m *Metrics) Swept(instances, processes int) {
	m.sweptInstances.Add(float64(instances))
	m.sweptProcesses.Add(float64(processes))
}

// Operation is one MCP request or notification, with label values bounded by the server.
type Operation struct {
	Method, Tool, ErrorType, Transport, ProtocolVersion string
	Duration                                            time.Duration
}

// MCPOperation records an MCP request or notification.
func (m *Metrics) MCPOperation(op Operation) {
	m.operations.WithLabelValues(op.Method, op.Tool, op.ErrorType, op.Transport, op.ProtocolVersion).Observe(op.Duration.Seconds())
}

// MCPSessionEnded records an MCP session's duration.
func (m *Metrics) MCPSessionEnded(transport, protocolVersion string, d time.Duration) {
	m.sessions.WithLabelValues(transport, protocolVersion).Observe(d.Seconds())
}

// usageCollector reads Usage at each scrape.
type usageCollector struct{ usage func() Usage }

var (
	sessionsActiveDesc = prometheus.NewDesc("reaper_sessions_active",
		"Live sessions and workspaces: those that ran a command, or were opened, and have not ended.", nil, nil)
	processesDesc = prometheus.NewDesc("reaper_session_processes",
		"Processes in all sessions' slices together (cgroup containment only).", nil, nil)
	processesLargestDesc = prometheus.NewDesc("reaper_session_processes_largest",
		"Processes in the slice of the session that has the most (cgroup containment only).", nil, nil)
	memoryDesc = prometheus.NewDesc("reaper_session_memory_bytes",
		"Memory used by all sessions' slices together, from memory.current (where the memory controller is enabled for them: with --memory-max).", nil, nil)
	memoryLargestDesc = prometheus.NewDesc("reaper_session_memory_largest_bytes",
		"Memory used by the session's slice that uses the most, from memory.current (where the memory controller is enabled for them).", nil, nil)
)

func (usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sessionsActiveDesc, processesDesc, processesLargestDesc, memoryDesc, memoryLargestDesc} {
		ch <- d
	}
}

func (c usageCollector) Collect(ch chan<- prometheus.Metric) {
	u := c.usage()
	ch <- prometheus.MustNewConstMetric(sessionsActiveDesc, prometheus.GaugeValue, float64(u.Sessions))
	if u.Counted {
		total, largest := sumMax(u.Processes)
		ch <- prometheus.MustNewConstMetric(processesDesc, prometheus.GaugeValue, float64(total))
		ch <- prometheus.MustNewConstMetric(processesLargestDesc, prometheus.GaugeValue, float64(largest))
	}
	if u.MemoryCounted {
		total, largest := sumMax(u.Memory)
		ch <- prometheus.MustNewConstMetric(memoryDesc, prometheus.GaugeValue, float64(total))
		ch <- prometheus.MustNewConstMetric(memoryLargestDesc, prometheus.GaugeValue, float64(largest))
	}
}

func sumMax[T int | int64](v []T) (sum, largest T) {
	for _, x := range v {
		sum += x
	}
	if len(v) > 0 {
		largest = slices.Max(v)
	}
	return sum, largest
}
