package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/containerd/cgroups/v3/cgroup2/stats"
	"golang.org/x/sys/unix"
)

// Stats is what the kernel counts for a slice and every cgroup below it, read at one moment. A
// figure whose controller is not enabled for the slice is not counted: its Counted flag is false and
// the figure is 0, which then means nothing.
type Stats struct {
	// CPU is the CPU time the slice's processes used, ended ones included (cpu.stat usage_usec):
	// every cgroup2 cgroup counts it, with or without the cpu controller.
	CPU time.Duration
	// MemoryCounted: the memory controller is enabled for the slice (a memory limit is set, or the
	// root was opened with it).
	MemoryCounted bool
	// Memory is memory.current: the bytes the slice uses now. MemoryPeak is memory.peak, the most it
	// used at once since it was made (Linux 5.19 and later; 0 before).
	Memory, MemoryPeak int64
	// PidsCounted: the pids controller is enabled for the slice.
	PidsCounted bool
	// Pids is pids.current: the processes and threads in the slice.
	Pids int64
	// ThrottlingCounted: the cpu controller is enabled for the slice (cpu.stat has nr_throttled).
	ThrottlingCounted bool
	// Hits are the times the slice ran into its limits.
	Hits
	// Limits are the slice's own limits as the kernel has them (0: none).
	Limits Limits
}

// Hits are the times a slice's processes ran into its limits since it was made, as the kernel counts
// them. Each is 0 where its controller is not enabled for the slice (see [Stats]).
type Hits struct {
	// OOM is memory.events oom: the times the slice reached its memory.max and could not reclaim
	// enough, so that the OOM killer was called. OOMKills is oom_kill: the processes it killed.
	// Both are hierarchical: they count the cgroups below too.
	OOM, OOMKills int64
	// ForksRefused is pids.events max: the forks (and clones) that failed at a pids.max.
	ForksRefused int64
	// Throttled is cpu.stat nr_throttled: the periods of cpu.max in which the slice used its quota
	// and its processes waited for the next; ThrottledTime (throttled_usec) is how long they waited.
	Throttled     int64
	ThrottledTime time.Duration
}

// Add returns h plus o.
func (h Hits) Add(o Hits) Hits { return h.each(o, func(a, b int64) int64 { return a + b }) }

// Sub returns h less o, each count at least 0: what happened between two readings of a slice.
func (h Hits) Sub(o Hits) Hits { return h.each(o, func(a, b int64) int64 { return max(0, a-b) }) }

// Max returns each count's larger of h and o.
func (h Hits) Max(o Hits) Hits { return h.each(o, func(a, b int64) int64 { return max(a, b) }) }

// each returns the counts of h and o, each combined by f.
func (h Hits) each(o Hits, f func(a, b int64) int64) Hits {
	return Hits{OOM: f(h.OOM, o.OOM), OOMKills: f(h.OOMKills, o.OOMKills), ForksRefused: f(h.ForksRefused, o.ForksRefused),
		Throttled:     f(h.Throttled, o.Throttled),
		ThrottledTime: time.Duration(f(int64(h.ThrottledTime), int64(o.ThrottledTime)))}
}

// Zero reports whether no limit was hit.
func (h Hits) Zero() bool { return h == Hits{} }

// Stats reads what the kernel counts for the slice (see [Stats]). A slice that is gone is an error
// wrapping os.ErrNotExist.
func (s *Slice) Stats() (Stats, error) {
	st, err := s.stats(cgroup2.StatCPU | cgroup2.StatMemory | cgroup2.StatMemoryEvents | cgroup2.StatPids)
	if err == nil && st.ThrottlingCounted {
		// containerd writes cpu.max but does not read it.
		st.Limits.CPUs, err = readParsed(s.spare, filepath.Join(s.path, "cpu.max"), parseCPUMax)
	}
	return st, err
}

// Hits reads the times the slice ran into its limits (see [Hits]): fewer files than Stats, for a
// reading before and after each command. A slice that is gone is an error wrapping os.ErrNotExist.
func (s *Slice) Hits() (Hits, error) {
	st, err := s.stats(cgroup2.StatCPU | cgroup2.StatMemoryEvents)
	return st.Hits, err
}

