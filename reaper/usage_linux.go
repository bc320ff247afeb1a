package reaper

import (
	"maps"
	"slices"
	"time"

	"github.com/cgreaper/reaper/cgroup"
)

// Usage is what the live sessions hold at one moment, and what every session used so far.
type Usage struct {
	// Sessions is the number of live sessions (those that ran a task or may still run one).
	Sessions int
	// Counted reports that processes are counted per slice (cgroup containment); MemoryCounted that
	// memory is too (the memory controller is enabled for the slices: a memory limit is set), and
	// PidsCounted and ThrottlingCounted that refused forks and CPU throttling are (a pids or CPU
	// limit is set).
	Counted, MemoryCounted, PidsCounted, ThrottlingCounted bool
	// Processes has, in cgroup containment, one entry per session that has a slice: the number of
	// processes in it. It is empty in process containment, where counting would take a walk of /proc.
	Processes []int
	// Memory and MemoryPeak have one entry per session whose memory is counted: memory.current and
	// memory.peak of its slice, in bytes.
	Memory, MemoryPeak []int64
	// CPU is the CPU time every session's processes used, and Hits the limits they hit (as far as
	// counted), ended sessions included: totals that only grow (cgroup containment).
	CPU  time.Duration
	Hits cgroup.Hits
	// OutputBytes is what every session's output files take together, of Limits.TotalOutputBudget.
	OutputBytes int64
}

// ended is what the ended sessions used, added as each one ends (see Reaper.forget).
type ended struct {
	cpu  time.Duration
	hits cgroup.Hits
}

// Usage reads what the live sessions hold from their slices, and adds what the ended ones used. It
// reads cgroupfs only and holds no lock while it does.
func (r *Reaper) Usage() Usage {
	r.mu.Lock()
	sessions := slices.Collect(maps.Keys(r.sessions))
	done := r.ended
	r.mu.Unlock()
	u := Usage{
		Sessions: len(sessions), Counted: r.root != nil, MemoryCounted: r.limits.MemoryMax > 0,
		PidsCounted: r.limits.PidsMax > 0, ThrottlingCounted: r.limits.CPUs > 0,
		CPU: done.cpu, Hits: done.hits, OutputBytes: r.outputs.Used(),
	}
	for _, s := range sessions {
		st, counted := s.usage()
		if !counted {
			continue
		}
		u.CPU += st.CPU
		u.Hits = u.Hits.Add(st.Hits)
		if slice := s.currentSlice(); slice != nil {
			if pids, err := slice.Pids(); err == nil {
				u.Processes = append(u.Processes, len(pids))
			}
		}
		if st.MemoryCounted {
			u.Memory = append(u.Memory, st.Memory)
			u.MemoryPeak = append(u.MemoryPeak, st.MemoryPeak)
		}
	}
	return u
}

// currentSlice returns the session's slice, nil before its first command and in process containment.
func (s *Session) currentSlice() *cgroup.Slice {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slice
}

// usage returns what the session's slice counts, and whether anything counts it (false in process
// containment). The counters are the most read so far, so that they never go back (a removed leaf
// takes its count of refused forks along); after the teardown's last reading (endUsage), that
// reading is the answer.
func (s *Session) usage() (cgroup.Stats, bool) {
	if s.r.root == nil {
		return cgroup.Stats{}, false
	}
	s.mu.Lock()
	slice, final, seen := s.slice, s.usageFinal, s.seen
	s.mu.Unlock()
	if slice == nil || final {
		return seen, true
	}
	st, err := slice.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && !s.usageFinal {
		s.seen = mergeStats(s.seen, st)
	}
	return s.seen, true
}

// endUsage takes the teardown's last reading of the session's slice (kill.Report.Usage; nil where
// there was none): from then on, usage answers with it, or with the last reading before.
func (s *Session) endUsage(final *cgroup.Stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if final != nil {
		s.seen = mergeStats(s.seen, *final)
	}
	s.usageFinal = true
}

// mergeStats returns the latest reading of a slice, with each counter at least what an earlier
// reading had.
func mergeStats(earlier, latest cgroup.Stats) cgroup.Stats {
	latest.CPU = max(latest.CPU, earlier.CPU)
	latest.MemoryPeak = max(latest.MemoryPeak, earlier.MemoryPeak)
	latest.Hits = latest.Hits.Max(earlier.Hits)
	return latest
}

// sliceHits reads what the session's slice counts of its limits' hits now; zero without limits or
// before the slice is made (a new slice has hit nothing).
func (s *Session) sliceHits() cgroup.Hits {
	if !s.r.watchHits {
		return cgroup.Hits{}
	}
	slice := s.currentSlice()
	if slice == nil {
		return cgroup.Hits{}
	}
	h, _ := slice.Hits()
	return h
}

// taskHits returns the limits hit while the task ran, as it ends (see TaskInfo.Hits): the session's
// slice's hits since the task started, and its own leaf's OOM kills.
func (s *Session) taskHits(t *task) cgroup.Hits {
	h := s.sliceHits().Sub(t.base.slice)
	h.OOMKills = 0
	if leaf, err := t.leaf.Hits(); err == nil {
		h.OOMKills = leaf.Sub(t.base.leaf).OOMKills
	}
	return h
}

// usageAttrs are the log attributes of what an ended session used: the figures its slice counted,
// or that nothing counted them.
func usageAttrs(st cgroup.Stats, counted bool) []any {
	if !counted {
		return []any{"usage", "not counted (process containment)"}
	}
	attrs := []any{"cpu_seconds", seconds(st.CPU)}
	if st.MemoryCounted {
		attrs = append(attrs, "memory_peak_bytes", st.MemoryPeak, "oom_kills", st.OOMKills)
	}
	if st.PidsCounted {
		attrs = append(attrs, "forks_refused", st.ForksRefused)
	}
	if st.ThrottlingCounted {
		attrs = append(attrs, "cpu_throttled_periods", st.Throttled, "cpu_throttled_seconds", seconds(st.ThrottledTime))
	}
	return attrs
}
