package cgroup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// escapees starts, besides the main shell, every kind of process that leaves a process group or its
// parent: a setsid child, a double-forked daemon, a nohup child, a SIGTERM-ignoring process and a
// stopped one. Each prints its own pid.
const escapees = `
setsid sh -c 'echo $$; exec sleep 1000' &
sh -c 'sh -c "echo \$\$; exec sleep 1000" &' &
nohup sh -c 'echo $$; exec sleep 1000' 2>/dev/null &
sh -c 'trap "" TERM; echo $$; exec sleep 1000' &
sh -c 'echo $$; kill -STOP $$; exec sleep 1000' &
echo $$
`

func TestSpawnIntoSliceFromTheStart(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("s-1")
	if err != nil {
		t.Fatal(err)
	}
	st := spawn(t, s, "echo $$; echo ready; exec sleep 1000", 1)
	rel := strings.TrimPrefix(s.Path(), r.Info().Mountpoint)
	if st.first != "0::"+rel {
		t.Errorf("first cgroup line of the child = %q, want %q: the child was not born in the slice", st.first, "0::"+rel)
	}
	if !inSlice(t, s, st.pids[0].Pid) {
		t.Errorf("pid %d is not in %s", st.pids[0].Pid, s.Path())
	}
}

func TestKillCatchesEscapees(t *testing.T) {
	r := testRoot(t)
	if r.Info().Kill != KillFile {
		t.Skipf("skipped: this kernel offers %v, not cgroup.kill", r.Info().Kill)
	}
	s, err := r.Create("session")
	if err != nil {
		t.Fatal(err)
	}
	st := spawn(t, s, escapees+"echo ready; exec sleep 1000", 6)
	for _, p := range st.pids {
		if !inSlice(t, s, p.Pid) {
			t.Errorf("pid %d (%s) is not in the slice", p.Pid, statLine(p.Pid))
		}
	}
	if populated, err := s.Populated(); !populated || err != nil {
		t.Fatalf("Populated() = %v, %v before the kill", populated, err)
	}
	killAndWait(t, s)
	if populated, _ := s.Populated(); populated {
		t.Error("slice still populated after WaitEmpty reported it empty")
	}
	testutil.AssertDead(t, st.pids)
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if exists(s.Path()) {
		t.Errorf("%s still exists after Remove", s.Path())
	}
}

