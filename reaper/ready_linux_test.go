package reaper

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/shell"
	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// nsSettings are the PID namespace settings the ready shell's tests run under: without, and with
// where the host gives them (auto goes without where it cannot).
var nsSettings = []PIDNamespace{PIDNamespaceOff, PIDNamespaceAuto}

// awaitReady waits until the session keeps a ready shell and returns it.
func awaitReady(t testing.TB, s *Session) *readyProc {
	t.Helper()
	var rs *readyProc
	testutil.Eventually(t, "a ready shell", func() bool {
		rs, _ = s.readyNow()
		return rs != nil
	})
	return rs
}

// readyNow returns the session's ready shell, and whether one is being started.
func (s *Session) readyNow() (*readyProc, bool) {
	s.ready.mu.Lock()
	defer s.ready.mu.Unlock()
	return s.ready.cur, s.ready.preparing
}

// taken reports whether a command took the ready shell.
func (rs *readyProc) taken() bool {
	select {
	case <-rs.claimed:
		return true
	default:
		return false
	}
}

// TestReadyShellRunsAsBashC runs scripts twice, each time in a new session's first command (a shell
// started for it: bash -c) and in a ready shell, and compares what they print, their exit statuses
// and where they leave the session: the same, but for the name a syntax error gives the script's
// source ("-c" becomes "eval", as the ready shell's doc comment says).
func TestReadyShellRunsAsBashC(t *testing.T) {
	long := ": " + strings.Repeat("x", 60<<10) + "; echo long"
	cases := []struct{ name, script string }{
		{"echo", "echo hi"},
		{"arguments and lines", "echo $0 $# $LINENO\necho $LINENO"},
		{"not found", "echo before\nno_such_command_here\necho after"},
		{"exit", "echo x; exit 3; echo not"},
		{"subshell status", "(exit 4)"},
		{"killed by a signal", "kill -9 $$"},
		{"errexit", "set -e; false; echo not"},
		{"syntax error", "echo a\necho b; if\necho c"},
		{"unterminated quote", `echo "unterminated`},
		{"return at top level", "return 2"},
		{"local at top level", "local x=1"},
		{"trailing backslash", `echo a \`},
		{"here document", "cat <<EOF\nx $((1+1))\nEOF"},
		{"own EXIT trap", "trap 'echo bye' EXIT; echo x"},
		{"exec", "exec echo replaced"},
		{"cd", "cd .. && pwd -P >/dev/null; echo moved"},
		{"cd and exit", "cd /; exit 5"},
		{"stdin", `read -r x; echo "[$x] $?"`},
		{"descriptors", `fds=(/proc/$$/fd/*); echo "${fds[@]##*/}"`},
		{"loader's variable", "echo ${__reaper_command-unset}"},
		{"markers", "env | grep -c '^REAPER_'"},
		{"options", "echo $- $SHLVL; shopt -q login_shell; echo $?"},
		{"text", "echo 'héllo ✓ \t tab'; printf '%s\\n' \"$(printf 'a\\r')\""},
		{"long", long},
	}
	for _, mode := range modes {
		for _, ns := range nsSettings {
			t.Run(mode.String()+"/pidns="+ns.String(), func(t *testing.T) {
				r := newTestReaper(t, mode, Options{PIDNamespace: ns})
				base := t.TempDir()
				warm := newTestSession(t, r, SessionOptions{WorkDir: base})
				run(t, warm, "true")
				run(t, warm, "true")
				for _, c := range cases {
					if warm.Cwd() != base {
						run(t, warm, "cd "+base)
					}
					rs := awaitReady(t, warm)
					got := run(t, warm, c.script)
					if !rs.taken() {
						t.Fatalf("%s: the ready shell was not taken", c.name)
					}
					cold := newTestSession(t, r, SessionOptions{WorkDir: base})
					want := run(t, cold, c.script)
					cold.Close(context.Background())
					want.Output = strings.ReplaceAll(want.Output, "bash: -c: line", "bash: eval: line")
					if got.Output != want.Output || got.ExitCode != want.ExitCode || got.Status != want.Status || got.Cwd != want.Cwd {
						t.Errorf("%s: in a ready shell: %q, exit %d (%s), cwd %s\nstarted for it:   %q, exit %d (%s), cwd %s",
							c.name, shorten(got.Output, 200), got.ExitCode, got.Status, got.Cwd,
							shorten(want.Output, 200), want.ExitCode, want.Status, want.Cwd)
					}
				}
			})
		}
	}
}

// TestReadyShell follows a session's ready shell: none before the second foreground command; then
// one, in the session's leaf and namespace, which the next foreground command runs in (its pid is
// the task's) and a background task leaves alone; one started elsewhere than the session's directory
// now, killed, or whose command file another process tampered with, is not used, and the command runs
// all the same; and the session's end kills the one it has.
func TestReadyShell(t *testing.T) {
	for _, mode := range modes {
		for _, ns := range nsSettings {
			t.Run(mode.String()+"/pidns="+ns.String(), func(t *testing.T) {
				r := newTestReaper(t, mode, Options{PIDNamespace: ns})
				s := newTestSession(t, r, SessionOptions{})
				// Run marks a ready shell as being started before it returns: nothing to wait for.
				run(t, s, "true")
				if rs, preparing := s.readyNow(); rs != nil || preparing {
					t.Fatal("a ready shell after the session's first command")
				}
				run(t, s, "true")
				rs := awaitReady(t, s)
				if _, ok := proc.NewWalker().Stat(rs.t.pid); !ok {
					t.Fatalf("the ready shell %d is not running", rs.t.pid)
				}
				if rs.t.leaf != nil {
					if pids, _ := rs.t.leaf.Pids(); len(pids) != 1 || pids[0] != rs.t.pid {
						t.Errorf("the ready shell's leaf holds %v, want [%d]", pids, rs.t.pid)
					}
				}
				if l := s.List(); len(l.Tasks) != 0 || len(l.Leftovers) != 0 {
					t.Errorf("the session lists its ready shell: %+v", l)
				}

				// A background task leaves it; the next foreground command runs in it.
				ti, err := s.Start("echo bg", "")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Wait(context.Background(), ti.ID, time.Minute); err != nil {
					t.Fatal(err)
				}
				if now, _ := s.readyNow(); now != rs || rs.taken() {
					t.Fatal("a background task took the ready shell")
				}
				inside := innermostPid(t, rs.t.pid)
				if out := run(t, s, "echo $$").Output; !rs.taken() || out != inside+"\n" {
					t.Errorf("the command ran as pid %q; the ready shell was pid %s there (taken: %v)", out, inside, rs.taken())
				}

				// Started before the session's directory changed: left, and the command runs where
				// the session is now.
				dir := t.TempDir()
				run(t, s, "cd "+dir)
				rs = awaitReady(t, s)
				rs.dir = "/somewhere/else" // as if the directory had changed since it started
				if out := run(t, s, "pwd").Output; out != dir+"\n" || rs.taken() {
					t.Errorf("after a change of directory the command printed %q (the stale shell taken: %v)", out, rs.taken())
				}
				awaitGone(t, rs)

				// Killed: left, and the command runs all the same.
				rs = awaitReady(t, s)
				if err := rs.t.kill(); err != nil {
					t.Fatal(err)
				}
				awaitGone(t, rs)
				if out := run(t, s, "echo alive").Output; out != "alive\n" || rs.taken() {
					t.Errorf("after the ready shell was killed the command printed %q (taken: %v)", out, rs.taken())
				}

				// Another process that opens its files through /proc (one of another session of the same
				// user, without PID namespaces) cannot make it run anything but the next command: what
				// it writes into the command file is overwritten, what it writes into the gate is read
				// and dropped; a file it sealed is not used.
				rs = awaitReady(t, s)
				tamper(t, rs.t.pid, "echo injected\x00", 0)
				if out := run(t, s, "echo mine").Output; out != "mine\n" || !rs.taken() {
					t.Errorf("after another process wrote into the ready shell's files the command printed %q (taken: %v)", out, rs.taken())
				}
				rs = awaitReady(t, s)
				tamper(t, rs.t.pid, "", unix.F_SEAL_WRITE)
				if out := run(t, s, "echo mine").Output; out != "mine\n" || rs.taken() {
					t.Errorf("after another process sealed the ready shell's command file the command printed %q (taken: %v)", out, rs.taken())
				}
				awaitGone(t, rs)

				// The session's end: the one it has dies with it.
				run(t, s, "true")
				rs = awaitReady(t, s)
				if _, err := s.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				select {
				case <-rs.gone:
				default:
					t.Error("Close returned before the ready shell had ended")
				}
				if testutil.Running(testutil.Proc{Pid: rs.t.pid, Start: rs.t.start}) {
					t.Errorf("the ready shell %d outlived its session", rs.t.pid)
				}
				assertNoZombies(t)
			})
		}
	}
}

// TestReadyShellIdle: a ready shell left unused for its idle period ends, leaving its leaf empty; with
// PID namespaces the session's init ends with it; and the session starts the next command's shell
// (and init) as it did before it had one.
func TestReadyShellIdle(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s, rs := idleReady(t, newTestReaper(t, mode, Options{}), 200*time.Millisecond)
			awaitGone(t, rs)
			if now, _ := s.readyNow(); now == rs || rs.taken() {
				t.Errorf("the idle ready shell is still the session's (%v) or was taken (%v)", now == rs, rs.taken())
			}
			// The shell held the init's idle clock: the init ends with it (before the shell counts
			// as gone), not an idle period later.
			if in := s.ns.current(); in != nil && !errors.Is(in.Err(), pidns.ErrIdle) {
				t.Errorf("the session's init after its idle ready shell: %v, want ended idle", in.Err())
			}
			if testutil.Running(testutil.Proc{Pid: rs.t.pid, Start: rs.t.start}) {
				t.Errorf("the idle ready shell %d still runs", rs.t.pid)
			}
			if rs.t.leaf != nil {
				if populated, _ := rs.t.leaf.Populated(); populated {
					t.Error("the idle ready shell's leaf is still populated")
				}
			}
			if out := run(t, s, "echo next").Output; out != "next\n" {
				t.Errorf("the next command printed %q", out)
			}
		})
	}
}

