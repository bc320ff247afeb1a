package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
	"golang.org/x/sys/unix"
)

// runResult is how one `reaper run` ended.
type runResult struct {
	code   int
	stdout string
	stderr string
	took   time.Duration
}

// jobMark returns an environment entry unique to one test's job, which every process it starts
// inherits unless it clears its environment: what carries it afterwards was left behind.
func jobMark() string { return "E2E_JOB=" + testutil.UniqueName("") }

// marked returns the processes on the machine whose environment holds mark.
func marked(mark string) []testutil.Proc {
	var out []testutil.Proc
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/environ")
		if err != nil || !bytes.Contains(b, []byte(mark+"\x00")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if p, ok := testutil.ProcOf(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// killMarked kills every process that carries mark: a test's own cleanup.
func killMarked(mark string) {
	for _, p := range marked(mark) {
		syscall.Kill(p.Pid, syscall.SIGKILL)
	}
}

// startRun starts `reaper run` with flags, then argv, with mark in its environment (the job inherits
// it). Cleanup kills whatever carries the mark, so that a failing test leaves nothing either.
func startRun(t testing.TB, p placement, mark string, flags []string, argv ...string) (*exec.Cmd, *testutil.Buffer, *testutil.Buffer) {
	t.Helper()
	args := append(append(append([]string{"run"}, p.args()...), flags...), "--")
	cmd := reaperCmd(append(args, argv...)...)
	cmd.Env = append(os.Environ(), mark)
	stdout, stderr := &testutil.Buffer{}, &testutil.Buffer{} // read while exec's goroutines write them
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		killMarked(mark)
	})
	return cmd, stdout, stderr
}

// finishRun waits for a `reaper run` started by startRun, for at most within.
func finishRun(t testing.TB, cmd *exec.Cmd, stdout, stderr *testutil.Buffer, started time.Time, within time.Duration) runResult {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		res := runResult{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(started)}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return res
	case <-time.After(within):
		cmd.Process.Kill()
		<-done
		t.Fatalf("reaper run did not exit within %v\nstderr: %s", within, stderr)
	}
	return runResult{}
}

// run runs `reaper run` to its end.
func runJob(t testing.TB, p placement, mark string, flags []string, argv ...string) runResult {
	t.Helper()
	start := time.Now()
	cmd, stdout, stderr := startRun(t, p, mark, flags, argv...)
	return finishRun(t, cmd, stdout, stderr, start, 2*time.Minute)
}

func TestRunLeavesNothing(t *testing.T) {
	for _, mode := range []string{"cgroup", "process"} {
		t.Run(mode, func(t *testing.T) {
			p := place(t, mode)
			mark := jobMark()
			report := filepath.Join(t.TempDir(), "report.json")
			g := 2 * time.Second
			res := runJob(t, p, mark, []string{"--grace", g.String(), "--report", report},
				"sh", "-c", `setsid sleep 1000 & (sleep 1001 &); nohup sleep 1002 >/dev/null 2>&1 & exit 3`)
			if res.code != 3 {
				t.Errorf("exit status %d, want the command's 3\n%s", res.code, res.stderr)
			}
			if res.took > g+time.Second {
				t.Errorf("took %v, more than the grace period plus a second", res.took)
			}
			if left := marked(mark); len(left) > 0 {
				t.Errorf("left running: %v", left)
			}
			if !strings.Contains(res.stderr, "reaper run: killed 3 leftover processes: ") {
				t.Errorf("the summary does not name the three leftovers: %q", res.stderr)
			}
			var rep struct {
				ExitCode   *int `json:"exit_code"`
				ExitStatus int  `json:"exit_status"`
				Leftovers  []struct {
					Pid     int
					Command string
				}
			}
			b, err := os.ReadFile(report)
			if err != nil || json.Unmarshal(b, &rep) != nil || rep.ExitCode == nil || *rep.ExitCode != 3 || rep.ExitStatus != 3 || len(rep.Leftovers) != 3 {
				t.Errorf("report %s: %v; want exit code and status 3 and 3 leftovers", b, err)
			}
			for _, l := range rep.Leftovers {
				if !strings.Contains(res.stderr, "pid "+strconv.Itoa(l.Pid)) {
					t.Errorf("the summary does not name pid %d: %q", l.Pid, res.stderr)
				}
			}
		})
	}
}