func TestKillNestedLeaves(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("session")
	if err != nil {
		t.Fatal(err)
	}
	var all []testutil.Proc
	for i := range 3 {
		leaf, err := s.Create(fmt.Sprintf("task-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, spawn(t, leaf, "sleep 1000 & echo $!; echo ready; wait", 1).pids...)
	}
	pids, _ := s.Pids()
	if len(pids) != 6 {
		t.Errorf("Pids() of the session = %v, want 6 (3 leaves x shell + sleep)", pids)
	}
	// The processes are single-threaded: the thread ids are their pids.
	if tids, _ := s.Threads(); !slices.Equal(slices.Sorted(slices.Values(tids)), slices.Sorted(slices.Values(pids))) {
		t.Errorf("Threads() of the session = %v, want the pids %v", tids, pids)
	}
	// Killing one leaf leaves its siblings alone.
	leaf0, _ := s.Leaf("task-0")
	killAndWait(t, leaf0)
	testutil.AssertDead(t, all[:1])
	for _, p := range all[1:] {
		if !testutil.Running(p) {
			t.Errorf("pid %d in a sibling leaf died with task-0", p.Pid)
		}
	}
	killAndWait(t, s)
	testutil.AssertDead(t, all)
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if exists(s.Path()) {
		t.Errorf("%s and its leaves still exist after Remove", s.Path())
	}
}

func TestKillThousandProcesses(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("many")
	if err != nil {
		t.Fatal(err)
	}
	spawn(t, s, "i=0; while [ $i -lt 1000 ]; do sleep 1000 & i=$((i+1)); done; echo ready; wait", 0)
	waitPids(t, s, 1001)
	killAndWait(t, s)
	if pids, _ := s.Pids(); len(pids) != 0 {
		t.Errorf("%d processes left", len(pids))
	}
}

// TestFreezeAndThaw: a frozen slice reports "frozen 1", its processes do not run, it still dies of
// cgroup.kill, and Thaw on a gone slice is not an error.
func TestFreezeAndThaw(t *testing.T) {
	r := testRoot(t)
	if r.Info().Kill > KillFreeze { // weaker than the freezer: a smaller method is a stronger one
		t.Skipf("skipped: this kernel has no cgroup v2 freezer (%v)", r.Info().Kill)
	}
	s, err := r.Create("frozen")
	if err != nil {
		t.Fatal(err)
	}
	counter := filepath.Join(t.TempDir(), "count")
	st := spawn(t, s, "(while :; do echo x >> "+counter+"; sleep 0.01; done) & echo $!; echo ready; wait", 1)
	frozen, err := s.Freeze(time.Now().Add(testutil.Slow(10 * time.Second)))
	if err != nil || !frozen {
		t.Fatalf("Freeze = %v, %v", frozen, err)
	}
	before, _ := os.ReadFile(counter)
	time.Sleep(100 * time.Millisecond) // a frozen writer must not write: give it time to (not) do so
	if after, _ := os.ReadFile(counter); len(after) != len(before) {
		t.Errorf("a process of the frozen slice wrote %d bytes", len(after)-len(before))
	}
	if err := s.Thaw(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the thawed writer to write again", func() bool {
		after, _ := os.ReadFile(counter)
		return len(after) > len(before)
	})
	if _, err := s.Freeze(time.Now().Add(testutil.Slow(10 * time.Second))); err != nil {
		t.Fatal(err)
	}
	killAndWait(t, s) // a frozen cgroup still dies of cgroup.kill
	testutil.AssertDead(t, st.pids)
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := s.Thaw(); err != nil {
		t.Errorf("Thaw of a removed slice: %v", err)
	}
}

// TestWaitEmptyIsBounded: WaitEmpty on a slice that stays populated returns false at the deadline,
// and at once when its context is cancelled, without an error.
func TestWaitEmptyIsBounded(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("busy")
	if err != nil {
		t.Fatal(err)
	}
	spawn(t, s, "echo ready; exec sleep 1000", 0)
	start := time.Now()
	if empty, err := s.WaitEmpty(context.Background(), time.Now().Add(50*time.Millisecond)); empty || err != nil {
		t.Errorf("WaitEmpty of a populated slice = %v, %v; want false, nil", empty, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if empty, err := s.WaitEmpty(ctx, time.Now().Add(time.Hour)); empty || err != nil {
		t.Errorf("WaitEmpty with a cancelled context = %v, %v; want false, nil", empty, err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the two bounded waits took %v", d)
	}
}

func TestKillEmptyAndVanished(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("empty")
	if err != nil {
		t.Fatal(err)
	}
	if empty, err := s.WaitEmpty(context.Background(), time.Now()); !empty || err != nil {
		t.Errorf("WaitEmpty of an empty slice = %v, %v", empty, err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	// A slice that is gone is empty, not an error.
	if err := s.Kill(); err != nil {
		t.Errorf("Kill of a removed slice: %v", err)
	}
	if empty, err := s.WaitEmpty(context.Background(), time.Now()); !empty || err != nil {
		t.Errorf("WaitEmpty of a removed slice = %v, %v", empty, err)
	}
	if err := s.Remove(); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	if p, err := s.Populated(); p || err != nil {
		t.Errorf("Populated of a removed slice = %v, %v", p, err)
	}
	if pids, err := s.Pids(); len(pids) != 0 || err != nil {
		t.Errorf("Pids of a removed slice = %v, %v", pids, err)
	}
}

func TestRemoveRefusesPopulated(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("busy")
	if err != nil {
		t.Fatal(err)
	}
	spawn(t, s, "echo ready; exec sleep 1000", 0)
	err = s.Remove()
	if err == nil || !strings.Contains(err.Error(), s.Path()) {
		t.Errorf("Remove of a populated slice = %v, want an error naming %s", err, s.Path())
	}
	if !exists(s.Path()) {
		t.Error("populated slice was removed")
	}
}

func TestSlicesEnumeratesWhatIsLeft(t *testing.T) {
	info := requireCgroup2(t)
	path := filepath.Join(info.Mountpoint, testutil.UniqueName("reaper-test-"))
	r1, err := OpenRoot(Options{Root: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { destroy(t, path) })
	a, _ := r1.Create("a")
	r1.Create("b")
	st := spawn(t, a, "echo $$; echo ready; exec sleep 1000", 1)

	// A second Root on the same path (as a restarted reaper would open) finds both and can kill them.
	r2, err := OpenRoot(Options{Root: path})
	if err != nil {
		t.Fatal(err)
	}
	names, err := r2.Slices()
	if err != nil || strings.Join(names, ",") != "a,b" {
		t.Fatalf("Slices() = %v, %v; want [a b]", names, err)
	}
	for _, n := range names {
		s, err := r2.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		killAndWait(t, s)
		if err := s.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.AssertDead(t, st.pids)
	if names, _ := r2.Slices(); len(names) != 0 {
		t.Errorf("slices left: %v", names)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("root itself should remain: %v", err)
	}
}
