package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/mcptest"
	"github.com/cgreaper/reaper/internal/testutil"
)

// The laptop case: an MCP client (an IDE, an agent) starts `reaper serve` over stdio in its own
// cgroup, which holds the client too, so reaper cannot take it over: no controller can be enabled in
// a cgroup with processes, and a login session's scope is root's. On a systemd host reaper asks
// systemd for a delegated scope of its own and moves its server there. These tests play it in the
// VM lane's guest b (systemd as PID 1): the "client" is a process of a transient scope that
// `systemd-run --scope` makes without delegation, which then runs reaper; the test speaks MCP to
// reaper over systemd-run's standard input and output.

// laptopCase is one way of starting reaper from a client's cgroup.
type laptopCase struct {
	user bool // an unprivileged user from a login-like scope (root's, below user-UID.slice), who has a user manager
	// runtimeDir, if set, is the XDG_RUNTIME_DIR reaper gets: a directory with no bus in it is a
	// user whose manager cannot be reached.
	runtimeDir func(t *testing.T, u testutil.TestUser) string
}

// TestLaptopScope: a stdio reaper with --memory-max started in a scope it shares with its client,
// as root and as a user with a user manager, moves into a delegated scope of its own, says so in its
// first log line, and applies its limit there: a 300 MiB allocation is OOM-killed and the result
// says so. The client and reaper's guard stay in the client's scope; the session's processes die
// when the client closes reaper's input, and reaper's scope goes with them.
func TestLaptopScope(t *testing.T) {
	needSystemd(t)
	for _, who := range []string{"root", "user"} {
		t.Run(who, func(t *testing.T) {
			c := startLaptop(t, laptopCase{user: who == "user"})
			manager := "system manager"
			if who == "user" {
				manager = "user manager"
			}
			first := c.firstLine(t)
			if !strings.Contains(first, "cgroup containment in the delegated scope reaper-") || !strings.Contains(first, "asked of systemd's "+manager) {
				t.Fatalf("reaper's first log line does not say it moved into a scope of its own asked of systemd's %s: %q\n%s", manager, first, c.s.stderr)
			}
			server := serverOf(t, c.guard)
			serverCg, guardCg, clientCg := procCgroup(t, server), procCgroup(t, c.guard), procCgroup(t, c.client.Pid)
			t.Logf("client %s, guard %s, server %s", clientCg, guardCg, serverCg)
			if !strings.HasSuffix(clientCg, "/"+c.unit) || guardCg != clientCg {
				t.Errorf("the client (%s) and reaper's guard (%s) are not both in the client's scope %s", clientCg, guardCg, c.unit)
			}
			scope := filepath.Dir(serverCg)
			if !strings.HasPrefix(filepath.Base(scope), "reaper-r") || !strings.HasSuffix(scope, ".scope") || filepath.Base(serverCg) != "supervisor" {
				t.Fatalf("reaper's server is in %s, not in the leaf supervisor of a scope reaper-r….scope", serverCg)
			}
			if who == "user" && !strings.HasPrefix(scope, fmt.Sprintf("/user.slice/user-%d.slice/user@%d.service/", c.u.Uid, c.u.Uid)) {
				t.Errorf("reaper's scope %s is not the user manager's", scope)
			}

			res := mcptest.Call(t, c.s.cs, "bash", map[string]any{"command": testutil.HelperEnv("alloc") + " E2E_ALLOC_MIB=300 " + strconv.Quote(c.self)})
			text := textOf(res)
			t.Logf("result: %s", text)
			if strings.Contains(text, "allocated all") {
				t.Fatalf("the allocation of 300 MiB went through under a limit of 64 MiB:\n%s", text)
			}
			if want := "killed by the out-of-memory killer: this session's processes together reached its memory limit of 64 MiB"; !strings.Contains(text, want) {
				t.Errorf("the result does not say %q:\n%s", want, text)
			}
			slices, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", scope, "reaper", "r*", "s-*"))
			if len(slices) != 1 {
				t.Fatalf("the session's slices below %s: %v", scope, slices)
			}
			if got := cgroupFile(t, slices[0], "memory.max"); got != strconv.Itoa(64<<20) {
				t.Errorf("the session's memory.max is %s, want %d", got, 64<<20)
			}
			if n := cgroupValue(t, slices[0], "memory.events", "oom_kill"); n < 1 {
				t.Errorf("the session's memory.events counts %d OOM kills, want at least 1", n)
			}

			bg := bash(t, c.s.cs, "sleep 1000 & echo $!; "+testutil.ShowNS+"; wait", "run_in_background", true)
			var out string
			testutil.Eventually(t, "the background task's pids", func() bool {
				_, o := mcptest.TaskOutput(t, c.s.cs, bg.TaskID, false)
				out += o
				return strings.Count(out, "\n") >= 2
			})
			left := testutil.PidsIn(t, out)
			c.s.stdin.Close() // the client's end
			select {
			case <-c.s.done:
			case <-time.After(testutil.Slow(30 * time.Second)):
				t.Fatalf("reaper did not exit after its input closed:\n%s", c.s.stderr)
			}
			testutil.AwaitDead(t, left, testutil.Slow(10*time.Second))
			testutil.Eventually(t, "reaper's scope to go", func() bool {
				_, err := os.Stat(filepath.Join("/sys/fs/cgroup", scope))
				return os.IsNotExist(err)
			})
			if !testutil.Running(c.client) {
				t.Error("the client died with reaper")
			}
		})
	}
}

