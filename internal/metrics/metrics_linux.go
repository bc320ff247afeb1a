package metrics

import (
	"slices"
	"sync"
	"time"
)

// Options configures Metrics. The zero value is ready to use.
type Options struct {
	// Version is reported as the version label of reaper_build_info; empty means "unknown".
	Version string
	// TaskStatuses are the values reaper_tasks_ended_total's status label takes, shown at 0 from the
	// start so that rate() sees the first; nil shows none before it happens.
	TaskStatuses []string
}

// Metrics holds every metric. Create it with New; it is safe for concurrent use.
type Metrics struct {
	// reaper's own.
	sessionsEnded   *family
	sessionTeardown *family
	tasksEnded      *family
	tasksOOM        *family
	killed          *family
	escapees        *family
	remaining       *family
	sweptInstances  *family
	sweptProcesses  *family
	containment     *family
	build           *family
	refused         *family

	// MCP, as the OpenTelemetry conventions name them.
	operations *family
	sessions   *family

	// mu guards the fields that follow.
	mu    sync.Mutex
	usage func() Usage // set by WatchUsage
	start float64      // process_start_time_seconds, read at the first scrape that can; 0 before
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

// New makes the metrics; Go's runtime and process metrics are read at each scrape besides.
func New(opts Options) *Metrics {
	if opts.Version == "" {
		opts.Version = "unknown"
	}
	m := &Metrics{
		sessionsEnded: newFamily("reaper_sessions_ended_total",
			"Sessions and workspaces that ran a command and ended, by reason: delete (the client's DELETE), idle (the idle timeout), disconnected (stdio EOF, a closed connection), keepalive (pings unanswered), close (workspace_close), expired (a workspace's lease ran out), shutdown, closed.",
			counter, []string{"reason"}, nil),
		sessionTeardown: newFamily("reaper_session_teardown_duration_seconds",
			"Time a session's teardown took: SIGTERM, the grace period, the hard kill, the walks of /proc, the slice's removal.",
			histogram, nil, teardownBuckets),
		tasksEnded: newFamily("reaper_tasks_ended_total",
			"Commands (foreground and background tasks) that ended, by final status: completed, failed, killed, timed_out.",
			counter, []string{"status"}, nil),
		tasksOOM: newFamily("reaper_tasks_oom_killed_total",
			"Commands of which the kernel's OOM killer killed a process (the session's memory limit was reached).",
			counter, nil, nil),
		killed: newFamily("reaper_processes_killed_total",
			"Processes ended by reaper's kill policy (a session's end, a task stopped or timed out), by phase: sigterm (exited within the grace period), cgroup_kill (killed with the slice), walk (found outside the slice by a walk of /proc and killed).",
			counter, []string{"phase"}, nil),
		escapees: newFamily("reaper_escapees_found_total",
			"Processes the walk of /proc found outside their session's slice (in process containment: every process of a session).",
			counter, nil, nil),
		remaining: newFamily("reaper_processes_remaining_total",
			"Processes still alive when a teardown's deadline passed (typically in uninterruptible sleep); each is logged.",
			counter, nil, nil),
		sweptInstances: newFamily("reaper_sweep_dead_instances_total",
			"Dead reaper instances whose leftovers the sweep at start-up found (crash recovery).",
			counter, nil, nil),
		sweptProcesses: newFamily("reaper_sweep_processes_killed_total",
			"Processes left by dead reaper instances that the sweep at start-up killed.",
			counter, nil, nil),
		containment: newFamily("reaper_containment_info",
			"How sessions' processes are contained: mode cgroup or process; kill is the strongest kill of a slice (cgroup.kill, freeze+SIGKILL, SIGKILL sweep; none in process containment). Always 1.",
			gauge, []string{"mode", "kill"}, nil),
		build: newFamily("reaper_build_info", "The running reaper's version. Always 1.", gauge, []string{"version"}, nil),
		refused: newFamily("reaper_refused_total",
			"Requests and connections refused at one of reaper's limits, by limit: connections (all open), connections_unauthenticated, connections_peer (one peer's waiting to authenticate), message (a message's size, depth or values), sessions (all sessions and workspaces), identity_sessions (one identity's).",
			counter, []string{"limit"}, nil),
		operations: newFamily("mcp_server_operation_duration_seconds",
			"MCP request or notification duration as observed by the server, from its receipt until the result is sent (OpenTelemetry mcp.server.operation.duration).",
			histogram, []string{"mcp_method_name", "gen_ai_tool_name", "error_type", "network_transport", "mcp_protocol_version"}, operationBuckets),
		sessions: newFamily("mcp_server_session_duration_seconds",
			"Duration of MCP sessions as observed by the server, from the first request to the end (OpenTelemetry mcp.server.session.duration).",
			histogram, []string{"network_transport", "mcp_protocol_version"}, sessionBuckets),
	}
	m.build.set(1, opts.Version)
	// Shown at 0 from the start, so that rate() sees the first event.
	for _, f := range []*family{m.tasksOOM, m.escapees, m.remaining, m.sweptInstances, m.sweptProcesses} {
		f.touch()
	}
	for _, p := range []string{PhaseSIGTERM, PhaseCgroupKill, PhaseWalk} {
		m.killed.touch(p)
	}
	for _, s := range opts.TaskStatuses {
		m.tasksEnded.touch(s)
	}
	for _, l := range RefusedLimits {
		m.refused.touch(l)
	}
	return m
}

// RefusedLimits are the values of reaper_refused_total's limit label, shown at 0 from the start.
var RefusedLimits = []string{"connections", "connections_unauthenticated", "connections_peer", "message", "sessions", "identity_sessions"}

// Refused counts a request or connection refused at limit (one of RefusedLimits).
func (m *Metrics) Refused(limit string) {
	m.refused.add(1, limit)
}

// gather returns a snapshot of every family, with the usage and the runtime's and the process's
// metrics read now.
func (m *Metrics) gather() []*family {
	var fams []*family
	for _, f := range []*family{
		m.sessionsEnded, m.sessionTeardown, m.tasksEnded, m.tasksOOM, m.killed, m.escapees, m.remaining,
		m.sweptInstances, m.sweptProcesses, m.containment, m.build, m.refused, m.operations, m.sessions,
	} {
		fams = append(fams, f.snapshot())
	}
	m.mu.Lock()
	usage := m.usage
	m.mu.Unlock()
	if usage != nil {
		fams = append(fams, usageFamilies(usage())...)
	}
	return append(fams, m.runtimeFamilies()...)
}

// SetContainment records the containment mode ("cgroup" or "process") and the strongest kill of a
// slice ("none" in process containment) as reaper_containment_info.
func (m *Metrics) SetContainment(mode, kill string) {
	m.containment.reset()
	m.containment.set(1, mode, kill)
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
	// OutputBytes is what every session's output files take together, of OutputBudget.
	OutputBytes, OutputBudget int64
}

// WatchUsage has the gauges of live sessions, and of the processes and memory in their slices, read
// from usage at each scrape: as totals and as the largest session's, never per session. A later call
// replaces the function.
func (m *Metrics) WatchUsage(usage func() Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage = usage
}

// SessionEnded counts a session that ran a command and ended, for reason (one of a closed set of
// short words: a label value), after a teardown that took teardown.
func (m *Metrics) SessionEnded(reason string, teardown time.Duration) {
	m.sessionsEnded.add(1, reason)
	m.sessionTeardown.observe(teardown.Seconds())
}

// TaskEnded counts a command that ended with status (one of Options.TaskStatuses), and whether the
// OOM killer killed a process of it.
func (m *Metrics) TaskEnded(status string, oomKilled bool) {
	m.tasksEnded.add(1, status)
	if oomKilled {
		m.tasksOOM.add(1)
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
	m.killed.add(float64(k.SIGTERM), PhaseSIGTERM)
	m.killed.add(float64(k.CgroupKill), PhaseCgroupKill)
	m.killed.add(float64(k.Walk), PhaseWalk)
	m.escapees.add(float64(k.Escapees))
	m.remaining.add(float64(k.Remaining))
}

// Swept counts the dead instances the sweep at start-up found, and the processes of theirs it killed.
func (m *Metrics) Swept(instances, processes int) {
	m.sweptInstances.add(float64(instances))
	m.sweptProcesses.add(float64(processes))
}

// Operation is one MCP request or notification, with label values bounded by the server.
type Operation struct {
	Method, Tool, ErrorType, Transport, ProtocolVersion string
	Duration                                            time.Duration
}

// MCPOperation records an MCP request or notification.
func (m *Metrics) MCPOperation(op Operation) {
	m.operations.observe(op.Duration.Seconds(), op.Method, op.Tool, op.ErrorType, op.Transport, op.ProtocolVersion)
}

// MCPSessionEnded records an MCP session's duration.
func (m *Metrics) MCPSessionEnded(transport, protocolVersion string, d time.Duration) {
	m.sessions.observe(d.Seconds(), transport, protocolVersion)
}

// usageFamilies are the gauges of one reading of Usage. The per-slice ones are absent where nothing
// counts them: no sample rather than a false 0.
func usageFamilies(u Usage) []*family {
	fams := []*family{constGauge("reaper_sessions_active",
		"Live sessions and workspaces: those that ran a command, or were opened, and have not ended.", float64(u.Sessions)),
		constGauge("reaper_output_bytes", "Disk space every session's output files take together, in the state directory.", float64(u.OutputBytes)),
		constGauge("reaper_output_budget_bytes", "The disk space every session's output files may take together (--output-budget-total).", float64(u.OutputBudget))}
	if u.Counted {
		total, largest := sumMax(u.Processes)
		fams = append(fams,
			constGauge("reaper_session_processes", "Processes in all sessions' slices together (cgroup containment only).", float64(total)),
			constGauge("reaper_session_processes_largest", "Processes in the slice of the session that has the most (cgroup containment only).", float64(largest)))
	}
	if u.MemoryCounted {
		total, largest := sumMax(u.Memory)
		fams = append(fams,
			constGauge("reaper_session_memory_bytes", "Memory used by all sessions' slices together, from memory.current (where the memory controller is enabled for them: with --memory-max).", float64(total)),
			constGauge("reaper_session_memory_largest_bytes", "Memory used by the session's slice that uses the most, from memory.current (where the memory controller is enabled for them).", float64(largest)))
	}
	return fams
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
