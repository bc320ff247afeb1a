package inspect

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
)

// TestUsageView: `reaper ps --json` gives what a slice counts, and leaves out (rather than shows as 0)
// what no controller counts for it, and limits that are not set.
func TestUsageView(t *testing.T) {
	for _, tc := range []struct {
		st   cgroup.Stats
		want string
	}{
		{cgroup.Stats{CPU: 1500 * time.Millisecond}, `{"cpu_seconds":1.5}`},
		{cgroup.Stats{CPU: time.Second, MemoryCounted: true, Memory: 100, MemoryPeak: 200, Hits: cgroup.Hits{OOMKills: 1}, Limits: cgroup.Limits{MemoryMax: 1 << 20}},
			`{"cpu_seconds":1,"memory_bytes":100,"memory_peak_bytes":200,"memory_max_bytes":1048576,"oom_kills":1}`},
		{cgroup.Stats{MemoryCounted: true, Memory: 100}, `{"cpu_seconds":0,"memory_bytes":100,"oom_kills":0}`},
		{cgroup.Stats{PidsCounted: true, Pids: 3, Hits: cgroup.Hits{ForksRefused: 7}, Limits: cgroup.Limits{PidsMax: 64}},
			`{"cpu_seconds":0,"pids":3,"pids_max":64,"forks_refused":7}`},
		{cgroup.Stats{ThrottlingCounted: true, Hits: cgroup.Hits{Throttled: 4, ThrottledTime: 250 * time.Millisecond}, Limits: cgroup.Limits{CPUs: 0.5}},
			`{"cpu_seconds":0,"cpu_max":0.5,"cpu_throttled_periods":4,"cpu_throttled_seconds":0.25}`},
	} {
		b, err := json.Marshal(usageView(tc.st))
		if err != nil || string(b) != tc.want {
			t.Errorf("usageView(%+v) = %s, %v; want %s", tc.st, b, err, tc.want)
		}
	}
}
