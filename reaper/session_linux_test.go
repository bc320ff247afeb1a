package reaper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

func TestCloseLeavesNothing(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{})
			s := newTestSession(t, r, SessionOptions{})
			var all []testutil.Proc
			for range 3 {
				ti, err := s.Start("sleep 1000 & echo $!; exec sleep 1000", "background")
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, taskPids(t, s, ti.ID, 1)...)
			}
			res := run(t, s, testutil.Zoo(t.TempDir()))
			all = append(all, s.pidsIn(t, res.Output)...)
			if len(all) != 9 {
				t.Fatalf("expected 9 pids, got %d from %q", len(all), res.Output)
			}
			if res.Leftover < 6 {
				t.Errorf("the zoo left %d processes in the session, want at least 6", res.Leftover)
			}
			slice := ""
			if mode == ContainCgroup {
				s.mu.Lock()
				slice = s.slice.Path()
				s.mu.Unlock()
			}

			rep, err := s.Close(context.Background())
			if err != nil {
				t.Fatalf("Close: %v (report %v)", err, rep)
			}
			t.Logf("close: %v", rep)
			testutil.AssertDead(t, all)
			if d := descendants(t); len(d) != 0 {
				t.Errorf("processes left below us after Close: %v", d)
			}
			assertNoZombies(t)
			if slice != "" {
				if _, err := os.Stat(slice); !os.IsNotExist(err) {
					t.Errorf("slice %s left behind: %v", slice, err)
				}
			}
			if rep.Killed == 0 {
				t.Errorf("report %v: the SIGTERM-ignoring process needs the hard kill", rep)
			}
			if mode == ContainProcess && rep.Found < 9 {
				t.Errorf("report %v: in process containment the walk must find every process", rep)
			}

			// Close again, and concurrently: the same report, nothing more happens.
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					again, err := s.Close(context.Background())
					if err != nil || again.Total() != rep.Total() {
						t.Errorf("second Close = %v, %v; want the first report %v", again, err, rep)
					}
				}()
			}
			wg.Wait()
			if _, err := s.Run(context.Background(), "true", RunOptions{}); !errors.Is(err, ErrSessionClosed) {
				t.Errorf("Run after Close = %v, want ErrSessionClosed", err)
			}
			if _, err := s.Start("true", ""); !errors.Is(err, ErrSessionClosed) {
				t.Errorf("Start after Close = %v, want ErrSessionClosed", err)
			}
		})
	}
}

func TestCloseWithFinishedAndRunningTasks(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{})
			s := newTestSession(t, r, SessionOptions{})
			done, err := s.Start("echo finished", "")
			if err != nil {
				t.Fatal(err)
			}
			if ti, _ := s.Wait(context.Background(), done.ID, time.Minute); ti.Status != Completed {
				t.Fatalf("first task: %+v", ti)
			}
			live, err := s.Start("echo $$; exec sleep 1000", "")
			if err != nil {
				t.Fatal(err)
			}
			pids := taskPids(t, s, live.ID, 1)
			rep, err := s.Close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Total() != 1 {
				t.Errorf("report %v: want exactly the one running process ended", rep)
			}
			testutil.AssertDead(t, pids)
			for _, id := range []string{done.ID, live.ID} {
				ti, err := s.Wait(context.Background(), id, time.Second)
				if err != nil {
					t.Fatalf("task %s after Close: %v", id, err)
				}
				want := map[string]Status{done.ID: Completed, live.ID: Killed}[id]
				if ti.Status != want {
					t.Errorf("task %s status %s, want %s", id, ti.Status, want)
				}
			}
		})
	}
}

func TestForegroundDoesNotWaitForPipe(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{})
			s := newTestSession(t, r, SessionOptions{})
			for _, cmd := range []string{"sleep 3 & echo started", "setsid sleep 3 & echo started", "(sleep 3; echo late) & echo started"} {
				start := time.Now()
				res := run(t, s, cmd)
				if took := time.Since(start); took > time.Second {
					t.Errorf("%q took %v: it waited for the pipe", cmd, took)
				}
				if res.Output != "started\n" || res.Status != Completed || res.Leftover < 1 {
					t.Errorf("%q: %+v", cmd, res)
				}
			}
			l := s.List()
			if len(l.Leftovers) != 3 {
				t.Errorf("List().Leftovers = %+v, want the 3 commands' sleeps", l.Leftovers)
			}
		})
	}
}

