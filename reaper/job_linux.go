package reaper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cgreaper/reaper/internal/pidns"
	"github.com/cgreaper/reaper/internal/proc"
	"golang.org/x/sys/unix"
)

// ErrNotFound is returned by Exec when the program cannot be found; ErrNotExecutable when it is
// found but cannot be run (no permission, not an executable). A shell reports these as exit
// statuses 127 and 126.
var (
	ErrNotFound      = errors.New("command not found")
	ErrNotExecutable = errors.New("command cannot be executed")
)

// ExecOptions says how Exec runs a program. Stdout is required.
type ExecOptions struct {
	// Argv is the program and its arguments, run directly (no shell). Argv[0] is looked up in the
	// PATH of Env when it has no slash.
	Argv []string
	// Env is the program's environment, before the markers are added. Nil means the Reaper's (see
	// Options.Env).
	Env []string
	// Dir is its working directory; empty means the session's.
	Dir string
	// Stdin, Stdout and Stderr are its own; a nil Stdin reads /dev/null, a nil Stderr is Stdout.
	Stdin, Stdout, Stderr *os.File
	// Foreground makes the program's process group the foreground process group of the terminal
	// Stdin is, so that a terminal's Ctrl-C and job control reach it as they would without reaper.
	// The caller checks that it owns the terminal's foreground, and gives it back when the program
	// has ended.
	Foreground bool
}

// A Job is a program a session runs with its own standard files (reaper run's command). It ends
// with its session like everything else the session started.
type Job struct{ t *task }

// Exec starts a program in the session: in its own process group, in a leaf of the session's slice
// (or with the session's marker in process containment), with the given standard files. Everything it
// starts belongs to the session.
func (s *Session) Exec(opts ExecOptions) (*Job, error) {
	if len(opts.Argv) == 0 || opts.Stdout == nil {
		return nil, fmt.Errorf("session %s: exec: %w: no program or no stdout", s.id, ErrBadCommand)
	}
	env := opts.Env
	if env == nil {
		env = s.r.env
	}
	path, err := lookPath(opts.Argv[0], env)
	if err != nil {
		return nil, fmt.Errorf("session %s: exec %s: %w", s.id, opts.Argv[0], err)
	}
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	if err := s.admit(false); err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		dir = s.Cwd()
	}
	t := &task{
		id: newID("t-"), command: strings.Join(opts.Argv, " "), started: time.Now(),
		background: true, status: Running, done: make(chan struct{}),
	}
	sp, _, err := s.launch(t, func(in *pidns.Init) (spawned, string, error) {
		if s.r.root != nil {
			if err := s.place(t); err != nil {
				return spawned{}, "", err
			}
		}
		sp, err := s.r.spawn(spawnSpec{
			argv:       append([]string{path}, opts.Argv[1:]...),
			env:        append(env[:len(env):len(env)], s.marker, EnvTask+"="+t.id),
			dir:        dir,
			stdin:      opts.Stdin,
			stdout:     opts.Stdout,
			stderr:     opts.Stderr,
			leaf:       t.leaf,
			foreground: opts.Foreground,
			init:       in,
		})
		if err != nil {
			s.unplace(t)
		}
		return sp, "", err
	})
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", s.id, err)
	}
	s.adopt(t, sp, true)
	return &Job{t: t}, nil
}

// lookPath finds file in the PATH of env, as a shell would.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		if err := executable(file); err != nil {
			return "", err
		}
		return file, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	var denied error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		err := executable(p)
		if err == nil {
			return p, nil
		}
		if errors.Is(err, ErrNotExecutable) && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", denied
	}
	return "", fmt.Errorf("%w: %s", ErrNotFound, file)
}

// executable reports why path cannot be run, or nil.
func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrNotFound, path)
	}
	if fi.IsDir() {
		return fmt.Errorf("%w: %s is a directory", ErrNotExecutable, path)
	}
	if err := unix.Access(path, unix.X_OK); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotExecutable, path, err)
	}
	return nil
}

// Pid returns the program's pid, which is also its process group's id.
func (j *Job) Pid() int { return j.t.pid }

// Signal sends sig to the program's process group (the program and what it started without leaving
// the group), as a terminal does. Once the program's exit has been seen it does nothing.
func (j *Job) Signal(sig unix.Signal) error {
	j.t.mu.Lock()
	defer j.t.mu.Unlock()
	if j.t.status.Terminal() {
		return nil
	}
	if sent, err := j.t.main.SignalGroup(sig); sent || err != nil {
		return err
	}
	// No pidfd for the group (a kernel before 6.9): the group's id is the program's pid, which
	// cannot have been reused while its exit has not been seen. An unknown pid (0) must not reach
	// kill(2): -0 is this process's own group.
	if j.t.pid <= 0 {
		return nil
	}
	if err := unix.Kill(-j.t.pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("send %v to process group %d: %w", sig, j.t.pid, err)
	}
	return nil
}

// Wait blocks until the program exits or ctx is done, and returns its exit status in the shell's
// convention: 128+n for a death by signal n.
func (j *Job) Wait(ctx context.Context) (int, error) {
	select {
	case <-j.t.done:
		return j.t.info(0).ExitCode, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Processes describes the session's processes that are alive now: in its slice or, in process
// containment, found by its marker and by what it remembers. Each carries the pid the session's
// commands see it by (Proc.SessionPid) where that is not its pid here.
func (s *Session) Processes() []Proc {
	s.mu.Lock()
	slice := s.slice
	seeds := make(map[int]uint64, len(s.known)+len(s.tasks))
	for pid, start := range s.known {
		seeds[pid] = start
	}
	for _, t := range s.tasks {
		if !t.currentStatus().Terminal() {
			seeds[t.pid] = t.start
		}
	}
	s.mu.Unlock()
	var pids []int
	if slice != nil {
		pids, _ = slice.Pids()
	} else {
		q := s.sessionQuery(seeds)
		q.Skip = nil // the tasks' own subtrees too
		found, _ := proc.NewWalker().Find(q)
		for _, p := range found {
			pids = append(pids, p.Pid)
		}
	}
	out := make([]Proc, 0, len(pids))
	w := proc.NewWalker()
	for _, p := range pids {
		if d := proc.Describe(p); d.State != "?" && d.State != "Z" {
			if in := s.sessionPid(w, p); in != p {
				d.SessionPid = in
			}
			out = append(out, Proc(d))
		}
	}
	return out
}