func TestRunExitStatus(t *testing.T) {
	p := place(t, "")
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	for _, tc := range []struct {
		name  string
		flags []string
		argv  []string
		want  int
	}{
		{"exit status", nil, []string{"sh", "-c", "exit 42"}, 42},
		{"death by SIGTERM", nil, []string{"sh", "-c", "kill -TERM $$"}, 128 + 15},
		{"death by SIGKILL", nil, []string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"timeout", []string{"--timeout", "1s", "--grace", "1s"}, []string{"sh", "-c", "sleep 1000 & sleep 1000"}, 124},
		{"not found", nil, []string{filepath.Join(dir, "missing")}, 127},
		{"not executable", nil, []string{noexec}, 126},
		{"bad flag", []string{"--no-such-flag"}, []string{"true"}, 125},
		{"leftovers allowed", nil, []string{"sh", "-c", "sleep 1000 & exit 0"}, 0},
		{"fail on leftovers", []string{"--fail-on-leftovers"}, []string{"sh", "-c", "sleep 1000 & exit 0"}, 123},
		{"failure wins over leftovers", []string{"--fail-on-leftovers"}, []string{"sh", "-c", "sleep 1000 & exit 5"}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mark := jobMark()
			report := filepath.Join(t.TempDir(), "report.json")
			res := runJob(t, p, mark, append([]string{"--report", report}, tc.flags...), tc.argv...)
			if res.code != tc.want {
				t.Errorf("exit status %d, want %d\n%s", res.code, tc.want, res.stderr)
			}
			if left := marked(mark); len(left) > 0 {
				t.Errorf("left running: %v", left)
			}
			if tc.want == 125 {
				return // a bad flag: nothing ran, and no report is written
			}
			var rep struct {
				ExitCode   *int `json:"exit_code"`
				ExitStatus int  `json:"exit_status"`
			}
			b, err := os.ReadFile(report)
			if err != nil || json.Unmarshal(b, &rep) != nil || rep.ExitStatus != tc.want {
				t.Errorf("report %s (%v): want exit_status %d, reaper run's", b, err, tc.want)
			}
			if tc.want == 123 && (rep.ExitCode == nil || *rep.ExitCode != 0) {
				t.Errorf("report %s: want exit_code 0, the command's", b)
			}
		})
	}
}

// TestRunMessages: what reaper run says on stderr, whole: the command's name and the cause once, as
// a shell says it; the right number; and on a timeout the leftovers without the command itself.
func TestRunMessages(t *testing.T) {
	p := place(t, "")
	dir := t.TempDir()
	missing, noexec := filepath.Join(dir, "missing"), filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	proc := `sleep \(pid \d+(, host pid \d+)?, \d+s\)` // the job's pid, and the host's where they differ
	for _, tc := range []struct {
		name   string
		flags  []string
		argv   []string
		code   int
		stderr string // a regular expression for all of it
	}{
		{"not found", nil, []string{missing}, 127, `reaper run: ` + regexp.QuoteMeta(missing) + `: command not found\n`},
		{"not on PATH", nil, []string{"no-such-command-" + testutil.UniqueName("")}, 127, `reaper run: no-such-command-\w+: command not found\n`},
		{"not executable", nil, []string{noexec}, 126, `reaper run: ` + regexp.QuoteMeta(noexec) + `: permission denied\n`},
		{"one leftover", nil, []string{"sh", "-c", "sleep 1000 & " + awaitExec("sleep") + "; exit 0"}, 0, `reaper run: killed 1 leftover process: ` + proc + `\n`},
		{"timeout", []string{"--timeout", "1s", "--grace", "1s"}, []string{"sh", "-c", "sleep 1000 & sleep 1001; exit 0"}, 124,
			`reaper run: timed out after 1s\nreaper run: killed 2 leftover processes: ` + proc + `, ` + proc + `\n`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runJob(t, p, jobMark(), tc.flags, tc.argv...)
			if res.code != tc.code || !regexp.MustCompile(`^`+tc.stderr+`$`).MatchString(res.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", res.code, res.stderr, tc.code, tc.stderr)
			}
		})
	}
}