func TestOutputOfFastExitIsComplete(t *testing.T) {
	r := newTestReaper(t, ContainProcess, Options{})
	s := newTestSession(t, r, SessionOptions{})
	// The main process writes more than a pipe holds and exits at once; every byte must arrive.
	for i := range 20 {
		res := run(t, s, "head -c 300000 /dev/zero | tr '\\0' x; echo; echo end")
		if res.Total != 300005 || !strings.HasSuffix(res.Output, "x\nend\n") {
			t.Fatalf("round %d: got %d bytes ending %q", i, res.Total, res.Output[max(0, len(res.Output)-10):])
		}
	}
}

// TestForegroundFileOverBudget: a foreground command whose output outgrows the budget, with a
// process it left holding its output open (so the output ends only once the result is built): the
// result describes its file as it stays, head, a line for what was left out, and tail.
func TestForegroundFileOverBudget(t *testing.T) {
	r := newTestReaper(t, ContainProcess, Options{OutputBudget: 256 << 10}) // a tail of 64 KiB
	s := newTestSession(t, r, SessionOptions{})
	res := run(t, s, "sleep 5 & head -c 1000000 /dev/zero | tr '\\0' x; echo; echo end")
	b, err := os.ReadFile(res.File.Path)
	if err != nil {
		t.Fatal(err)
	}
	notice := fmt.Sprintf("\n[... %d bytes of output left out here: %s ...]\n", res.File.Missing, res.File.Cut) // as the file says it
	if res.Total != 1000005 || res.File.Missing == 0 || int64(len(b)) != res.Total-res.File.Missing+int64(len(notice)) ||
		!strings.Contains(string(b), notice) || !strings.HasSuffix(string(b), "x\nend\n") {
		t.Errorf("the result says %d bytes with %d missing (%q); the file holds %d", res.Total, res.File.Missing, res.File.Cut, len(b))
	}
}

func TestWorkingDirectory(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{})
			base := t.TempDir()
			for _, d := range []string{"a", "b", "c", "d", "e"} {
				os.Mkdir(base+"/"+d, 0o755)
			}
			s := newTestSession(t, r, SessionOptions{WorkDir: base})
			for _, tc := range []struct {
				command string
				cwd     string
				code    int
			}{
				{"cd a; sleep 2 &", base + "/a", 0},                                                  // ends with &
				{"cd ../b && exit 3", base + "/b", 3},                                                // exit
				{"cd ../c; echo '__CWD__ /etc'; printf 'REAPER_CWD=/etc\\n/etc\\n'", base + "/c", 0}, // look-alikes
				{"cd ../d && false", base + "/d", 1},                                                 // cd then fail
				{"cd /nonexistent-dir-xyz", base + "/d", 1},                                          // failed cd
				{"cd ../e && sleep 2 &", base + "/d", 0},                                             // the cd goes to the background
				{"cd ../e; (cd /; pwd)", base + "/e", 0},                                             // a subshell's cd
				// A command that writes its own records into the pipe: too long to be a path, not
				// absolute, something after the last record, garbage then the trap's own.
				// (builtin: reaper's own trap function would put its recording back.)
				{`cd /; builtin trap - EXIT; { head -c 60000 /dev/zero | tr '\0' /; printf '\n\0'; } >/dev/fd/97`, base + "/e", 0},
				{`builtin trap - EXIT; printf 'relative\n\0' >/dev/fd/97`, base + "/e", 0},
				{`builtin trap - EXIT; printf '/tmp\n\0/etc\n' >/dev/fd/97`, base + "/e", 0},
				{`head -c 5000 /dev/urandom >/dev/fd/97; printf '\0/etc\n\0' >/dev/fd/97`, base + "/e", 0},
				{"pwd", base + "/e", 0},
			} {
				start := time.Now()
				res := run(t, s, tc.command)
				if res.Cwd != tc.cwd || s.Cwd() != tc.cwd || res.ExitCode != tc.code {
					t.Errorf("%q: cwd %q (session %q), exit %d; want %q, %d", tc.command, res.Cwd, s.Cwd(), res.ExitCode, tc.cwd, tc.code)
				}
				if time.Since(start) > time.Second {
					t.Errorf("%q took %v", tc.command, time.Since(start))
				}
			}
			if res := run(t, s, "pwd"); res.Output != base+"/e\n" {
				t.Errorf("pwd printed %q", res.Output)
			}
			// Environment variables do not persist.
			run(t, s, "export REAPER_TEST_VAR=1")
			if res := run(t, s, "echo ${REAPER_TEST_VAR:-unset}"); res.Output != "unset\n" {
				t.Errorf("environment persisted: %q", res.Output)
			}
			// A directory that vanishes is left for the session's first one, and the caller is told.
			os.RemoveAll(base + "/e")
			run(t, s, "cd "+base+"/a")
			// The next command's shell, started ahead in a, is there before a goes (the case that
			// raced): it must not run the command in a directory of no name.
			if r.keepShell {
				testutil.Eventually(t, "the ready shell", func() bool { return s.ready.id() != "" })
			}
			os.RemoveAll(base + "/a")
			res := run(t, s, "pwd")
			if res.Output != base+"\n" || s.Cwd() != base || !strings.Contains(res.Notice, base+"/a cannot be entered (no such file or directory); the session is back in "+base) {
				t.Errorf("after removing the cwd: output %q notice %q", res.Output, res.Notice)
			}
			if res := run(t, s, "pwd"); res.Notice != "" {
				t.Errorf("the notice again: %q", res.Notice)
			}
		})
	}
}

