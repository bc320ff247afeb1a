package reaper

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/testutil"
)

// stubborn returns a foreground command that leaves a process ignoring SIGTERM, and returns once its
// trap is set, printing its pid.
func stubborn(dir string) string {
	f := filepath.Join(dir, "pid")
	return `sh -c 'trap "" TERM; echo $$ >> ` + f + `; exec sleep 1000' & ` + testutil.AwaitLines(f, 1)
}

// TestPolitePhaseSuffices: processes that honour SIGTERM (a stopped one once it gets SIGCONT) end
// within the grace period, which is not waited out, and nothing is hard-killed.
func TestPolitePhaseSuffices(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{Grace: new(30 * time.Second)})
			s := newTestSession(t, r, SessionOptions{})
			left := s.pidsIn(t, run(t, s, `
for i in 1 2 3; do sleep 1000 & echo $!; done
sh -c 'kill -STOP $$; exec sleep 1000' & echo $!`).Output)
			stopped := left[3]
			testutil.Eventually(t, "the last process to stop itself", func() bool { return proc.Describe(stopped.Pid).State == "T" })
			// A running task whose process group (its shell and 20 children) gets SIGTERM at once.
			ti, err := s.Start("for i in $(seq 20); do sleep 1000 & done; echo $$; wait", "group")
			if err != nil {
				t.Fatal(err)
			}
			taskPids(t, s, ti.ID, 1)
			testutil.Eventually(t, "the task's 21 processes", func() bool { return s.info(s.mustTask(t, ti.ID)).Processes == 21 })
			rep, err := s.Close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Killed != 0 || rep.Terminated != 25 {
				t.Errorf("report %v: want 25 ended by SIGTERM and nothing hard-killed", rep)
			}
			if rep.Duration > 20*time.Second {
				t.Errorf("the teardown took %v: it waited out the grace period instead of noticing everything exited", rep.Duration)
			}
			testutil.AssertDead(t, left)
		})
	}
}

// TestContextCutsGrace: cancelling Close's context ends the grace period at once.
func TestContextCutsGrace(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{Grace: new(time.Hour)})
			s := newTestSession(t, r, SessionOptions{})
			left := s.pidsIn(t, run(t, s, stubborn(t.TempDir())).Output)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			rep, err := s.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Killed != 1 || rep.Duration > time.Minute {
				t.Errorf("report %v: cancelling the context should end the grace period and hard-kill", rep)
			}
			testutil.AssertDead(t, left)
		})
	}
}

// TestCloseWithCancelledContext: a Close whose context is already cancelled (a second shutdown signal
// cancels it) still runs the whole teardown, and returns its report, not the context's error; so does
// every Close after it. Before the fix, 17 of 40 such closes returned an empty report and "context
// canceled" after a complete teardown.
func TestCloseWithCancelledContext(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{Grace: new(time.Hour)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 40 {
		s, err := r.NewSession("cancelled-"+itoa(i), SessionOptions{WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		left := s.pidsIn(t, run(t, s, `sh -c 'trap "" TERM; exec sleep 1000' & echo $!`).Output)
		rep, err := s.Close(ctx)
		if err != nil || rep.Total() != 1 {
			t.Fatalf("close %d with a cancelled context = %v, %v; want the report of one process ended", i, rep, err)
		}
		testutil.AssertDead(t, left)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if again, err := s.Close(ctx); err != nil || again.Total() != 1 {
					t.Errorf("a later close %d = %v, %v; want the same report", i, again, err)
				}
			}()
		}
		wg.Wait()
	}
}

// TestReportsWhatRemains: processes still alive at the close deadline are listed, with their state,
// and the error says so, naming the session once. A deadline of 1ns ends the wait after the kill
// before hundreds of processes can have been torn down, which exercises the report without a real
// D-state process.
func TestReportsWhatRemains(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{Grace: new(time.Duration(0)), CloseTimeout: time.Nanosecond})
	for attempt := 0; ; attempt++ {
		s := newTestSession(t, r, SessionOptions{})
		run(t, s, "i=0; while [ $i -lt 300 ]; do sleep 1000 & i=$((i+1)); done")
		rep, err := s.Close(context.Background())
		if len(rep.Remaining) == 0 {
			if attempt == 4 {
				t.Skip("skipped: 300 processes died faster than the 1ns deadline could be observed, 5 times")
			}
			continue
		}
		for _, p := range rep.Remaining {
			if p.Pid <= 0 || p.State == "" {
				t.Errorf("remaining process without pid or state: %+v", p)
			}
		}
		if err == nil || !strings.Contains(err.Error(), "remain") || strings.Count(err.Error(), s.ID()) != 1 {
			t.Errorf("error %v should name the session once and say what remains", err)
		}
		break
	}
	// They were killed; let them finish dying, and leave the Reaper's slice, before the Reaper's own
	// close, whose deadline is 1ns too (it once found 3 still in a leaf under load, and failed).
	testutil.Eventually(t, "the remaining processes to die", func() bool { return len(descendants(t)) == 0 })
	testutil.Eventually(t, "the Reaper's slice to empty", func() bool {
		pids, err := r.instance.Pids()
		return err == nil && len(pids) == 0
	})
}