// awaitExec returns shell code that waits, for up to 10 s, until the last background process ($!)
// runs the program comm: a leftover the summary must name by its program may be killed before it
// has left the shell's (or setsid's) fork for it otherwise.
func awaitExec(comm string) string {
	return `i=0; while [ $i -lt 1000 ] && [ "$(cat /proc/$!/comm 2>/dev/null)" != ` + comm + ` ]; do sleep 0.01; i=$((i+1)); done`
}

// TestRunSignals: a SIGTERM sent to reaper reaches the job; a job that ignores it, and forks a
// replacement whenever it gets it, is gone once the grace period has passed (plus a second); a
// second SIGTERM ends it at once.
func TestRunSignals(t *testing.T) {
	p := place(t, "")
	await := func(t *testing.T, stdout *testutil.Buffer, want string) {
		testutil.Eventually(t, "the job to print "+want, func() bool { return strings.Contains(stdout.String(), want) })
	}
	t.Run("forwarded", func(t *testing.T) {
		mark := jobMark()
		start := time.Now()
		cmd, stdout, stderr := startRun(t, p, mark, nil, "sh", "-c", `trap 'echo got TERM; exit 42' TERM; echo ready; while :; do sleep 0.1; done`)
		await(t, stdout, "ready")
		cmd.Process.Signal(syscall.SIGTERM)
		res := finishRun(t, cmd, stdout, stderr, start, time.Minute)
		if res.code != 42 || !strings.Contains(res.stdout, "got TERM") {
			t.Errorf("exit %d, stdout %q: the job did not get the forwarded SIGTERM", res.code, res.stdout)
		}
	})
	t.Run("USR1, USR2 and WINCH forwarded", func(t *testing.T) {
		mark := jobMark()
		start := time.Now()
		cmd, stdout, stderr := startRun(t, p, mark, nil, "bash", "-c",
			`for s in USR1 USR2 WINCH; do trap "echo got $s" $s; done; trap 'exit 42' TERM; echo ready; while :; do sleep 0.1; done`)
		await(t, stdout, "ready")
		for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH} {
			cmd.Process.Signal(sig)
			await(t, stdout, "got "+strings.TrimPrefix(unix.SignalName(sig), "SIG"))
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if res := finishRun(t, cmd, stdout, stderr, start, time.Minute); res.code != 42 {
			t.Errorf("exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
		}
	})
	t.Run("ignored and forking", func(t *testing.T) {
		mark := jobMark()
		g := 2 * time.Second
		start := time.Now()
		cmd, stdout, stderr := startRun(t, p, mark, []string{"--grace", g.String()},
			"sh", "-c", `trap 'sleep 1000 & echo forked' TERM; echo ready; while :; do sleep 0.1; done`)
		await(t, stdout, "ready")
		termed := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		res := finishRun(t, cmd, stdout, stderr, start, time.Minute)
		if took := time.Since(termed); took > g+time.Second {
			t.Errorf("gone %v after SIGTERM, more than the grace period plus a second", took)
		}
		if !strings.Contains(res.stdout, "forked") {
			t.Errorf("the job did not fork on SIGTERM: %q", res.stdout)
		}
		if left := marked(mark); len(left) > 0 {
			t.Errorf("left running: %v", left)
		}
	})
	t.Run("second signal", func(t *testing.T) {
		mark := jobMark()
		start := time.Now()
		cmd, stdout, stderr := startRun(t, p, mark, []string{"--grace", "60s"}, "sh", "-c", `trap 'echo termed' TERM; echo ready; while :; do sleep 0.1; done`)
		await(t, stdout, "ready")
		cmd.Process.Signal(syscall.SIGTERM)
		// The job says when the first SIGTERM reached it: a second one sent sooner could be merged
		// with it by the kernel while reaper waits to be scheduled (a loaded machine).
		await(t, stdout, "termed")
		if len(marked(mark)) == 0 {
			t.Fatal("the job ended on the first SIGTERM it ignores")
		}
		second := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		finishRun(t, cmd, stdout, stderr, start, time.Minute)
		if took := time.Since(second); took > 10*time.Second {
			t.Errorf("reaper run exited %v after the second SIGTERM", took)
		}
		if left := marked(mark); len(left) > 0 {
			t.Errorf("left running: %v", left)
		}
	})
}

// TestRunKilled: reaper run SIGKILLed in the middle of a job (its guard, the pid a CI runner knows,
// or its server): the job's whole tree dies (promptly: the time is logged).
func TestRunKilled(t *testing.T) {
	for _, mode := range []string{"cgroup", "process"} {
		for _, victim := range []string{"guard", "server", "both"} {
			t.Run(mode+"/"+victim, func(t *testing.T) {
				p := place(t, mode)
				mark := jobMark()
				start := time.Now()
				cmd, stdout, stderr := startRun(t, p, mark, nil, "sh", "-c",
					`setsid sleep 1000 & (sleep 1001 &); sh -c 'trap "" TERM; exec sleep 1002' & sleep 0.1; echo ready; wait`)
				testutil.Eventually(t, "the job to start", func() bool { return strings.Contains(stdout.String(), "ready") })
				ps := marked(mark)
				if len(ps) < 4 {
					t.Fatalf("the job has %d processes, want at least 4", len(ps))
				}
				guard := cmd.Process.Pid
				server := serverOf(t, guard)
				switch victim {
				case "guard":
					syscall.Kill(guard, syscall.SIGKILL)
				case "server":
					syscall.Kill(server, syscall.SIGKILL)
				case "both":
					// Neither can act on the other's death: with its PID namespace the job dies with
					// its init, by the kernel (without one it would survive: see the matrix).
					needPIDNamespaces(t)
					syscall.Kill(guard, syscall.SIGSTOP)
					syscall.Kill(server, syscall.SIGSTOP)
					syscall.Kill(server, syscall.SIGKILL)
					syscall.Kill(guard, syscall.SIGKILL)
				}
				t.Logf("dead %v after killing %s", testutil.AwaitDead(t, ps, killedWait).Round(time.Millisecond), victim)
				finishRun(t, cmd, stdout, stderr, start, 30*time.Second)
				if left := marked(mark); len(left) > 0 {
					t.Errorf("left running: %v", left)
				}
				if victim == "both" {
					runOnce(t, nil, append([]string{"sweep"}, p.args()...)...) // nothing of reaper was left to
				}
				assertNothingLeft(t, p)
			})
		}
	}
}

// TestRunAsInit: reaper run as PID 1 of a new PID namespace reaps the zombies a job leaves (here 100,
// whose parent never waits and then exits) and exits with the job's status.
func TestRunAsInit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: a new PID namespace needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("skipped: needs unshare(1) from util-linux")
	}
	p := place(t, "")
	// In the namespace's own /proc, count the zombies once their parent is gone.
	job := `(i=0; while [ $i -lt 100 ]; do true & i=$((i+1)); done; exec sleep 0.3); ` +
		`n=0; for i in $(seq 100); do n=$(grep -l '^State:.Z' /proc/[0-9]*/status 2>/dev/null | wc -l); [ "$n" -eq 0 ] && break; sleep 0.05; done; ` +
		`echo "pid $$ zombies $n"; exit 7`
	args := append(append([]string{"--pid", "--fork", "--mount-proc", bin, "run"}, p.args()...), "--", "sh", "-c", job)
	cmd := exec.Command("unshare", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("exit %v, want the job's 7\nstderr: %s", err, &stderr)
	}
	out := strings.TrimSpace(stdout.String())
	if !strings.HasSuffix(out, "zombies 0") {
		t.Errorf("the job saw %q, want no zombie left", out)
	}
	if strings.HasPrefix(out, "pid 1 ") || strings.HasPrefix(out, "pid 2 ") {
		t.Logf("the job ran as %s", out) // reaper's guard is PID 1, its server 2
	}
}

