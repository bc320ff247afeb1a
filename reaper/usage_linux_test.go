package reaper

import (
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
)

// TestMergeStats: a later reading of a session's slice gives its current figures, and its counters
// never go back (on kernels before 6.11 a leaf removed takes the forks refused in it along).
func TestMergeStats(t *testing.T) {
	earlier := cgroup.Stats{CPU: time.Second, Memory: 100, MemoryPeak: 500, Pids: 9, Hits: cgroup.Hits{ForksRefused: 7, Throttled: 3}}
	latest := cgroup.Stats{CPU: 2 * time.Second, Memory: 50, MemoryPeak: 400, Pids: 2, Hits: cgroup.Hits{ForksRefused: 4, Throttled: 5, OOMKills: 1}}
	got := mergeStats(earlier, latest)
	want := cgroup.Stats{CPU: 2 * time.Second, Memory: 50, MemoryPeak: 500, Pids: 2, Hits: cgroup.Hits{ForksRefused: 7, Throttled: 5, OOMKills: 1}}
	if got != want {
		t.Errorf("mergeStats =\n%+v, want\n%+v", got, want)
	}
}

// TestUsageAttrs: the end line gives what the slice counted, and only that; without a slice it says
// nothing counted.
func TestUsageAttrs(t *testing.T) {
	st := cgroup.Stats{CPU: 1500 * time.Millisecond, PidsCounted: true, Hits: cgroup.Hits{ForksRefused: 12}}
	got := map[any]any{}
	attrs := usageAttrs(st, true)
	for i := 0; i+1 < len(attrs); i += 2 {
		got[attrs[i]] = attrs[i+1]
	}
	if got["cpu_seconds"] != 1.5 || got["forks_refused"] != int64(12) || len(got) != 2 {
		t.Errorf("usageAttrs = %v, want cpu_seconds and forks_refused alone (memory and throttling not counted)", attrs)
	}
	if attrs := usageAttrs(cgroup.Stats{}, false); len(attrs) != 2 || attrs[0] != "usage" {
		t.Errorf("not counted: %v", attrs)
	}
}
