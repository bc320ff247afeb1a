package reaper

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/cgreaper/reaper/cgroup"
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"github.com/cgreaper/reaper/internal/reap"
	"github.com/cgreaper/reaper/internal/shell"
	"golang.org/x/sys/unix"
)

// Environment markers every task's processes inherit; the /proc walk looks for them.
const (
	EnvSession = instance.EnvSession
	EnvTask    = instance.EnvTask
)

// baseEnv returns a copy of env, or, where it is nil, the tasks' environment Options.Env describes
// (an outer reaper's markers are REAPER_* variables too: ours replace them).
func baseEnv(env []string) []string {
	if env != nil {
		return append([]string(nil), env...)
	}
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "REAPER_") || strings.HasPrefix(kv, "NOTIFY_SOCKET=")
	})
}

// checkCommand refuses commands that cannot be run as one shell argument.
func checkCommand(command string) error {
	switch {
	case strings.TrimSpace(command) == "":
		return fmt.Errorf("%w: empty: give the shell code to run", ErrBadCommand)
	case strings.IndexByte(command, 0) >= 0:
		return fmt.Errorf("%w: contains a NUL byte, which no shell argument can hold: write the data to a file, or make it with printf '\\0'", ErrBadCommand)
	case len(command) > MaxCommandBytes:
		return fmt.Errorf("%w: %d bytes, the limit is %d (Linux caps one argument at 128 KiB); write long scripts to a file and run that",
			ErrBadCommand, len(command), MaxCommandBytes)
	}
	return nil
}

// spawnSpec is one process to start.
type spawnSpec struct {
	argv   []string
	env    []string
	dir    string
	stdin  *os.File      // nil: /dev/null
	stdout *os.File      //
	stderr *os.File      // nil: stdout
	leaf   *cgroup.Slice // the cgroup to be born in; nil in process containment
	// foreground makes the child's process group the foreground process group of the terminal on
	// stdin, from the child before it executes anything, as a shell does for a job.
	foreground bool
	// tty starts the child in a session of its own whose controlling terminal is the one on stdin
	// (setsid, TIOCSCTTY): its process group is its pid, as with Setpgid.
	tty bool
	// extra, if set, is the child's descriptor 3.
	extra *os.File
	// command and gate, if set, are the child's descriptors shell.CommandFD and shell.GateFD: a ready
	// shell's (see ready_linux.go).
	command, gate *os.File
	// cwd, if set, is the child's descriptor shell.CwdFD: the write end of the pipe its shell's EXIT
	// trap writes its final working directory to (see shell.Script).
	cwd *os.File
	// init, if set, is the init of the session's PID namespace, which starts the process there.
	init *pidns.Init
}

// fds returns the child's descriptor table as this process's descriptors, from 0, with -1 for those
// the child gets closed. The standard and extra ones are made blocking (Fd), as a program expects;
// the cwd pipe is not (see shell.Script).
func (spec spawnSpec) fds(devnull *os.File) ([]int, error) {
	stdin, stderr := spec.stdin, spec.stderr
	if stdin == nil {
		stdin = devnull
	}
	if stderr == nil {
		stderr = spec.stdout
	}
	fds := []int{int(stdin.Fd()), int(spec.stdout.Fd()), int(stderr.Fd())}
	if spec.extra != nil {
		fds = append(fds, int(spec.extra.Fd()))
	}
	if spec.command != nil {
		fds = placeAt(fds, shell.CommandFD, int(spec.command.Fd()))
		fds = placeAt(fds, shell.GateFD, int(spec.gate.Fd()))
	}
	if spec.cwd != nil {
		rc, err := spec.cwd.SyscallConn()
		if err != nil {
			return nil, err
		}
		rc.Control(func(fd uintptr) { fds = placeAt(fds, shell.CwdFD, int(fd)) })
	}
	return fds, nil
}

// placeAt returns fds with fd appended at index at, the slots before it that fds does not reach
// closed (-1). The descriptors are placed in increasing order, so at is never below len(fds).
func placeAt(fds []int, at, fd int) []int {
	for len(fds) < at {
		fds = append(fds, -1)
	}
	return append(fds, fd)
}

// spawned is a started process.
type spawned struct {
	pid    int    // 0 in the rare case an init could not tell it (see pidns.Task)
	start  uint64 // start time, read while the pid could not yet be reaped
	pidfd  int    // -1 where the kernel has none
	exited <-chan reap.Exit
}