// TestReadyShellIdleAfterTask: a task that ended while the ready shell waited keeps the session's
// init to its own idle clock: the shell's end does not end it.
func TestReadyShellIdleAfterTask(t *testing.T) {
	s, rs := idleReady(t, nsReaper(t, ContainCgroup, Options{}), 300*time.Millisecond)
	ti, err := s.Start("true", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(context.Background(), ti.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, rs)
	if err := s.ns.current().Err(); err != nil {
		t.Errorf("the session's init after a task ended during its ready shell's wait: %v, want it serving", err)
	}
}

// idleReady returns a session of r that has run two commands, and its ready shell, which waits idle
// long for a command.
func idleReady(t testing.TB, r *Reaper, idle time.Duration) (*Session, *readyProc) {
	t.Helper()
	r.shellIdle = idle
	s := newTestSession(t, r, SessionOptions{})
	run(t, s, "true")
	run(t, s, "true")
	return s, awaitReady(t, s)
}

// TestNoReadyShell: with Options.NoReadyShell a session keeps none.
func TestNoReadyShell(t *testing.T) {
	r := newTestReaper(t, ContainProcess, Options{NoReadyShell: true, PIDNamespace: PIDNamespaceOff})
	s := newTestSession(t, r, SessionOptions{})
	for range 3 {
		run(t, s, "true")
	}
	if rs, preparing := s.readyNow(); rs != nil || preparing { // Run would have marked one by now
		t.Error("a ready shell with NoReadyShell")
	}
}

// tamper opens the ready shell pid's command file and gate through /proc, as another process of its
// user could: it writes text at the file's start and seals it with seals (if set), and writes lines
// into the gate.
func tamper(t testing.TB, pid int, text string, seals int) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	f, err := os.OpenFile(dir+strconv.Itoa(shell.CommandFD), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(text), 0); err != nil {
		t.Fatal(err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
			t.Fatal(err)
		}
	}
	g, err := os.OpenFile(dir+strconv.Itoa(shell.GateFD), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.WriteString("go\nnow\n"); err != nil {
		t.Fatal(err)
	}
}

// awaitGone waits until an unused ready shell has ended and let go of its files.
func awaitGone(t testing.TB, rs *readyProc) {
	t.Helper()
	select {
	case <-rs.gone:
	case <-time.After(30 * time.Second):
		t.Fatalf("the ready shell %d did not end", rs.t.pid)
	}
}

// innermostPid returns the pid a live process has in its own PID namespace (the last of NSpid).
func innermostPid(t testing.TB, pid int) string {
	t.Helper()
	ns, ok := testutil.StatusField(pid, "NSpid")
	if !ok {
		t.Fatalf("no NSpid for process %d", pid)
	}
	f := strings.Fields(ns)
	return f[len(f)-1]
}
