package metrics

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

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
	m.usage.mu.Lock()
	defer m.usage.mu.Unlock()
	m.usage.read = usage
}

// usageCollector reads Usage at each scrape. Until WatchUsage it collects nothing.
type usageCollector struct {
	// The descriptions of its gauges, fixed at creation.
	sessions, output, outputBudget, processes, processesLargest, memory, memoryLargest *prometheus.Desc

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
	}
}

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sessions, c.output, c.outputBudget, c.processes, c.processesLargest, c.memory, c.memoryLargest} {
		ch <- d
	}
}

// Collect reads the usage once. The per-slice gauges are absent where nothing counts them: no sample
// rather than a false 0.
func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	read := c.read
	c.mu.Unlock()
	if read == nil {
		return
	}
	u := read()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	gauge(c.sessions, float64(u.Sessions))
	gauge(c.output, float64(u.OutputBytes))
	gauge(c.outputBudget, float64(u.OutputBudget))
	if u.Counted {
		total, largest := sumMax(u.Processes)
		gauge(c.processes, float64(total))
		gauge(c.processesLargest, float64(largest))
	}
	if u.MemoryCounted {
		total, largest := sumMax(u.Memory)
		gauge(c.memory, float64(total))
		gauge(c.memoryLargest, float64(largest))
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
