package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// writeFiles writes each file's content into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStatsFromFiles reads a fake slice with the files a kernel with the memory, pids and cpu
// controllers shows, through containerd's manager as on a real one.
func TestStatsFromFiles(t *testing.T) {
	mount, slice := fakeTree(t, "cpu memory pids")
	writeFiles(t, slice, map[string]string{
		"cpu.stat":          "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\nnr_periods 40\nnr_throttled 7\nthrottled_usec 250000\n",
		"cpu.max":           "20000 100000\n",
		"memory.stat":       "anon 4096\nfile 0\n",
		"memory.current":    "3145728\n",
		"memory.peak":       "67100000\n",
		"memory.max":        "67108864\n",
		"memory.events":     "low 0\nhigh 0\nmax 40\noom 2\noom_kill 3\noom_group_kill 0\n",
		"pids.current":      "5\n",
		"pids.max":          "64\n",
		"pids.events":       "max 4\n",
		"pids.events.local": "max 4\n",
	})
	s := &Slice{mount: mount, path: slice}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{
		CPU: 1500 * time.Millisecond, MemoryCounted: true, Memory: 3 << 20, MemoryPeak: 67100000, PidsCounted: true, Pids: 5,
		ThrottlingCounted: true,
		Hits:              Hits{OOM: 2, OOMKills: 3, ForksRefused: 4, Throttled: 7, ThrottledTime: 250 * time.Millisecond},
		Limits:            Limits{MemoryMax: 64 << 20, PidsMax: 64, CPUs: 0.2},
	}
	if st != want {
		t.Errorf("Stats =\n%+v, want\n%+v", st, want)
	}
	hits, err := s.Hits()
	if err != nil || hits != want.Hits {
		t.Errorf("Hits = %+v, %v; want %+v", hits, err, want.Hits)
	}
}

// TestStatsNotCounted: what a controller counts is not reported where the controller is not enabled
// for the slice (files of its name a fake tree has notwithstanding), but CPU time is: every cgroup2
// cgroup counts it. Limits set to "max" read as none.
func TestStatsNotCounted(t *testing.T) {
	mount, slice := fakeTree(t, "")
	writeFiles(t, slice, map[string]string{
		"cpu.stat":      "usage_usec 2000\nuser_usec 1000\nsystem_usec 1000\n",
		"memory.events": "oom_kill 9\n",
		"pids.events":   "max 9\n",
	})
	st, err := (&Slice{mount: mount, path: slice}).Stats()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stats{CPU: 2 * time.Millisecond}); st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}

	mount, slice = fakeTree(t, "memory pids")
	writeFiles(t, slice, map[string]string{"memory.stat": "anon 0\n", "memory.current": "0\n", "pids.current": "0\n", "pids.events": "max 0\n"})
	st, err = (&Slice{mount: mount, path: slice}).Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Limits != (Limits{}) || !st.MemoryCounted || !st.PidsCounted || st.ThrottlingCounted {
		t.Errorf("memory.max and pids.max at max: Stats = %+v, want counted memory and pids without limits", st)
	}
}

// TestForksRefusedAcrossKernels: since Linux 6.11 the slice whose pids.max refused a fork counts it
// (hierarchically, beside pids.events.local); before, the leaf of the process that forked did, and the
// slice's count is its leaves'.
func TestForksRefusedAcrossKernels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		local  bool
		slice  string
		leaves []string
		want   int64
	}{
		{"counted in the leaves (before 6.11)", false, "max 0\n", []string{"max 3\n", "max 2\n"}, 5},
		{"counted where the limit is (6.11 and later)", true, "max 4\n", []string{"max 0\n", "max 0\n"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, slice := fakeTree(t, "pids")
			writeFiles(t, slice, map[string]string{"pids.events": tc.slice})
			if tc.local {
				writeFiles(t, slice, map[string]string{"pids.events.local": tc.slice})
			}
			for i, content := range tc.leaves {
				leaf := filepath.Join(slice, "l-"+string(rune('1'+i)))
				os.Mkdir(leaf, 0o755)
				writeFiles(t, leaf, map[string]string{"pids.events": content})
				if tc.local {
					writeFiles(t, leaf, map[string]string{"pids.events.local": content})
				}
			}
			if n, err := forksRefused(nil, slice); err != nil || n != tc.want {
				t.Errorf("forksRefused = %d, %v; want %d", n, err, tc.want)
			}
		})
	}
}