// TestKilledBeforeRemoval: Killed is open while the session lives, and closed once its processes
// are dead, escapees too, before the teardown's end; by the time Close returns it is closed.
func TestKilledBeforeRemoval(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{Grace: new(time.Duration(0))})
			s := newTestSession(t, r, SessionOptions{})
			left := s.pidsIn(t, run(t, s, `for i in 1 2; do sleep 1000 & echo $!; done; setsid sleep 1000 & echo $!`).Output)
			select {
			case <-s.Killed():
				t.Fatal("Killed is closed before the session's end")
			default:
			}
			closed := make(chan error, 1)
			go func() {
				_, err := s.Close(context.Background())
				closed <- err
			}()
			select {
			case <-s.Killed():
			case <-time.After(time.Minute):
				t.Fatal("Killed was not closed within a minute of Close")
			}
			if alive := testutil.Alive(left); len(alive) > 0 {
				t.Errorf("running when Killed was closed: %v", alive)
			}
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Minute):
				t.Fatal("Close did not return within a minute of Killed")
			}
		})
	}
}

// TestAbandonLeavesNothing: the last resort of a server whose guard died and whose shutdown did not
// end in time kills every session's processes, a SIGTERM-proof one too, and removes the slice and
// the state directory, which the dead guard cannot: in the VM lane, a server that exited after
// killing alone left both behind (test/e2e's SIGKILL reaper column). It runs while Close is under
// way, stuck in the grace period of a process that ignores SIGTERM, as in the program; Close ends
// too.
func TestAbandonLeavesNothing(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{Grace: new(time.Hour)})
			s := newTestSession(t, r, SessionOptions{})
			left := s.pidsIn(t, run(t, s, stubborn(t.TempDir())+"; sleep 1000 & echo $!").Output)
			if len(left) != 2 {
				t.Fatalf("the session's processes: %v, want 2", left)
			}
			self := r.Instance()
			closed := make(chan error, 1)
			go func() { closed <- r.Close(context.Background()) }()
			testutil.Eventually(t, "the SIGTERM-proof process alone", func() bool {
				return !testutil.Running(left[1]) && testutil.Running(left[0])
			})
			if err := r.Abandon(); err != nil {
				t.Fatalf("Abandon: %v", err)
			}
			testutil.AssertDead(t, left)
			select {
			case err := <-closed:
				t.Logf("Close after Abandon: %v", err)
			case <-time.After(testutil.Slow(30 * time.Second)):
				t.Fatal("Close did not end after Abandon")
			}
			for _, p := range []string{self.StateDir, self.Slice} {
				if _, err := os.Stat(p); p != "" && !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s is left after Abandon (%v)", p, err)
				}
			}
			if mode == ContainCgroup && self.Slice == "" {
				t.Error("no slice recorded in cgroup containment")
			}
		})
	}
}
