package metrics

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Usage is what the live sessions hold at one moment, and what every session used so far (see
// WatchUsage).
type Usage struct {
	// Sessions is the number of live sessions.
	Sessions int
	// Counted reports that Processes, CPU and the session's slices are known (cgroup containment);
	// MemoryCounted that Memory, MemoryPeak and OOMKills are, PidsCounted that ForksRefused is, and
	// ThrottlingCounted that Throttled and ThrottledTime are.
	Counted, MemoryCounted, PidsCounted, ThrottlingCounted bool
	// Processes, Memory and MemoryPeak have one entry per live session: its processes, its memory
	// and the most memory it used at once, in bytes.
	Processes          []int
	Memory, MemoryPeak []int64
	// CPU is the CPU time every session's processes used; OOMKills, ForksRefused, Throttled and
	// ThrottledTime the limits they hit: processes the OOM killer killed, forks refused at the pids
	// limit, periods of the CPU limit in which they were throttled and how long they waited. Ended
	// sessions are included: these only grow.
	CPU                               time.Duration
	OOMKills, ForksRefused, Throttled int64
	ThrottledTime                     time.Duration
	// OutputBytes is what every session's output files take together, of OutputBudget.
	OutputBytes, OutputBudget int64
}

// WatchUsage has the gauges of live sessions, and of the processes and memory in their slices, read
// from usage at each scrape: as totals and as the largest session's, never per session. A later call
// replaces the function.
func (m *Metrics) WatchUsage(usage func() Usage) {
	m.usage.mu.Lock()
	defer m.usage.mu.Unlock()
	m.usage.read = usage
}

// usageCollector reads Usage at each scrape. Until WatchUsage it collects nothing.
type usageCollector struct {
	// The descriptions of its gauges and counters, fixed at creation.
	sessions, output, outputBudget, processes, processesLargest, memory, memoryLargest, peakLargest *prometheus.Desc
	cpu, oomKills, forksRefused, throttled, throttledTime                                           *prometheus.Desc

	// mu guards the field that follows.
	mu   sync.Mutex
	read func() Usage
}

func newUsageCollector() *usageCollector {
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &usageCollector{
		sessions: desc("reaper_sessions_active",
			"Live sessions and workspaces: those that ran a command, or were opened, and have not ended."),
		output: desc("reaper_output_bytes",
			"Disk space every session's output files take together, in the state directory."),
		outputBudget: desc("reaper_output_budget_bytes",
			"The disk space every session's output files may take together (--output-budget-total)."),
		processes: desc("reaper_session_processes",
			"Processes in all sessions' slices together (cgroup containment only)."),
		processesLargest: desc("reaper_session_processes_largest",
			"Processes in the slice of the session that has the most (cgroup containment only)."),
		memory: desc("reaper_session_memory_bytes",
			"Memory used by all sessions' slices together, from memory.current (where the memory controller is enabled for them: with --memory-max)."),
		memoryLargest: desc("reaper_session_memory_largest_bytes",
			"Memory used by the session's slice that uses the most, from memory.current (where the memory controller is enabled for them)."),
		peakLargest: desc("reaper_session_memory_peak_largest_bytes",
			"The most memory a live session's slice used at once, of the session that used the most, from memory.peak (where the memory controller is enabled for them)."),
		cpu: desc("reaper_session_cpu_seconds_total",
			"CPU time used by the processes of every session, ended ones included, from their slices' cpu.stat (cgroup containment only)."),
		oomKills: desc("reaper_session_oom_kills_total",
			"Processes of sessions killed by the OOM killer, at a session's memory limit (--memory-max), ended sessions included, from memory.events."),
		forksRefused: desc("reaper_session_forks_refused_total",
			"Forks refused at a session's process limit (--pids-max), ended sessions included, from pids.events."),
		throttled: desc("reaper_session_cpu_throttled_periods_total",
			"Periods of a session's CPU limit (--cpu-max, 100 ms each) in which its processes used their quota and were held back, ended sessions included, from cpu.stat nr_throttled."),
		throttledTime: desc("reaper_session_cpu_throttled_seconds_total",
			"Time the processes of sessions were held back at their CPU limit (--cpu-max), ended sessions included, from cpu.stat throttled_usec."),
	}
}

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sessions, c.output, c.outputBudget, c.processes, c.processesLargest, c.memory, c.memoryLargest,
		c.peakLargest, c.cpu, c.oomKills, c.forksRefused, c.throttled, c.throttledTime} {
		ch <- d
	}
}

// Collect reads the usage once. The per-slice gauges and counters are absent where nothing counts
// them: no sample rather than a false 0.
func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	read := c.read
	c.mu.Unlock()
	if read == nil {
		return
	}
	u := read()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(c.sessions, float64(u.Sessions))
	gauge(c.output, float64(u.OutputBytes))
	gauge(c.outputBudget, float64(u.OutputBudget))
	if !u.Counted {
		return
	}
	total, largest := sumMax(u.Processes)
	gauge(c.processes, float64(total))
	gauge(c.processesLargest, float64(largest))
	counter(c.cpu, u.CPU.Seconds())
	if u.MemoryCounted {
		total, largest := sumMax(u.Memory)
		gauge(c.memory, float64(total))
		gauge(c.memoryLargest, float64(largest))
		_, peak := sumMax(u.MemoryPeak)
		gauge(c.peakLargest, float64(peak))
		counter(c.oomKills, float64(u.OOMKills))
	}
	if u.PidsCounted {
		counter(c.forksRefused, float64(u.ForksRefused))
	}
	if u.ThrottlingCounted {
		counter(c.throttled, float64(u.Throttled))
		counter(c.throttledTime, u.ThrottledTime.Seconds())
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
