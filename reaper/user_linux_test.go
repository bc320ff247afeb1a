package reaper

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/testutil"
)

func init() { helpers["user"] = userHelper }

// userChecks are commands a task running as the test's user runs, by name. PID is the Reaper's pid,
// PROCS the cgroup2 hierarchy's top cgroup.procs, SETUID a setuid-root copy of id.
var userChecks = map[string]string{
	"id":       `id -u; id -g; echo "$HOME $USER $LOGNAME"`,
	"caps":     `grep -E '^(CapEff|NoNewPrivs)' /proc/self/status`,
	"cgroup":   `grep '^0::' /proc/self/cgroup`,
	"cgroupfs": `{ echo $$ > "$PROCS"; } 2>/dev/null; echo $?`,
	"environ":  `cat /proc/$PID/environ >/dev/null 2>&1; echo $?`,
	"signal":   `kill -0 $PID 2>/dev/null; echo $?`,
	"setuid":   `"$SETUID" -u`,
}

// userHelper runs userChecks in a Reaper whose tasks run as RTEST_USER, in RTEST_MODE containment (under
// a seccomp filter refusing clone3 if RTEST_NOCLONE3 is set), and replies with their outputs. It runs in
// a process of its own: no_new_privs, which the Reaper sets, cannot be undone.
func userHelper() int {
	var res helperResult
	if os.Getenv("RTEST_NOCLONE3") != "" {
		if err := testutil.DenyClone3(unix.ENOSYS); err != nil {
			return reply(res, err)
		}
	}
	var u User
	if err := json.Unmarshal([]byte(os.Getenv("RTEST_USER")), &u); err != nil {
		return reply(res, err)
	}
	mode, _ := ParseContainment(os.Getenv("RTEST_MODE"))
	dir := os.Getenv("RTEST_DIR")
	r, err := New(Options{
		Containment: mode, Cgroup: cgroup.Options{Root: os.Getenv("RTEST_ROOT")}, User: &u, WorkDir: dir,
		StateDir: dir, Grace: new(300 * time.Millisecond), NoSweep: true,
	})
	if err != nil {
		return reply(res, err)
	}
	defer r.Close(context.Background())
	s, err := r.NewSession("user", SessionOptions{})
	if err != nil {
		return reply(res, err)
	}
	res.Outputs = map[string]string{}
	for name, cmd := range userChecks {
		cmd = fmt.Sprintf("PID=%d PROCS=%s SETUID=%s; %s", os.Getpid(), os.Getenv("RTEST_PROCS"), os.Getenv("RTEST_SETUID"), cmd)
		out, err := s.Run(context.Background(), cmd, RunOptions{Timeout: time.Minute})
		if err != nil {
			return reply(res, err)
		}
		res.Outputs[name] = strings.TrimSpace(out.Output)
	}
	// The working directory persists: the shell writes it into the session's directory.
	s.Run(context.Background(), "cd /tmp", RunOptions{Timeout: time.Minute})
	out, _ := s.Run(context.Background(), "pwd", RunOptions{Timeout: time.Minute})
	res.Outputs["cwd"] = strings.TrimSpace(out.Output)
	// A directory a task hands back that its user cannot enter (it wrote the name itself): reaper
	// does not look at it; the next command goes back to where the session started, and says why.
	s.Run(context.Background(), fmt.Sprintf(`builtin trap - EXIT; printf '%%s\n\0' %s/secret/inner >/dev/fd/97`, dir), RunOptions{Timeout: time.Minute})
	out, _ = s.Run(context.Background(), "pwd", RunOptions{Timeout: time.Minute})
	res.Outputs["forged"] = strings.TrimSpace(out.Output) + " | " + out.Notice
	out, _ = s.Run(context.Background(), "pwd", RunOptions{Timeout: time.Minute})
	res.Outputs["after"] = strings.TrimSpace(out.Output) + " | " + out.Notice
	res.NoClone3 = r.noClone3.Load()
	rep, err := s.Close(context.Background())
	res.Report = rep.String()
	if err != nil {
		return reply(res, err)
	}
	left, _ := proc.NewWalker().Descendants(os.Getpid())
	for _, p := range left {
		res.Survivors = append(res.Survivors, p.Pid)
	}
	return reply(res, nil)
}

