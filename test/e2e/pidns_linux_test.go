package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/internal/testutil"
)

// TestPIDNamespaceFallbacks: where sessions cannot get PID namespaces the way root does, reaper makes
// them another way or goes without, and says which and why in its first log line; with
// --pid-namespace=on it refuses to start instead, saying why. The hosts are simulated: an unprivileged
// user (no CAP_SYS_ADMIN; user namespaces allowed here), the same with user namespaces disabled (a
// seccomp filter answering CLONE_NEWUSER with ENOSPC, what user.max_user_namespaces=0 gives, without
// changing that machine-wide setting), and root under a seccomp profile that refuses every namespace,
// as Docker's default does without CAP_SYS_ADMIN; root without CAP_SYS_ADMIN running tasks as another
// user (--user), as in a container that keeps only the capabilities --user needs, where a user
// namespace could be made but would not map the tasks' user (switching to it there fails: every
// command would); and an unprivileged user whose /proc has a path masked by a mount over it, as a
// container's has (/proc/kcore, /proc/timer_list and others), where the kernel refuses the init a
// /proc of its own: auto then goes without, since tasks would see pids that are not theirs, and on
// uses the namespace anyway and says so. Where setns is refused, nothing changes: reaper never enters
// a session's namespace, the init starts every task (its parent pid inside is 1).
func TestPIDNamespaceFallbacks(t *testing.T) {
	tu := testutil.User(t)
	cases := []struct {
		name, seccomp string
		user          bool
		masked        bool   // /proc/timer_list has /dev/null mounted over it
		args          string // beyond the defaults
		want          string // the start line's pid_namespace
		own           bool   // the shell's pid is its own namespace's
		rootOwner     string // the owner of / as a task sees it: nobody where root is not mapped
		tasksAs       bool   // reaper runs as root without CAP_SYS_ADMIN, its tasks as tu (--user)
		ppid          string // the shell's parent pid inside its namespace: 1, the init, which starts it
	}{
		{"root", "none", false, false, "", `pid_namespace="on (a PID namespace per session)"`, true, "0", false, "1"},
		{"root, setns refused", "setns", false, false, "", `pid_namespace="on (a PID namespace per session)"`, true, "0", false, "1"},
		{"unprivileged user", "none", true, false, "", `pid_namespace="on (a PID namespace per session, made through an unprivileged user namespace)"`, true, "65534", false, "1"},
		{"unprivileged user, user namespaces disabled", "userns", true, false, "",
			`pid_namespace="off (creating PID and mount namespaces: operation not permitted; through a user namespace: no space left on device)"`, false, "0", false, ""},
		{"root under a container runtime's seccomp profile", "namespaces", false, false, "",
			`pid_namespace="off (creating PID and mount namespaces: operation not permitted; through a user namespace: operation not permitted)"`, false, "0", false, ""},
		{"root without CAP_SYS_ADMIN, tasks as another user", "none", false, false, fmt.Sprintf(" --user %d:%d", tu.Uid, tu.Gid),
			`pid_namespace="off (creating PID and mount namespaces: operation not permitted; not through a user namespace, which would not map the tasks' user)"`, false, "0", true, ""},
		{"unprivileged user, /proc masked as in a container", "none", true, true, "",
			`pid_namespace="off (a PID namespace could be made but not a /proc of its own (mounting /proc: operation not permitted); --pid-namespace=on uses it anyway)"`, false, "0", false, ""},
		{"unprivileged user, /proc masked, on", "none", true, true, " --pid-namespace on",
			`pid_namespace="on (a PID namespace per session, made through an unprivileged user namespace; /proc not remounted, tasks' ps shows the host's processes: mounting /proc: operation not permitted)"`, true, "65534", false, "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := fallbackHelper(t, tu, c.user, c.seccomp, "serve --containment process"+c.args)
			if c.masked {
				maskProc(t, cmd)
			}
			if c.tasksAs {
				cmd.Env = append(cmd.Env, "E2E_NO_SYS_ADMIN=1")
			}
			stderr := &testutil.Buffer{}
			cmd.Stderr = stderr
			cs := connectCommand(t, cmd)
			if !stderr.Await(c.want) {
				t.Fatalf("the start line does not say %s:\n%s", c.want, stderr)
			}
			r := bash(t, cs, "id -u; echo $$; stat -c %u /; echo $PPID")
			uid := "0"
			if c.user || c.tasksAs {
				uid = strconv.Itoa(tu.Uid)
			}
			f := strings.Fields(r.Output)
			if len(f) != 4 || f[0] != uid || f[2] != c.rootOwner {
				t.Fatalf("the task printed %q, want uid %s and / owned by %s", r.Output, uid, c.rootOwner)
			}
			if c.ppid != "" && f[3] != c.ppid {
				t.Errorf("the shell's parent pid is %s, want %s", f[3], c.ppid)
			}
			if pid, _ := strconv.Atoi(f[1]); (pid < 100) != c.own {
				t.Errorf("the shell's pid is %d, want one of its own namespace: %v", pid, c.own)
			}
		})
	}
	t.Run("on, refused", func(t *testing.T) {
		cmd := fallbackHelper(t, tu, false, "namespaces", "serve --containment process --pid-namespace on")
		cmd.Stdin = strings.NewReader("") // were it to start, it would end at once
		cmd.Stderr = nil
		timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
		defer timer.Stop()
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "PID namespaces were asked for but cannot be made here: creating PID and mount namespaces: operation not permitted") {
			t.Errorf("--pid-namespace on under the filter: %v\n%s", err, out)
		}
	})
}

// fallbackHelper returns the seccomp-serve helper that runs the shipped binary with args (and a state
// directory) under the filter seccomp, as tu if user is set: from a copy of the binary and a
// directory tu may use, the test's own being root's alone.
func fallbackHelper(t *testing.T, tu testutil.TestUser, user bool, seccomp, args string) *exec.Cmd {
	t.Helper()
	dir, err := os.MkdirTemp("", "reaper-e2e-pidns-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o755)
	bin := filepath.Join(dir, "reaper")
	if err := copyFile(staticBin, bin); err != nil {
		t.Fatal(err)
	}
	env := []string{"E2E_BIN=" + bin, "E2E_SECCOMP=" + seccomp, "E2E_ARGS=" + args + " --state-dir " + state}
	if user {
		os.Chown(state, tu.Uid, tu.Gid)
		env = append(env, "E2E_UID="+strconv.Itoa(tu.Uid), "E2E_GID="+strconv.Itoa(tu.Gid))
	}
	cmd := testutil.Helper("seccomp-serve", env...)
	cmd.Dir = state
	return cmd
}

// maskProc makes cmd run in a mount namespace of its own in which /proc/timer_list has /dev/null mounted
// over it, as container runtimes mask it: a /proc that is not fully visible, over which the kernel
// lets no one without CAP_SYS_ADMIN in the initial user namespace mount another.
func maskProc(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("skipped: needs unshare(1) from util-linux")
	}
	cmd.Args = append([]string{unshare, "--mount", "--propagation", "private", "/bin/sh", "-c",
		`mount --bind /dev/null /proc/timer_list && exec "$@"`, "sh", cmd.Path}, cmd.Args[1:]...)
	cmd.Path = unshare
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