func TestMarkersAndIsolation(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	s := newTestSession(t, r, SessionOptions{})
	res := run(t, s, "echo $REAPER_SESSION $REAPER_TASK; env | grep -c '^REAPER_'; cat /proc/self/cgroup | grep '^0::'; ls -l /proc/self/fd/0")
	lines := strings.Split(res.Output, "\n")
	if len(lines) < 4 {
		t.Fatalf("output %q", res.Output)
	}
	f := strings.Fields(lines[0])
	if len(f) != 2 || "REAPER_SESSION="+f[0] != s.marker || strings.Contains(f[0], s.ID()) || !strings.HasPrefix(f[1], "t-") {
		t.Errorf("markers %q, want the session's marker (%s, without its id) and a task id", lines[0], s.marker)
	}
	if lines[1] != "2" {
		t.Errorf("%s REAPER_ variables in the task's environment, want only the 2 markers", lines[1])
	}
	if !strings.Contains(lines[2], "/s-1/l-") {
		t.Errorf("task's cgroup %q is not its own leaf in the session's slice", lines[2])
	}
	if !strings.HasSuffix(lines[3], "/dev/null") {
		t.Errorf("stdin is %q, want /dev/null", lines[3])
	}
}

func TestTaskLifecycle(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{MaxTasks: 2, BackgroundTimeout: 2 * time.Second})
			var ended []TaskInfo
			var mu sync.Mutex
			s := newTestSession(t, r, SessionOptions{OnTaskEnd: func(ti TaskInfo) {
				mu.Lock()
				ended = append(ended, ti)
				mu.Unlock()
			}})
			other := newTestSession(t, r, SessionOptions{})

			// A task that ends on its own frees its slot at once.
			quick, err := s.Start("echo out; echo err >&2; exit 7", "quick")
			if err != nil {
				t.Fatal(err)
			}
			ti, err := s.Wait(context.Background(), quick.ID, time.Minute)
			if err != nil || ti.Status != Failed || ti.ExitCode != 7 || ti.Ended.IsZero() {
				t.Fatalf("Wait = %+v, %v; want failed with 7", ti, err)
			}
			// Another session cannot see it.
			if _, _, err := other.Output(context.Background(), quick.ID, OutputOptions{}); !errors.Is(err, ErrUnknownTask) {
				t.Errorf("other session read the task: %v", err)
			}
			if _, _, err := other.Stop(context.Background(), quick.ID); !errors.Is(err, ErrUnknownTask) {
				t.Errorf("other session stopped the task: %v", err)
			}
			long1, err := s.Start("setsid sh -c 'echo $$; exec sleep 1000'; exec sleep 1000", "long")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Start("sleep 1000", "long"); err != nil {
				t.Fatalf("second running task refused (the quick one must not count): %v", err)
			}
			if _, err := s.Start("sleep 1000", "one too many"); !errors.Is(err, ErrTooManyTasks) {
				t.Errorf("third running task: %v, want ErrTooManyTasks", err)
			}
			// Stop kills the whole tree, setsid child included.
			escapee := taskPids(t, s, long1.ID, 1)
			ti, rep, err := s.Stop(context.Background(), long1.ID)
			if err != nil || ti.Status != Killed || ti.Processes != 0 {
				t.Errorf("Stop = %+v, %v, %v", ti, rep, err)
			}
			testutil.AssertDead(t, escapee)
			// The safety net times the other one out.
			l := s.List()
			var long2 string
			for _, x := range l.Tasks {
				if x.Description == "long" && x.ID != long1.ID {
					long2 = x.ID
				}
			}
			ti, _ = s.Wait(context.Background(), long2, time.Minute)
			if ti.Status != TimedOut {
				t.Errorf("background safety net: %+v", ti)
			}
			// Output of the quick task, read to the end, clears it.
			_, c, err := s.Output(context.Background(), quick.ID, OutputOptions{})
			if err != nil || c.Text != "out\nerr\n" {
				t.Errorf("output %q, %v", c.Text, err)
			}
			s.List() // prunes
			if _, err := s.lookup(quick.ID); !errors.Is(err, ErrUnknownTask) {
				t.Errorf("a task read to the end was not cleared: %v", err)
			}
			// OnTaskEnd runs after the task became terminal, so give it a moment.
			var got map[Status]int
			testutil.Eventually(t, "three task-end reports", func() bool {
				mu.Lock()
				defer mu.Unlock()
				got = map[Status]int{}
				for _, e := range ended {
					got[e.Status]++
				}
				return len(ended) >= 3
			})
			if got[Failed] != 1 || got[Killed] != 1 || got[TimedOut] != 1 {
				t.Errorf("OnTaskEnd saw %v, want one failed, one killed, one timed out", got)
			}
		})
	}
}

