package reaper

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// User is an account tasks run as instead of the Reaper's own (Options.User): typically an
// unprivileged one, while the Reaper runs as root for cgroups. Such tasks cannot write cgroupfs,
// read the Reaper's environment or files only it may read (a token file), or signal the Reaper or its
// guard: they hold no capability (a change of user from root drops them all, and none is regained at
// execve), and no_new_privs keeps setuid and file-capability programs (sudo, su, ping) from giving any
// back.
type User struct {
	// Name is what USER and LOGNAME are set to.
	Name string
	// Uid and Gid are the task's user and group; Groups its supplementary groups (none if empty).
	Uid, Gid uint32
	Groups   []uint32
	// Home is what HOME is set to.
	Home string
}

func (u *User) String() string {
	return fmt.Sprintf("%s (uid %d, gid %d)", u.Name, u.Uid, u.Gid)
}

// credential returns what a fork needs to run as the user.
func (u *User) credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.Uid, Gid: u.Gid, Groups: append([]uint32{}, u.Groups...)}
}

// userEnv returns env with HOME, USER and LOGNAME set for u.
func userEnv(env []string, u *User) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "USER=") || strings.HasPrefix(kv, "LOGNAME=")
	})
	return append(out, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
}

// setNoNewPrivs sets no_new_privs on the thread tasks that run as another user are forked from (a
// reap.Forker's), so that every task inherits it and gains no privilege through execve (a setuid
// binary, file capabilities, an LSM transition). The flag is a thread's, and a child inherits that of
// the thread that forked it: set from an arbitrary goroutine it would miss tasks (SysProcAttr has no
// field for it). It affects nothing the Reaper needs, and not the child's setuid() before its exec.
func setNoNewPrivs() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs for tasks that run as another user: %w", err)
	}
	return nil
}

// checkUser runs the shell as the user in the working directory, to fail at start rather than at
// every command: the Reaper may not switch users (not root), or the user may not enter the directory
// or run the shell. Tasks need nothing else of the Reaper's: its state directory is its own, and no
// task writes there (the working directory comes back through a pipe, see cwdPipe).
func (r *Reaper) checkUser() error {
	sp, err := r.fork(spawnSpec{argv: []string{r.shell, "-c", ":"}, env: r.env, dir: r.workDir, stdout: r.devnull}, false)
	if err != nil {
		return fmt.Errorf("tasks cannot run as user %s in %s: %w", r.opts.User, r.workDir, err)
	}
	if sp.pidfd >= 0 {
		unix.Close(sp.pidfd)
	}
	select {
	case st := <-sp.exited:
		if st.Code() != 0 {
			return fmt.Errorf("tasks running as user %s cannot run %s in %s (exit status %d)", r.opts.User, r.shell, r.workDir, st.Code())
		}
	case <-time.After(r.lim.CloseTimeout):
		return fmt.Errorf("tasks cannot run as user %s: the shell did not exit within %v", r.opts.User, r.lim.CloseTimeout)
	}
	return nil
}

// holdArgs returns an argv that waits, before it runs argv, until the descriptor 3 it inherits (a
// pipe) reaches its end: where clone3 into a cgroup is refused, a task that runs as another user may
// not join its leaf itself (cgroup.Slice.JoinArgs), so the Reaper moves it while it waits.
func holdArgs(argv []string) []string {
	const script = `read _ <&3; exec 3<&-; exec "$@"`
	return append([]string{"/bin/sh", "-c", script, "reaper-hold"}, argv...)
}

// spawnHeld starts spec as the user, outside the cgroup, held (see holdArgs); moves it into its leaf;
// and lets it go. If the move fails, the process is killed and the error returned.
func (r *Reaper) spawnHeld(spec spawnSpec) (spawned, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return spawned{}, err
	}
	defer pw.Close()
	spec.argv = holdArgs(spec.argv)
	spec.extra = pr
	sp, err := r.fork(spec, false)
	pr.Close()
	if err != nil {
		return sp, err
	}
	err = fmt.Errorf("its pid is unknown") // never write 0: it would move this process
	if sp.pid > 0 {
		err = spec.leaf.Add(sp.pid)
	}
	if err != nil {
		if sp.pidfd >= 0 {
			unix.PidfdSendSignal(sp.pidfd, unix.SIGKILL, nil, 0)
			unix.Close(sp.pidfd)
		} else if sp.pid > 0 {
			unix.Kill(sp.pid, unix.SIGKILL) // our registered child: its pid cannot be reused before we reap it
		}
		return spawned{}, fmt.Errorf("move process %d into %s: %w", sp.pid, spec.leaf.Path(), err)
	}
	return sp, nil
}

// forkExec is syscall.ForkExec, on the forker's thread when there is one.
func (r *Reaper) forkExec(argv []string, attr *syscall.ProcAttr) (pid int, err error) {
	if r.forker == nil {
		return syscall.ForkExec(argv[0], argv, attr)
	}
	r.forker.Run(func() { pid, err = syscall.ForkExec(argv[0], argv, attr) })
	return pid, err
}