// TestLaptopNoUserBus: a user's stdio reaper whose user manager cannot be reached (its
// XDG_RUNTIME_DIR has no bus) stays where it was started, in process containment, and says why its
// limit is off: no delegated scope, and why not.
func TestLaptopNoUserBus(t *testing.T) {
	needSystemd(t)
	c := startLaptop(t, laptopCase{user: true, runtimeDir: func(t *testing.T, u testutil.TestUser) string {
		d := filepath.Join(u.Home, "run")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, u.Uid, u.Gid); err != nil {
			t.Fatal(err)
		}
		return d
	}})
	warning := c.awaitLine(t, "per-session limits not applied")
	t.Logf("%s", warning)
	for _, want := range []string{"no delegated scope of its own", "user manager", "no systemd manager answers", "/run/bus"} {
		if !strings.Contains(warning, want) {
			t.Errorf("the warning does not say %q: %s", want, warning)
		}
	}
	if r := bash(t, c.s.cs, "cat /proc/self/cgroup"); !strings.Contains(r.Output, "/"+c.unit) {
		t.Errorf("a task of reaper's runs elsewhere than the client's scope %s: %q", c.unit, r.Output)
	}
}

// TestLaptopNoSystemd: where no systemd runs (the VM lane's guest a: cgroup2 alone, no init
// system), a root stdio reaper with --memory-max in a cgroup it shares with the test says why its
// limit is off: the processes it cannot move, and no systemd to ask for a scope.
func TestLaptopNoSystemd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root")
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("skipped: systemd runs here (TestLaptopScope tests this host)")
	}
	if b, _ := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); !strings.Contains(string(b), "memory") {
		t.Skip("skipped: no unified cgroup2 with the memory controller at /sys/fs/cgroup (test/vm's guest a has one)")
	}
	s := startStdio(t, "--memory-max", "64M", "--state-dir", t.TempDir())
	if !s.stderr.Await("per-session limits not applied") {
		t.Fatalf("no warning:\n%s", s.stderr)
	}
	warning := lineWith(s.stderr.String(), "per-session limits not applied")
	t.Logf("%s", warning)
	for _, want := range []string{"not ours to move", "no delegated scope of its own", "system manager", "no systemd manager answers"} {
		if !strings.Contains(warning, want) {
			t.Errorf("the warning does not say %q: %s", want, warning)
		}
	}
}

// laptop is reaper started over stdio from a client's scope.
type laptop struct {
	s      *stdioServer
	unit   string        // the client's scope
	guard  int           // reaper's guard (systemd-run and the shell exec it)
	client testutil.Proc // the client's other process, in its scope
	self   string        // this test binary, where reaper's user can run it
	u      testutil.TestUser
}