// stats reads what mask asks containerd's manager for, and the refused forks, which it does not read.
func (s *Slice) stats(mask cgroup2.StatMask) (Stats, error) {
	controllers, err := readFields(filepath.Join(s.path, "cgroup.controllers"))
	if err != nil {
		return Stats{}, err
	}
	m, err := manager(s.mount, s.path)
	if err != nil {
		return Stats{}, err
	}
	metrics, err := m.StatFiltered(mask)
	if err != nil {
		return Stats{}, fmt.Errorf("stats of %s: %w", s.path, err)
	}
	st := statsFrom(metrics, controllers)
	if st.PidsCounted {
		if st.ForksRefused, err = forksRefused(s.spare, s.path); err != nil {
			return Stats{}, err
		}
	}
	// containerd reads a file that is gone as zeros: a slice removed while it was read is gone, not idle.
	if !exists(s.path) {
		return Stats{}, fmt.Errorf("stats of %s: %w", s.path, unix.ENOENT)
	}
	return st, nil
}

// statsFrom converts what containerd's manager read into Stats, for a slice for which controllers
// are enabled (its cgroup.controllers).
func statsFrom(m *stats.Metrics, controllers []string) Stats {
	st := Stats{
		MemoryCounted:     slices.Contains(controllers, "memory"),
		PidsCounted:       slices.Contains(controllers, "pids"),
		ThrottlingCounted: slices.Contains(controllers, "cpu"),
	}
	if c := m.GetCPU(); c != nil {
		st.CPU = usec(c.GetUsageUsec())
		if st.ThrottlingCounted {
			st.Throttled, st.ThrottledTime = count(c.GetNrThrottled()), usec(c.GetThrottledUsec())
		}
	}
	if mem := m.GetMemory(); mem != nil && st.MemoryCounted {
		st.Memory, st.MemoryPeak, st.Limits.MemoryMax = count(mem.GetUsage()), count(mem.GetMaxUsage()), limit(mem.GetUsageLimit())
	}
	if ev := m.GetMemoryEvents(); ev != nil && st.MemoryCounted {
		st.OOM, st.OOMKills = count(ev.GetOom()), count(ev.GetOomKill())
	}
	if p := m.GetPids(); p != nil && st.PidsCounted {
		st.Pids, st.Limits.PidsMax = count(p.GetCurrent()), limit(p.GetLimit())
	}
	return st
}

// count is a kernel's counter as an int64; one past its range (never seen) reads as the largest.
func count(v uint64) int64 { return int64(min(v, math.MaxInt64)) }

// usec is a count of microseconds as a duration.
func usec(v uint64) time.Duration {
	return time.Duration(count(min(v, math.MaxInt64/1000))) * time.Microsecond
}

// limit is a limit as containerd reads it ("max" is the largest uint64) as Limits has it (0: none).
func limit(v uint64) int64 {
	if v >= math.MaxInt64 {
		return 0
	}
	return int64(v)
}

// forksRefused reads the forks refused at a pids.max in the slice. Since Linux 6.11 pids.events is
// hierarchical and counts a refusal in the cgroup whose limit refused it (the slice), and
// pids.events.local exists; before, the kernel counted it in the cgroup of the process that forked
// (a leaf below the slice), and the count of the slice is the sum of its cgroups'. containerd does not
// read pids.events.
func forksRefused(r Reserve, dir string) (int64, error) {
	n, err := readParsed(r, filepath.Join(dir, "pids.events"), func(b []byte) (int64, error) {
		v, _, err := parseFlat(b, "max")
		return v, err
	})
	if err != nil || exists(filepath.Join(dir, "pids.events.local")) {
		return n, err
	}
	children, err := childDirs(r, dir)
	if err != nil {
		return 0, err
	}
	for _, c := range children {
		m, err := forksRefused(r, filepath.Join(dir, c))
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
			continue // a leaf removed meanwhile
		}
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, nil
}

// parseFlat returns the value of key in the contents of a flat-keyed cgroup file ("key value"
// lines: pids.events, memory.events, cpu.stat), and whether the key is there.
func parseFlat(b []byte, key string) (int64, bool, error) {
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{' '})
		if !ok || string(k) != key {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return 0, true, fmt.Errorf("%s: %q is not a number", key, v)
		}
		return n, true, nil
	}
	return 0, false, nil
}

// parseCPUMax parses the contents of a cpu.max file, "$MAX $PERIOD", as CPUs (0: "max", no limit).
func parseCPUMax(b []byte) (float64, error) {
	f := bytes.Fields(b)
	if len(f) != 2 {
		return 0, fmt.Errorf("cpu.max %q: want a quota and a period", b)
	}
	if string(f[0]) == "max" {
		return 0, nil
	}
	quota, err1 := strconv.ParseInt(string(f[0]), 10, 64)
	period, err2 := strconv.ParseInt(string(f[1]), 10, 64)
	if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
		return 0, fmt.Errorf("cpu.max %q: not a quota and a period", b)
	}
	return float64(quota) / float64(period), nil
}