// TestUser: tasks run as the user, with its groups and HOME, without capabilities and with
// no_new_privs, so that they cannot write cgroupfs, read the Reaper's environment or signal it, and a
// setuid program gives them nothing; in both containment modes, and where clone3 is refused.
func TestUser(t *testing.T) {
	tu := testutil.User(t)
	dir, err := os.MkdirTemp("", "reaper-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if err := os.MkdirAll(filepath.Join(dir, "secret", "inner"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "secret"), 0o700) // root's: the user cannot enter it
	setuid := filepath.Join(dir, "id-setuid")
	if out, err := exec.Command("cp", "/usr/bin/id", setuid).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	os.Chmod(setuid, 0o4755)
	u, _ := json.Marshal(User{Name: tu.Name, Uid: uint32(tu.Uid), Gid: uint32(tu.Gid), Home: tu.Home})
	procs := filepath.Join(cgroup.Detect(cgroup.Options{}).Mountpoint, "cgroup.procs")
	for _, tc := range []struct {
		name     string
		mode     Containment
		noClone3 bool
	}{{"cgroup", ContainCgroup, false}, {"process", ContainProcess, false}, {"cgroup, clone3 refused", ContainCgroup, true}} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"RTEST_USER=" + string(u), "RTEST_MODE=" + tc.mode.String(), "RTEST_DIR=" + dir,
				"RTEST_PROCS=" + procs, "RTEST_SETUID=" + setuid}
			if tc.mode == ContainCgroup {
				env = append(env, "RTEST_ROOT="+testutil.CgroupRoot(t))
			}
			if tc.noClone3 {
				env = append(env, "RTEST_NOCLONE3=1")
			}
			res := runHelper(t, "user", env)
			if res.Err != "" {
				t.Fatalf("helper: %s", res.Err)
			}
			out := res.Outputs
			want := map[string]string{
				"id":       fmt.Sprintf("%d\n%d\n%s %s %s", tu.Uid, tu.Gid, tu.Home, tu.Name, tu.Name),
				"caps":     "CapEff:\t0000000000000000\nNoNewPrivs:\t1",
				"cgroupfs": "1", "environ": "1", "signal": "1",
				"setuid": strconv.Itoa(tu.Uid),
				"cwd":    "/tmp",
				"forged": dir + " | the working directory " + dir + "/secret/inner cannot be entered (permission denied); the session is back in " + dir + ", where it started",
				"after":  dir + " | ",
			}
			for k, v := range want {
				if out[k] != v {
					t.Errorf("%s: %q, want %q", k, out[k], v)
				}
			}
			if tc.mode == ContainCgroup && !strings.Contains(out["cgroup"], "/s-1/l-") {
				t.Errorf("the task ran in %q, not in its leaf", out["cgroup"])
			}
			if res.NoClone3 != tc.noClone3 {
				t.Errorf("clone3 refused: %v, want %v", res.NoClone3, tc.noClone3)
			}
			if len(res.Survivors) > 0 {
				t.Errorf("survivors: %v (%s)", res.Survivors, res.Report)
			}
		})
	}
}

// TestUserWhoCannotEnterTheWorkingDirectory: New fails, saying why, rather than every command.
func TestUserWhoCannotEnterTheWorkingDirectory(t *testing.T) {
	tu := testutil.User(t)
	dir := t.TempDir() // 0700, root's
	u, _ := json.Marshal(User{Name: tu.Name, Uid: uint32(tu.Uid), Gid: uint32(tu.Gid), Home: tu.Home})
	res := runHelper(t, "user", []string{"RTEST_USER=" + string(u), "RTEST_MODE=process", "RTEST_DIR=" + dir})
	if !strings.Contains(res.Err, "tasks cannot run as user "+tu.Name) || !strings.Contains(res.Err, "permission denied") {
		t.Errorf("New with a working directory the user cannot enter: %q", res.Err)
	}
}