// TestRunOnATerminal: a job on a pseudo-terminal sees a terminal and is interrupted by Ctrl-C, as it
// would be without reaper.
func TestRunOnATerminal(t *testing.T) {
	p := place(t, "")
	master, slave := openPTY(t)
	defer master.Close()
	mark := jobMark()
	args := append(append([]string{"run"}, p.args()...), "--", "sh", "-c",
		`if [ -t 0 ] && [ -t 1 ]; then echo on-a-terminal; fi; trap 'echo interrupted; exit 9' INT; echo ready; while :; do sleep 0.1; done`)
	cmd := reaperCmd(args...)
	cmd.Env = append(os.Environ(), mark)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// A session of its own with the terminal as its controlling terminal, as a shell's would be.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	t.Cleanup(func() {
		cmd.Process.Kill()
		for _, q := range marked(mark) {
			syscall.Kill(q.Pid, syscall.SIGKILL)
		}
	})
	out := &testutil.Buffer{}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	if !out.Await("ready") {
		t.Fatalf("the job did not start: %q", out)
	}
	master.Write([]byte{0x03}) // Ctrl-C
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 9 {
			t.Errorf("exit %v, want the job's 9 after Ctrl-C\n%s", err, out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Ctrl-C did not end the job\n%s", out)
	}
	out.Await("interrupted")
	for _, want := range []string{"on-a-terminal", "interrupted"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the terminal shows %q, want %q in it", out, want)
		}
	}
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("skipped: no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestRunAsNonRoot runs `reaper run` as a CI runner's non-root user (GitHub's hosted runners run jobs
// as "runner"), who may not write cgroupfs: reaper says it uses process containment, and still
// kills and names what the job leaves, a setsid'ed process included.
func TestRunAsNonRoot(t *testing.T) {
	tu := testutil.User(t) // first: removed after the job below has ended
	dir, err := os.MkdirTemp("", "reaper-e2e-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // the test's own temporary directories are root's alone
	binary := filepath.Join(dir, "reaper")
	if b, err := os.ReadFile(staticBin); err != nil || os.WriteFile(binary, b, 0o755) != nil {
		t.Fatalf("copying reaper for the user: %v", err)
	}
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o755)
	os.Chown(state, tu.Uid, tu.Gid)
	mark := jobMark()
	t.Cleanup(func() { killMarked(mark) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--verbose", "--state-dir", state, "--", "sh", "-c", "setsid sleep 1000 & "+awaitExec("sleep")+"; exit 0")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + tu.Home, mark}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(tu.Uid), Gid: uint32(tu.Gid)}}
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("reaper run as %s: %v\n%s", tu.Name, err, &stderr)
	}
	if !strings.Contains(stderr.String(), "reaper run: containment process (") {
		t.Errorf("reaper run as a non-root user does not say it uses process containment:\n%s", &stderr)
	}
	if !regexp.MustCompile(`(?m)^reaper run: killed 1 leftover process: sleep \(pid \d+`).MatchString(stderr.String()) {
		t.Errorf("the summary does not name the setsid'ed sleep:\n%s", &stderr)
	}
	if left := marked(mark); len(left) > 0 {
		t.Errorf("left running: %v", left)
	}
}