// spawn starts a process in its own process group, registered with the child reaper, as Options.User
// if set, through spec.init if set. In cgroup containment it is born in spec.leaf through clone3 with
// CLONE_INTO_CGROUP; where the host refuses that (ENOSYS, EPERM), from then on it joins the leaf
// before it runs the command (cgroup.Slice.JoinArgs), or is moved there while held (spawnHeld).
func (r *Reaper) spawn(spec spawnSpec) (spawned, error) {
	if spec.init == nil {
		r.direct.Store(true) // before the fork: its orphans come to the Reaper (see adopters)
	}
	if spec.leaf != nil && !r.noClone3.Load() {
		sp, err := r.fork(spec, true)
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return sp, err
		}
		if r.noClone3.CompareAndSwap(false, true) {
			r.log.Warn("clone3 into a cgroup is refused; tasks will join their cgroup before exec", "error", err)
		}
	}
	if spec.leaf != nil && r.opts.User != nil {
		return r.spawnHeld(spec) // the user may not join the leaf itself
	}
	if spec.leaf != nil {
		spec.argv = spec.leaf.JoinArgs(spec.argv)
	}
	return r.fork(spec, false)
}

// fork starts spec, born in its leaf through clone3 where intoCgroup is set: here, or through the
// session's init (spec.init).
func (r *Reaper) fork(spec spawnSpec, intoCgroup bool) (spawned, error) {
	fds, err := spec.fds(r.devnull)
	if err != nil {
		return spawned{}, err
	}
	var cg *os.File
	if intoCgroup {
		if cg, err = spec.leaf.OpenFD(); err != nil {
			return spawned{}, err
		}
		defer cg.Close()
	}
	var cred *syscall.Credential
	if r.opts.User != nil {
		cred = r.opts.User.credential()
	}
	var sp spawned
	if spec.init != nil {
		sp, err = r.forkInit(spec, fds, cg, cred)
	} else {
		sp, err = r.forkHere(spec, fds, cg, cred)
	}
	if err != nil {
		return spawned{}, fmt.Errorf("start %s in %s: %w", spec.argv[0], spec.dir, err)
	}
	return sp, nil
}

// forkHere starts spec as a child of this process, with descriptors fds, in cg if set, as cred if
// set.
func (r *Reaper) forkHere(spec spawnSpec, fds []int, cg *os.File, cred *syscall.Credential) (spawned, error) {
	pidfd := -1
	sys := &syscall.SysProcAttr{Setpgid: !spec.tty, Setsid: spec.tty, Setctty: spec.tty, PidFD: &pidfd, Credential: cred}
	if spec.foreground {
		// For Foreground, Ctty is a descriptor of this process (not of the child, as for Setctty):
		// the child's stdin as this process holds it.
		sys.Foreground, sys.Ctty = true, fds[0]
	}
	if cg != nil {
		sys.UseCgroupFD, sys.CgroupFD = true, int(cg.Fd())
	}
	attr := &syscall.ProcAttr{Dir: spec.dir, Env: spec.env, Sys: sys}
	for _, fd := range fds {
		attr.Files = append(attr.Files, uintptr(fd)) // -1: closed in the child
	}
	var start uint64
	pid, exited, err := r.kids.Start(func() (int, error) {
		pid, err := r.forkExec(spec.argv, attr)
		if err == nil {
			// The child cannot be reaped while the lock is held, so its pid is still its own.
			st, _ := proc.NewWalker().Stat(pid)
			start = st.Start
		}
		return pid, err
	})
	return spawned{pid: pid, start: start, pidfd: pidfd, exited: exited}, err
}

// forkInit starts spec through the session's init (spec.init). Its descriptors go along; the pid,
// start time and pidfd come back as the Reaper sees them.
func (r *Reaper) forkInit(spec spawnSpec, fds []int, cg *os.File, cred *syscall.Credential) (spawned, error) {
	t, err := spec.init.Spawn(pidns.Request{
		Argv: spec.argv, Env: spec.env, Dir: spec.dir, FDs: fds, Foreground: spec.foreground, Ctty: 0,
		Setpgid: !spec.tty, Setsid: spec.tty, Setctty: spec.tty, // Ctty 0: the terminal is its stdin
		Credential: cred, Cgroup: cg,
	})
	return spawned{pid: t.Pid, start: t.Start, pidfd: t.PidFD, exited: t.Exited}, err
}

// cwdPipe makes a foreground command's working-directory pipe, non-blocking: the read end reaper's,
// the write end for the child, whose shell's EXIT trap writes the directory it leaves (shell.Script).
// Where the trap opens the write end again through /dev/fd (dash can name no descriptor above 9), the
// kernel checks that open against the pipe's owner: with Options.User the pipe is given to that user.
func (r *Reaper) cwdPipe() (rd, wr *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, nil, err
	}
	if u := r.opts.User; u != nil {
		if err := unix.Fchown(p[1], int(u.Uid), int(u.Gid)); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, nil, err
		}
	}
	return os.NewFile(uintptr(p[0]), "cwd"), os.NewFile(uintptr(p[1]), "cwd"), nil
}