func TestForegroundTimeoutAndCancel(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := newTestReaper(t, mode, Options{})
			s := newTestSession(t, r, SessionOptions{})
			start := time.Now()
			res, err := s.Run(context.Background(), "setsid sh -c 'echo $$; exec sleep 1000' & echo $$; sleep 1000", RunOptions{Timeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if !res.TimedOut || res.Status != TimedOut || time.Since(start) > 10*time.Second {
				t.Errorf("timeout: %+v after %v", res, time.Since(start))
			}
			if n := len(strings.Fields(res.Output)); n != 2 {
				t.Errorf("want the 2 pids the command printed before its timeout, got %q", res.Output)
			}
			// The command's tree, setsid child included, is gone: nothing is left below us.
			if d := descendants(t, s); len(d) != 0 {
				t.Errorf("processes left after the timeout: %v", d)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			res, err = s.Run(ctx, "sleep 1000", RunOptions{})
			if !errors.Is(err, context.DeadlineExceeded) || res.Status != Killed {
				t.Errorf("cancelled Run = %+v, %v", res, err)
			}
			if l := s.List(); len(l.Leftovers) != 0 {
				t.Errorf("leftovers after timeout and cancel: %+v", l.Leftovers)
			}
			if d := descendants(t, s); len(d) != 0 {
				t.Errorf("processes left after the cancel: %v", d)
			}
		})
	}
}

