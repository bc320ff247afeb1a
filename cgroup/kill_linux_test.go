package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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
	if !inSlice(t, s, st.pids[0].pid) {
		t.Errorf("pid %d is not in %s", st.pids[0].pid, s.Path())
	}
}

func TestKillCatchesEscapees(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   KillOptions
		phase  Phase
		method KillMethod
	}{
		{"cgroup.kill", KillOptions{Method: KillFile}, PhaseKill, KillFile},
		{"freeze", KillOptions{Method: KillFreeze}, PhaseKill, KillFreeze},
		{"signal-sweep", KillOptions{Method: KillSignal}, PhaseKill, KillSignal},
		// The SIGTERM-ignoring process outlives the grace period, so the hard kill still runs.
		{"grace-then-kill", KillOptions{Grace: 300 * time.Millisecond}, PhaseKill, KillFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRoot(t)
			s, err := r.Create("session")
			if err != nil {
				t.Fatal(err)
			}
			st := spawn(t, s, escapees+"echo ready; exec sleep 1000", 6)
			for _, p := range st.pids {
				if !inSlice(t, s, p.pid) {
					t.Errorf("pid %d (%s) is not in the slice", p.pid, statLine(p.pid))
				}
			}
			rep, err := s.Kill(context.Background(), tc.opts)
			if err != nil {
				t.Fatalf("Kill: %v (report %+v)", err, rep)
			}
			if rep.Phase != tc.phase || rep.Method != tc.method {
				t.Errorf("report phase %v method %v, want %v %v", rep.Phase, rep.Method, tc.phase, tc.method)
			}
			if rep.Processes < 6 || len(rep.Remaining) != 0 {
				t.Errorf("report %+v: want at least 6 processes seen and none remaining", rep)
			}
			if populated, _ := s.Populated(); populated {
				t.Error("slice still populated after Kill returned")
			}
			assertDead(t, st.pids)
			if err := s.Remove(); err != nil {
				t.Fatal(err)
			}
			if exists(s.Path()) {
				t.Errorf("%s still exists after Remove", s.Path())
			}
		})
	}
}

func TestKillNestedLeaves(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("session")
	if err != nil {
		t.Fatal(err)
	}
	var all []proc
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
	if _, err := leaf0.Kill(context.Background(), KillOptions{}); err != nil {
		t.Fatal(err)
	}
	assertDead(t, all[:1])
	for _, p := range all[1:] {
		if !running(p) {
			t.Errorf("pid %d in a sibling leaf died with task-0", p.pid)
		}
	}
	if _, err := s.Kill(context.Background(), KillOptions{}); err != nil {
		t.Fatal(err)
	}
	assertDead(t, all)
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if exists(s.Path()) {
		t.Errorf("%s and its leaves still exist after Remove", s.Path())
	}
}