func TestParseCPUMax(t *testing.T) {
	for in, want := range map[string]float64{"max 100000\n": 0, "20000 100000\n": 0.2, "150000 100000": 1.5, "50000 50000\n": 1} {
		if got, err := parseCPUMax([]byte(in)); err != nil || got != want {
			t.Errorf("parseCPUMax(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "max", "1 2 3", "x 100000", "20000 0", "-1 100000"} {
		if got, err := parseCPUMax([]byte(in)); err == nil {
			t.Errorf("parseCPUMax(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseFlat(t *testing.T) {
	b := []byte("low 0\nhigh 1\nmax 40\noom 2\noom_kill 3\n")
	for key, want := range map[string]int64{"max": 40, "oom": 2, "oom_kill": 3, "low": 0} {
		if v, ok, err := parseFlat(b, key); v != want || !ok || err != nil {
			t.Errorf("%s = %d, %v, %v; want %d", key, v, ok, err, want)
		}
	}
	if v, ok, err := parseFlat(b, "oom_group_kill"); v != 0 || ok || err != nil {
		t.Errorf("a missing key = %d, %v, %v", v, ok, err)
	}
	if _, _, err := parseFlat([]byte("max x\n"), "max"); err == nil {
		t.Error("a value that is no number was read")
	}
}

func TestHitsArithmetic(t *testing.T) {
	a := Hits{OOM: 1, OOMKills: 2, ForksRefused: 10, Throttled: 5, ThrottledTime: time.Second}
	b := Hits{OOM: 1, OOMKills: 1, ForksRefused: 12, Throttled: 2, ThrottledTime: time.Millisecond}
	if got := a.Sub(b); got != (Hits{OOMKills: 1, Throttled: 3, ThrottledTime: time.Second - time.Millisecond}) {
		t.Errorf("Sub = %+v: want each count at least 0", got)
	}
	if got := a.Add(b); got != (Hits{OOM: 2, OOMKills: 3, ForksRefused: 22, Throttled: 7, ThrottledTime: time.Second + time.Millisecond}) {
		t.Errorf("Add = %+v", got)
	}
	if got := a.Max(b); got != (Hits{OOM: 1, OOMKills: 2, ForksRefused: 12, Throttled: 5, ThrottledTime: time.Second}) {
		t.Errorf("Max = %+v", got)
	}
	if a.Zero() || !(Hits{}).Zero() {
		t.Error("Zero is wrong")
	}
}

// TestStatsOfAGoneSlice: a slice that is gone has no stats, rather than zeros.
func TestStatsOfAGoneSlice(t *testing.T) {
	mount, slice := fakeTree(t, "memory")
	os.RemoveAll(slice)
	s := &Slice{mount: mount, path: slice}
	if _, err := s.Stats(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stats of a gone slice: %v, want ErrNotExist", err)
	}
	if _, err := s.Hits(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Hits of a gone slice: %v, want ErrNotExist", err)
	}
}

// TestStatsOnThisHost reads a real slice in which a busy loop ran: its CPU time is counted on every
// cgroup2 host; memory and processes where the host offers their controllers (and then the busy loop
// holds some memory, and a shell and its loop at least one pid); nothing is counted that is not offered.
// It stays readable once the processes are killed, and the CPU time they used stays in it.
func TestStatsOnThisHost(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("stats")
	if err != nil {
		t.Fatal(err)
	}
	offered, _ := readFields(filepath.Join(s.Path(), "cgroup.controllers"))
	spawn(t, s, `i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo ready`, 0)
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("controllers %v: %+v", offered, st)
	if st.CPU <= 0 {
		t.Errorf("no CPU time counted after a busy loop: %+v", st)
	}
	if st.MemoryCounted != slices.Contains(offered, "memory") || st.PidsCounted != slices.Contains(offered, "pids") ||
		st.ThrottlingCounted != slices.Contains(offered, "cpu") {
		t.Errorf("counted %+v with the controllers %v", st, offered)
	}
	if st.MemoryCounted && (st.Memory <= 0 || st.MemoryPeak < st.Memory) {
		t.Errorf("memory %d, peak %d: want some, and a peak at least as high", st.Memory, st.MemoryPeak)
	}
	if st.PidsCounted && st.Pids < 1 {
		t.Errorf("pids.current %d with the shell still there", st.Pids)
	}
	if !st.Hits.Zero() || st.Limits != (Limits{}) {
		t.Errorf("hits %+v or limits %+v without limits", st.Hits, st.Limits)
	}
	killAndWait(t, s)
	after, err := s.Stats()
	if err != nil || after.CPU < st.CPU {
		t.Errorf("after the kill: %+v, %v; want the CPU time kept (%v)", after, err, st.CPU)
	}
}
