package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/testutil"
)

// TestUser: with --user, tasks run as that unprivileged user, so that they cannot write cgroupfs, read
// reaper's environment or its token file, or signal reaper or its guard; a token given on the command
// line is warned about. In both containment modes.
func TestUser(t *testing.T) {
	tu := testutil.User(t) // first: removed after the reapers below have stopped
	mount := cgroup.Detect(cgroup.Options{}).Mountpoint
	for _, mode := range []string{"cgroup", "process"} {
		t.Run(mode, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "reaper-e2e-user-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			os.Chmod(dir, 0o755) // the user may pass; the token file in it is root's alone
			tokens := filepath.Join(dir, "tokens")
			os.WriteFile(tokens, []byte("alice tok-alice\n"), 0o600)
			// The state directory is the test's own temporary directory, root's alone: tasks need
			// nothing of it.
			pl := place(t, mode)
			p := startHTTP(t, append(pl.args(), "--user", tu.Name, "--token-file", tokens, "--token", "tok-cli")...)
			if !p.stderr.Await("--token on the command line can be read by every local process") {
				t.Errorf("no warning about --token on the command line:\n%s", p.stderr)
			}
			guard := p.cmd.Process.Pid
			server := serverOf(t, guard)
			cs := connectHTTP(t, p.url, "tok-alice")
			check := func(what, command, want string) {
				t.Helper()
				if r := bash(t, cs, command); strings.TrimSpace(r.Output) != want {
					t.Errorf("%s: %q, want %q", what, r.Output, want)
				}
			}
			check("the task's user", "id -un; id -u; echo $HOME", fmt.Sprintf("%s\n%d\n%s", tu.Name, tu.Uid, tu.Home))
			check("capabilities and no_new_privs", `grep -E '^(CapEff|NoNewPrivs)' /proc/self/status`, "CapEff:\t0000000000000000\nNoNewPrivs:\t1")
			check("reading the token file", "cat "+tokens+" >/dev/null 2>&1; echo $?", "1")
			for name, pid := range map[string]int{"server": server, "guard": guard} {
				check("reading the "+name+"'s environment", "cat /proc/"+strconv.Itoa(pid)+"/environ >/dev/null 2>&1; echo $?", "1")
				check("signalling the "+name, "kill -0 "+strconv.Itoa(pid)+" 2>/dev/null; echo $?", "1")
			}
			if mount != "" {
				check("moving itself to the cgroup2 top", "{ echo $$ > "+filepath.Join(mount, "cgroup.procs")+"; } 2>/dev/null; echo $?", "1")
				if mode == "cgroup" {
					check("killing its own cgroup", `{ echo 1 > "`+mount+`$(grep '^0::' /proc/self/cgroup | cut -c4-)/cgroup.kill"; } 2>/dev/null; echo $?`, "1")
				}
			}
			check("the working directory persists", "cd /tmp; cd "+dir+"; pwd", dir)
			check("in the next command", "pwd", dir)
			check("reaching reaper's state", "ls "+pl.stateDir+" >/dev/null 2>&1; echo $?", "2")
		})
	}
}

// TestUserWithoutAccess: reaper refuses to start, saying why, when tasks could not run as the user in
// its working directory. Its state directory is no concern of the user's: it stays root's alone (the
// test's own temporary directory), and tasks still keep their working directory.
func TestUserWithoutAccess(t *testing.T) {
	tu := testutil.User(t)
	private := t.TempDir() // root's alone: mode 0700 above it
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append([]string{"serve"}, place(t, "process").args()...), "--user", tu.Name, "--http", "127.0.0.1:0")...)
	cmd.Dir = private
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "tasks cannot run as user "+tu.Name) || !strings.Contains(string(out), " in "+private+":") {
		t.Errorf("reaper serve --user in a directory the user cannot enter: %v\n%s", err, out)
	}
}