func TestPolitePhaseSuffices(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("polite")
	if err != nil {
		t.Fatal(err)
	}
	// Well-behaved: they die of SIGTERM. The stopped one needs the SIGCONT that follows it.
	st := spawn(t, s, `
for i in 1 2 3; do sleep 1000 & echo $!; done
sh -c 'echo $$; kill -STOP $$; exec sleep 1000' &
echo ready; wait`, 4)
	rep, err := s.Kill(context.Background(), KillOptions{Grace: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Phase != PhasePolite || rep.Killed != 0 {
		t.Errorf("report %+v: want phase SIGTERM with nothing hard-killed", rep)
	}
	if rep.Duration > 20*time.Second {
		t.Errorf("polite kill took %v: it waited out the grace period instead of noticing the slice was empty", rep.Duration)
	}
	assertDead(t, st.pids)
}

func TestKillThousandProcesses(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("many")
	if err != nil {
		t.Fatal(err)
	}
	spawn(t, s, "i=0; while [ $i -lt 1000 ]; do sleep 1000 & i=$((i+1)); done; echo ready; wait", 0)
	waitPids(t, s, 1001)
	rep, err := s.Kill(context.Background(), KillOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Killed != 1001 {
		t.Errorf("Killed = %d, want 1001", rep.Killed)
	}
	if pids, _ := s.Pids(); len(pids) != 0 {
		t.Errorf("%d processes left", len(pids))
	}
}

func TestKillFrozenSlice(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("frozen")
	if err != nil {
		t.Fatal(err)
	}
	st := spawn(t, s, "sleep 1000 & echo $!; sh -c 'trap \"\" TERM; echo $$; exec sleep 1000' & echo ready; wait", 2)
	if err := writeFile(s.Path(), "cgroup.freeze", "1"); err != nil {
		t.Fatal(err)
	}
	frozen, err := waitEvent(context.Background(), s.Path(), "frozen", true, time.Now().Add(10*time.Second))
	if err != nil || !frozen {
		t.Fatalf("slice did not freeze: %v", err)
	}
	rep, err := s.Kill(context.Background(), KillOptions{Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Phase != PhaseKill {
		t.Errorf("phase %v: a process ignoring SIGTERM is in the slice, want the hard kill", rep.Phase)
	}
	assertDead(t, st.pids)
}

func TestKillReportsWhatRemains(t *testing.T) {
	r := testRoot(t)
	// With a deadline of 1ns the wait after cgroup.kill ends before hundreds of processes can have
	// been torn down, which exercises the report of survivors without a real D-state process.
	var rep KillReport
	var s *Slice
	var err error
	for attempt := 0; ; attempt++ {
		// A fresh slice each time: children forked into a slice while its cgroup.kill runs die.
		if s, err = r.Create(fmt.Sprintf("slow-%d", attempt)); err != nil {
			t.Fatal(err)
		}
		spawn(t, s, "i=0; while [ $i -lt 300 ]; do sleep 1000 & i=$((i+1)); done; echo ready; wait", 0)
		waitPids(t, s, 301)
		rep, err = s.Kill(context.Background(), KillOptions{Timeout: time.Nanosecond})
		if errors.Is(err, ErrNotEmpty) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if attempt == 4 {
			t.Skip("skipped: 300 processes died faster than the 1ns deadline could be observed, 5 times")
		}
	}
	if len(rep.Remaining) == 0 {
		t.Fatal("ErrNotEmpty without a list of remaining processes")
	}
	for _, p := range rep.Remaining {
		if p.Pid <= 0 || p.State == "" {
			t.Errorf("remaining process without pid or state: %+v", p)
		}
	}
	if !strings.Contains(err.Error(), s.Path()) || !strings.Contains(err.Error(), "remain") {
		t.Errorf("error %q should name the slice and say what remains", err)
	}
	// A second kill with a sane deadline finishes the job.
	if _, err := s.Kill(context.Background(), KillOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestKillEmptyAndVanished(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("empty")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Kill(context.Background(), KillOptions{Grace: time.Hour})
	if err != nil || rep.Phase != PhaseNone || rep.Processes != 0 {
		t.Errorf("Kill of an empty slice = %+v, %v; want phase none, no error", rep, err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	// A slice that is gone is empty, not an error.
	if _, err := s.Kill(context.Background(), KillOptions{}); err != nil {
		t.Errorf("Kill of a removed slice: %v", err)
	}
	if err := s.Remove(); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	if p, err := s.Populated(); p || err != nil {
		t.Errorf("Populated of a removed slice = %v, %v", p, err)
	}
}

func TestKillContextCutsGrace(t *testing.T) {
	r := testRoot(t)
	s, err := r.Create("stubborn")
	if err != nil {
		t.Fatal(err)
	}
	st := spawn(t, s, "sh -c 'trap \"\" TERM; echo $$; exec sleep 1000' & echo ready; wait", 1)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	rep, err := s.Kill(ctx, KillOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Phase != PhaseKill || rep.Duration > time.Minute {
		t.Errorf("report %+v: cancelling ctx should end the grace period and hard-kill", rep)
	}
	assertDead(t, st.pids)
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
	path := filepath.Join(info.Mountpoint, randName("reaper-test-"))
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
		if _, err := s.Kill(context.Background(), KillOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	assertDead(t, st.pids)
	if names, _ := r2.Slices(); len(names) != 0 {
		t.Errorf("slices left: %v", names)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("root itself should remain: %v", err)
	}
}
