package metrics

import (
	"log/slog"
	"net/http"
	"strings"
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
	// Logger receives what a scrape could not collect (the scrape serves the rest). Nil discards.
	Logger *slog.Logger
}

// Metrics holds every metric. Create it with New; it is safe for concurrent use.
type Metrics struct {
	// All fixed at creation.
	reg     *prometheus.Registry
	handler http.Handler
	usage   *usageCollector

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
	refused         *prometheus.CounterVec
	sessionCPU      prometheus.Histogram
	sessionPeak     prometheus.Histogram

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

// RefusedLimits are the values of reaper_refused_total's limit label, shown at 0 from the start.
var RefusedLimits = []string{"connections", "connections_unauthenticated", "connections_peer", "connections_identity", "message", "sessions", "identity_sessions"}

// operationBuckets are the OpenTelemetry conventions' advice for mcp.server.operation.duration, with
// 600 s added: the bash tool's longest timeout.
var operationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600}

// sessionBuckets span a throwaway session (a client's server/discover probe) to a working day.
var sessionBuckets = []float64{0.1, 1, 10, 60, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400}

// teardownBuckets span an empty slice's removal to a grace period and a stuck process's deadline.
var teardownBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30}

// sessionCPUBuckets span a session that ran `echo hi` to one that kept a CPU busy for a working day.
var sessionCPUBuckets = []float64{0.01, 0.1, 1, 10, 60, 600, 3600, 28800}

// sessionPeakBuckets span a shell's few MiB to 64 GiB, by powers of 4.
var sessionPeakBuckets = prometheus.ExponentialBuckets(1<<20, 4, 9)

// maxScrapes bounds the scrapes served at once; more are answered 503 at once rather than each
// gathering everything anew.
const maxScrapes = 4

// New makes the metrics, in a registry of their own with the Go runtime's and the process's.
func New(opts Options) *Metrics {
	if opts.Version == "" {
		opts.Version = "unknown"
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogramVec := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		usage: newUsageCollector(),
		sessionsEnded: counterVec("reaper_sessions_ended_total",
			"Sessions and workspaces that ran a command and ended, by reason: delete (the client's DELETE), idle (the idle timeout), disconnected (stdio EOF, a closed connection), keepalive (pings unanswered), close (workspace_close), expired (a workspace's lease ran out), shutdown, closed.",
			"reason"),
		sessionTeardown: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "reaper_session_teardown_duration_seconds",
			Help:    "Time a session's teardown took: SIGTERM, the grace period, the hard kill, the walks of /proc, the slice's removal.",
			Buckets: teardownBuckets}),
		tasksEnded: counterVec("reaper_tasks_ended_total",
			"Commands (foreground and background tasks) that ended, by final status: completed, failed, killed, timed_out.",
			"status"),
		tasksOOM: counter("reaper_tasks_oom_killed_total",
			"Commands of which the kernel's OOM killer killed a process (the session's memory limit was reached)."),
		killed: counterVec("reaper_processes_killed_total",
			"Processes ended by reaper's kill policy (a session's end, a task stopped or timed out), by phase: sigterm (exited within the grace period), cgroup_kill (killed with the slice), walk (found outside the slice by a walk of /proc and killed).",
			"phase"),
		escapees: counter("reaper_escapees_found_total",
			"Processes the walk of /proc found outside their session's slice (in process containment: every process of a session)."),
		remaining: counter("reaper_processes_remaining_total",
			"Processes still alive when a teardown's deadline passed (typically in uninterruptible sleep); each is logged."),
		sweptInstances: counter("reaper_sweep_dead_instances_total",
			"Dead reaper instances whose leftovers the sweep at start-up found (crash recovery)."),
		sweptProcesses: counter("reaper_sweep_processes_killed_total",
			"Processes left by dead reaper instances that the sweep at start-up killed."),
		containment: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "reaper_containment_info",
			Help: "How sessions' processes are contained: mode cgroup or process; kill is the strongest kill of a slice (cgroup.kill, freeze+SIGKILL, SIGKILL sweep; none in process containment). Always 1."},
			[]string{"mode", "kill"}),
		sessionCPU: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "reaper_session_cpu_seconds",
			Help:    "CPU time the processes of each ended session used, from its slice's cpu.stat (cgroup containment only).",
			Buckets: sessionCPUBuckets}),
		sessionPeak: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "reaper_session_memory_peak_bytes",
			Help:    "The most memory each ended session's processes used at once, from its slice's memory.peak (where the memory controller is enabled for them: with --memory-max).",
			Buckets: sessionPeakBuckets}),
		refused: counterVec("reaper_refused_total",
			"Requests and connections refused at one of reaper's limits, by limit: connections (all open), connections_unauthenticated, connections_peer (one peer's waiting to authenticate), connections_identity (one identity's once authenticated), message (a message's size, depth or values), sessions (all sessions and workspaces), identity_sessions (one identity's).",
			"limit"),
		operations: histogramVec("mcp_server_operation_duration_seconds",
			"MCP request or notification duration as observed by the server, from its receipt until the result is sent (OpenTelemetry mcp.server.operation.duration).",
			operationBuckets, "mcp_method_name", "gen_ai_tool_name", "error_type", "network_transport", "mcp_protocol_version"),
		sessions: histogramVec("mcp_server_session_duration_seconds",
			"Duration of MCP sessions as observed by the server, from the first request to the end (OpenTelemetry mcp.server.session.duration).",
			sessionBuckets, "network_transport", "mcp_protocol_version"),
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "reaper_build_info", Help: "The running reaper's version. Always 1.",
		ConstLabels: prometheus.Labels{"version": valid(opts.Version)}})
	build.Set(1)
	m.reg.MustRegister(
		m.sessionsEnded, m.sessionTeardown, m.tasksEnded, m.tasksOOM, m.killed, m.escapees, m.remaining,
		m.sweptInstances, m.sweptProcesses, m.containment, build, m.refused, m.operations, m.sessions, m.sessionCPU, m.sessionPeak,
		m.usage, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Shown at 0 from the start, so that rate() sees the first event (the counters without labels are).
	for _, p := range []string{PhaseSIGTERM, PhaseCgroupKill, PhaseWalk} {
		m.killed.WithLabelValues(p)
	}
	for _, s := range opts.TaskStatuses {
		m.tasksEnded.WithLabelValues(valid(s))
	}
	for _, l := range RefusedLimits {
		m.refused.WithLabelValues(l)
	}
	hopts := promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: maxScrapes}
	if opts.Logger != nil {
		hopts.ErrorLog = slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn)
	}
	m.handler = promhttp.HandlerFor(m.reg, hopts)
	return m
}