// startLaptop starts, with systemd-run, a scope without delegation that holds a client (a process
// sleeping) and reaper serve --memory-max 64M over stdio, as root or as a user from below
// user-UID.slice with the user's manager started; it connects to reaper and waits for the client's
// pid. Cleanup stops the scope.
func startLaptop(t *testing.T, lc laptopCase) *laptop {
	t.Helper()
	c := &laptop{unit: testutil.UniqueName("reaper-e2e-client-") + ".scope", self: os.Args[0]}
	reaperBin := bin
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/root"}
	run := []string{"--scope", "--quiet", "--collect", "--unit=" + c.unit}
	if lc.user {
		c.u = testutil.User(t) // first: removed after its manager and processes have stopped
		userManager := fmt.Sprintf("user@%d.service", c.u.Uid)
		systemctl(t, "start", userManager)
		t.Cleanup(func() { exec.Command("systemctl", "stop", userManager).Run() })
		// The binaries, where the user can run them.
		dir, err := os.MkdirTemp("", "reaper-e2e-laptop-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		reaperBin, c.self = filepath.Join(dir, "reaper"), filepath.Join(dir, "e2e.test")
		for from, to := range map[string]string{bin: reaperBin, os.Args[0]: c.self} {
			if err := copyFile(from, to); err != nil {
				t.Fatal(err)
			}
		}
		runtimeDir := fmt.Sprintf("/run/user/%d", c.u.Uid)
		if lc.runtimeDir != nil {
			runtimeDir = lc.runtimeDir(t, c.u)
		}
		env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + c.u.Home, "USER=" + c.u.Name, "XDG_RUNTIME_DIR=" + runtimeDir}
		run = append(run, "--uid="+strconv.Itoa(c.u.Uid), "--gid="+strconv.Itoa(c.u.Gid), fmt.Sprintf("--slice=user-%d.slice", c.u.Uid))
	}
	t.Cleanup(func() { exec.Command("systemctl", "stop", c.unit).Run() })
	// The client's process is no child of the shell that becomes reaper's guard (a guard kills what
	// comes to it): the subshell that starts it exits, and it lives on in the scope, as a client does.
	script := `cd "$HOME" || exit 1; (sleep 1000 </dev/null >/dev/null 2>&1 & echo "client $!" >&2); exec "$0" serve --memory-max 64M`
	args := append(append(run, "--", "/usr/bin/env", "-i"), env...)
	cmd := exec.Command("systemd-run", append(args, "/bin/sh", "-c", script, reaperBin)...)
	cmd.WaitDelay = 10 * time.Second
	c.s = startStdioCmd(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reaper's log:\n%s", c.s.stderr)
		}
	})
	c.guard = cmd.Process.Pid
	pid, _ := strconv.Atoi(strings.TrimPrefix(c.awaitLine(t, "client "), "client "))
	var ok bool
	if c.client, ok = testutil.ProcOf(pid); !ok {
		t.Fatalf("the client's process %d is gone:\n%s", pid, c.s.stderr)
	}
	return c
}

// awaitLine waits for reaper's standard error to have a line holding s, and returns it.
func (c *laptop) awaitLine(t *testing.T, s string) string {
	t.Helper()
	if !c.s.stderr.Await(s) {
		t.Fatalf("no line %q from reaper:\n%s", s, c.s.stderr)
	}
	return lineWith(c.s.stderr.String(), s)
}

// firstLine returns reaper's first log line: the first line of its standard error that is not the
// client's.
func (c *laptop) firstLine(t *testing.T) string {
	t.Helper()
	c.awaitLine(t, "msg=")
	for line := range strings.Lines(c.s.stderr.String()) {
		if !strings.HasPrefix(line, "client ") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// lineWith returns the first line of text that holds s.
func lineWith(text, s string) string {
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// procCgroup returns pid's cgroup2 path from /proc.
func procCgroup(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(b)), "0::")
}