func TestAutoBackground(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{AutoBackground: 300 * time.Millisecond})
	s := newTestSession(t, r, SessionOptions{})
	res := run(t, s, "echo begun; sleep 1; echo done")
	if res.TaskID == "" || res.Status != Running || res.Output != "begun\n" {
		t.Fatalf("long command was not moved to the background: %+v", res)
	}
	ti, err := s.Wait(context.Background(), res.TaskID, time.Minute)
	if err != nil || ti.Status != Completed || !ti.Background {
		t.Errorf("Wait = %+v, %v", ti, err)
	}
	if _, c, _ := s.Output(context.Background(), res.TaskID, OutputOptions{}); c.Text != "done\n" {
		t.Errorf("the rest of the output: %q", c.Text)
	}
	if res := run(t, s, "echo quick"); res.TaskID != "" || res.Output != "quick\n" {
		t.Errorf("a quick command: %+v", res)
	}
}

func TestBadCommands(t *testing.T) {
	r := newTestReaper(t, ContainProcess, Options{})
	s := newTestSession(t, r, SessionOptions{})
	for _, cmd := range []string{"", "   ", "echo a\x00b", strings.Repeat("x", MaxCommandBytes+1)} {
		if _, err := s.Run(context.Background(), cmd, RunOptions{}); !errors.Is(err, ErrBadCommand) {
			t.Errorf("Run(%.20q) = %v, want ErrBadCommand", cmd, err)
		}
	}
	if _, _, err := s.Output(context.Background(), "t-0000000000000000", OutputOptions{}); !errors.Is(err, ErrUnknownTask) {
		t.Errorf("unknown id: %v", err)
	}
	if res := run(t, s, "echo still serving"); res.Output != "still serving\n" {
		t.Errorf("after bad input: %+v", res)
	}
	if res := run(t, s, "echo "+strings.Repeat("y", 90<<10)+" | wc -c"); strings.TrimSpace(res.Output) != "92161" {
		t.Errorf("a 90 KiB command: %q", res.Output)
	}
}