// Handler serves the metrics in the format the scraper's Accept header prefers: OpenMetrics 1.0 (as
// Prometheus asks by default), the Prometheus text format 0.0.4 (without an Accept header), or the
// protobuf format; compressed if the scraper accepts it. No _created samples: they double the series
// of every counter and histogram for scrapers that keep them as series.
func (m *Metrics) Handler() http.Handler { return m.handler }

// valid returns s with what is not UTF-8 replaced: the client refuses such a label value (WithLabelValues
// would panic), and a value a client sent must not break an event's count.
func valid(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// Refused counts a request or connection refused at limit (one of RefusedLimits).
func (m *Metrics) Refused(limit string) {
	m.refused.WithLabelValues(valid(limit)).Inc()
}

// SetContainment records the containment mode ("cgroup" or "process") and the strongest kill of a
// slice ("none" in process containment) as reaper_containment_info.
func (m *Metrics) SetContainment(mode, kill string) {
	m.containment.Reset()
	m.containment.WithLabelValues(valid(mode), valid(kill)).Set(1)
}

// SessionEnded counts a session that ran a command and ended, for reason (one of a closed set of
// short words: a label value), after a teardown that took teardown.
func (m *Metrics) SessionEnded(reason string, teardown time.Duration) {
	m.sessionsEnded.WithLabelValues(valid(reason)).Inc()
	m.sessionTeardown.Observe(teardown.Seconds())
}

// SessionUse is what an ended session's processes used, where its slice counted it.
type SessionUse struct {
	CPU time.Duration
	// MemoryPeak is the most memory they used at once, where MemoryCounted.
	MemoryPeak    int64
	MemoryCounted bool
}

// SessionUsed records what an ended session used (cgroup containment only: call it for sessions
// whose slice counted it).
func (m *Metrics) SessionUsed(u SessionUse) {
	m.sessionCPU.Observe(u.CPU.Seconds())
	if u.MemoryCounted {
		m.sessionPeak.Observe(float64(u.MemoryPeak))
	}
}

// TaskEnded counts a command that ended with status (one of Options.TaskStatuses), and whether the
// OOM killer killed a process of it.
func (m *Metrics) TaskEnded(status string, oomKilled bool) {
	m.tasksEnded.WithLabelValues(valid(status)).Inc()
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
	m.operations.WithLabelValues(valid(op.Method), valid(op.Tool), valid(op.ErrorType), valid(op.Transport),
		valid(op.ProtocolVersion)).Observe(op.Duration.Seconds())
}

// MCPSessionEnded records an MCP session's duration.
func (m *Metrics) MCPSessionEnded(transport, protocolVersion string, d time.Duration) {
	m.sessions.WithLabelValues(valid(transport), valid(protocolVersion)).Observe(d.Seconds())
}