func TestConcurrentExitStatuses(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{})
	s := newTestSession(t, r, SessionOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Run(context.Background(), "exit "+itoa(i%256), RunOptions{Timeout: 2 * time.Minute})
			if err != nil {
				errs <- err
			} else if res.ExitCode != i%256 {
				errs <- errors.New("command " + itoa(i) + " got exit code " + itoa(res.ExitCode))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := r.kids.Reaped(); n != 0 {
		t.Logf("%d orphans reaped", n)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestRetentionClearsUnreadTasks(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{Retention: 200 * time.Millisecond})
	s := newTestSession(t, r, SessionOptions{})
	ti, err := s.Start("echo never read", "")
	if err != nil {
		t.Fatal(err)
	}
	s.Wait(context.Background(), ti.ID, time.Minute)
	if l := s.List(); len(l.Tasks) != 1 {
		t.Fatalf("a task that just ended is not listed: %+v", l)
	}
	testutil.Eventually(t, "the unread task to be cleared after its retention", func() bool { return len(s.List().Tasks) == 0 })
	if _, err := s.lookup(ti.ID); !errors.Is(err, ErrUnknownTask) {
		t.Errorf("the task after retention: %v", err)
	}
	// Its output file stays readable.
	if _, c, err := s.Output(context.Background(), ti.ID, OutputOptions{}); err != nil || c.Text != "never read\n" {
		t.Errorf("Output after retention: %+v, %v", c, err)
	}
}

func TestPlainShWorks(t *testing.T) {
	r := newTestReaper(t, ContainCgroup, Options{Shell: "/bin/sh"})
	s := newTestSession(t, r, SessionOptions{WorkDir: "/"})
	if res := run(t, s, "cd /tmp && echo $0 && exit 5"); res.Cwd != "/tmp" || res.ExitCode != 5 || !strings.Contains(res.Output, "sh") {
		t.Errorf("with /bin/sh: %+v", res)
	}
	if res := run(t, s, "sleep 3 & pwd"); res.Output != "/tmp\n" || res.Duration > time.Second {
		t.Errorf("with /bin/sh: %+v", res)
	}
}

// TestCloseReturnsWhileAPipeIsHeld: in process containment a process that clears its environment and
// leaves its parent cannot be attributed to its session, and may keep a finished command's output
// pipe open. The session's Close must still return (it once waited for that pipe forever); the process
// dies when the Reaper closes.
func TestCloseReturnsWhileAPipeIsHeld(t *testing.T) {
	r := newTestReaper(t, ContainProcess, Options{})
	s := newTestSession(t, r, SessionOptions{})
	res := run(t, s, `env -i /bin/sh -c '/bin/sleep 1000 & echo $!'`)
	left := s.pidsIn(t, res.Output)
	run(t, s, "true") // clears the first command's task
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Close(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return while an unattributed process held a finished command's pipe")
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.AssertDead(t, left)
}

// TestWorkingDirectoryEachShell: the working directory persists whichever way the shell reaches the
// pipe: bash writes to the descriptor itself, dash (which can name no descriptor above 9) opens it
// again through /dev/fd. With bash it survives a command that ends with exec, one that sets its own
// EXIT trap (whose handler still runs, with the exit status as $?), errexit in such a command, and
// one that removes its own directory (the result says where the next command runs); with dash those
// commands run as they would, and the directory stays where it was.
func TestWorkingDirectoryEachShell(t *testing.T) {
	for _, shell := range []string{"bash", "dash"} {
		t.Run(shell, func(t *testing.T) {
			path, err := exec.LookPath(shell)
			if err != nil {
				t.Skipf("skipped: no %s here", shell)
			}
			r := newTestReaper(t, ContainProcess, Options{Shell: path})
			if r.dupCwd != (shell == "bash") || r.bash != (shell == "bash") {
				t.Errorf("%s: dupCwd %v, bash %v", shell, r.dupCwd, r.bash)
			}
			s := newTestSession(t, r, SessionOptions{})
			dir := t.TempDir()
			for _, d := range []string{"a", "b", "c", "d", "e/f"} {
				os.MkdirAll(dir+"/"+d, 0o755)
			}
			run(t, s, "cd "+dir)
			if res := run(t, s, "pwd"); res.Output != dir+"\n" || s.Cwd() != dir {
				t.Errorf("%s: after cd %s: %q, session %q", shell, dir, res.Output, s.Cwd())
			}
			bash := shell == "bash"
			for _, tc := range []struct {
				command, output string
				code            int
				cwd             string // with bash; dash stays where it was, unless always
				always          bool
			}{
				{"cd D/a && exec sh -c 'echo replaced; exit 6'", "replaced\n", 6, "a", false},
				{"cd D/b; trap 'echo bye $?' EXIT; (exit 3)", "bye 3\n", 3, "b", false},
				{"cd D/c; trap 'echo bye; exit 4' INT EXIT", "bye\n", 4, "c", false},
				{"set -e; cd D/d; trap 'echo h $?' EXIT; false; echo no", "h 1\n", 1, "d", false},
				{"cd D/a; trap '' EXIT; trap - EXIT; trap", "", 0, "a", false}, // prints the recording with bash
				{"cd D/b; (trap 'echo sub' EXIT; cd /); pwd", "sub\n" + dir + "/b\n", 0, "b", true},
			} {
				before := s.Cwd()
				res := run(t, s, strings.ReplaceAll(tc.command, "D/", dir+"/"))
				if bash && strings.HasSuffix(tc.command, "; trap") {
					res.Output = strings.TrimPrefix(res.Output, "trap -- '__reaper_cwd && :' EXIT\n")
				}
				want := before
				if bash || tc.always {
					want = dir + "/" + tc.cwd
				}
				if res.Output != tc.output || res.ExitCode != tc.code || res.Cwd != want {
					t.Errorf("%s: %q: output %q, exit %d, cwd %s; want %q, %d, %s", shell, tc.command, res.Output, res.ExitCode, res.Cwd, tc.output, tc.code, want)
				}
			}
			run(t, s, "cd "+dir+"/e/f")
			res := run(t, s, "cd .. && mkdir g && cd g && rm -rf "+dir+"/e")
			if res.ExitCode != 0 || res.Notice != "" {
				t.Errorf("%s: a command that removed its directory: %+v", shell, res)
			}
			start := s.workDir
			if res := run(t, s, "pwd"); res.Output != start+"\n" || !strings.Contains(res.Notice, "the session is back in "+start) {
				t.Errorf("%s: the next command: %+v", shell, res)
			}
		})
	}
}
