package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Slice is one cgroup below a [Root], possibly with nested leaves. Its methods are safe for concurrent
// use; it holds no state beyond what is fixed at creation.
type Slice struct {
	mount string // cgroup2 mountpoint, for containerd's resource writer
	path  string // absolute path of the cgroup directory
	// controllers are the root's [Options.Controllers]: a slice offers them to the slices created
	// below it (see [Slice.Create]).
	controllers []string
	// spare lends descriptors to the slice's reads and writes where the descriptor limit refuses one
	// (see [Slice.Spare]); nil lends none.
	spare Reserve
}

// Reserve lends descriptors to opens that the descriptor limit refused (EMFILE, ENFILE), so that a
// teardown cannot be starved of them: reaper's keeps a few descriptors open to give up (see
// [Slice.Spare]).
type Reserve interface {
	// Open runs open, a system call that makes one descriptor, again after it has given up one of
	// its own; what it returns is closed with Close.
	Open(open func() (int, error)) (int, error)
	// Close closes fd, which Open made or not, and takes the slot back where it gave one up.
	Close(fd int)
}

// Spare returns the slice as one whose reads and writes of cgroupfs (its kill, its listings, its
// waits, its removal) take a descriptor from r where the descriptor limit refuses one: a teardown's.
func (s *Slice) Spare(r Reserve) *Slice {
	c := *s
	c.spare = r
	return &c
}

// create makes the directory of s, as Leaf returned it with err.
func create(s *Slice, err error) (*Slice, error) {
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(s.path, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", s.path, err)
	}
	return s, nil
}

// Path returns the absolute path of the slice's cgroup directory.
func (s *Slice) Path() string { return s.path }

// Create makes a nested leaf below the slice (for example one per task inside a session's slice).
// When the root was opened with [Options.Controllers], it first enables them in the slice's
// cgroup.subtree_control (once they are, the write changes nothing), so that the leaf has their files:
// limits can be set on it and its memory.events counts its own OOM kills. The slice must then hold no
// process of its own (the "no internal processes" rule; EBUSY otherwise), and a slice that has
// nested leaves cannot be spawned into: processes belong in leaves.
func (s *Slice) Create(name string) (*Slice, error) {
	if len(s.controllers) > 0 {
		if err := enableControllers(s.path, s.controllers); err != nil {
			return nil, err
		}
	}
	return create(s.Leaf(name))
}

// Leaf returns the nested leaf name below the slice, without checking that it exists.
func (s *Slice) Leaf(name string) (*Slice, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return &Slice{mount: s.mount, path: filepath.Join(s.path, name), controllers: s.controllers}, nil
}

// Children lists the names of the cgroups directly below the slice, sorted. A slice that no longer
// exists has none.
func (s *Slice) Children() ([]string, error) {
	return childDirs(s.spare, s.path)
}

// OpenFD opens the slice's directory for SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}, which
// makes the kernel start a child in the slice from its first instruction (clone3 with
// CLONE_INTO_CGROUP). The caller closes the file.
func (s *Slice) OpenFD() (*os.File, error) {
	fd, err := unix.Open(s.path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", s.path, err)
	}
	return os.NewFile(uintptr(fd), s.path), nil
}

// JoinArgs returns an argv that, run by a process started outside the slice, moves that process into
// the slice and then executes argv. It is the fallback for hosts that refuse clone3 into a cgroup
// (ENOSYS under a container's seccomp profile, EPERM): the process joins before it runs anything, so
// nothing it starts can be born outside the slice, and no pid is ever moved after it started working.
// The join fails the command with exit status 125 if the slice cannot be joined.
func (s *Slice) JoinArgs(argv []string) []string {
	// "0" written to cgroup.procs means "the writing process"; echo is a builtin, so that is the shell
	// itself, which then replaces itself with argv.
	const script = `echo 0 >"$1" || { echo "reaper: cannot join cgroup $1" >&2; exit 125; }; shift; exec "$@"`
	return append([]string{"/bin/sh", "-c", script, "reaper-join", filepath.Join(s.path, "cgroup.procs")}, argv...)
}

// Pids lists the processes in the slice and all its descendants. A slice that no longer exists has
// no processes.
func (s *Slice) Pids() ([]int, error) {
	return idsRecursive(s.spare, s.path, "cgroup.procs")
}

// OwnPids lists the processes in the slice itself, not those of the cgroups below it. A slice that
// no longer exists has no processes.
func (s *Slice) OwnPids() ([]int, error) {
	return readPids(s.spare, filepath.Join(s.path, "cgroup.procs"), nil)
}

// Threads lists the thread ids of every thread in the slice and all its descendants (cgroup.threads).
// A process's pid is the thread id of its main thread, so the list holds each process's pid too,
// unless that main thread has already exited.
func (s *Slice) Threads() ([]int, error) {
	return idsRecursive(s.spare, s.path, "cgroup.threads")
}

// Remove deletes the slice and its nested leaves, children before parents. It must be empty: kill it
// first; a populated slice is refused at once. EBUSY on an empty slice (the kernel may still be
// releasing exited processes) is retried a bounded number of times, for up to about two seconds. A
// slice that is already gone is not an error.
func (s *Slice) Remove() error {
	dirs, err := subtree(s.spare, s.path, nil)
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(dirs) {
		if err := rmdirRetry(s.spare, d); err != nil {
			return err
		}
	}
	return nil
}

// rmdirRetry removes one empty cgroup directory, retrying EBUSY with a growing delay.
func rmdirRetry(r Reserve, dir string) error {
	delay := time.Millisecond
	var err error
	for attempt := 0; attempt < 12; attempt++ {
		err = unix.Rmdir(dir)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case !errors.Is(err, unix.EBUSY):
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		if populated, _ := (&Slice{path: dir, spare: r}).Populated(); populated {
			return fmt.Errorf("remove cgroup %s: still populated (kill it first): %w", dir, err)
		}
		time.Sleep(delay)
		delay = min(2*delay, 400*time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: still busy after retries: %w", dir, err)
}

// subtree lists dir and every cgroup below it, parents before children, calling visit (where not
// nil) on each before its children are listed; where a listing or visit fails, what it listed so far
// and the error.
func subtree(r Reserve, dir string, visit func(string) error) ([]string, error) {
	dirs := []string{dir}
	for i := 0; i < len(dirs); i++ {
		if visit != nil {
			if err := visit(dirs[i]); err != nil {
				return dirs, err
			}
		}
		children, err := childDirs(r, dirs[i])
		if err != nil {
			return dirs, err
		}
		for _, c := range children {
			dirs = append(dirs, filepath.Join(dirs[i], c))
		}
	}
	return dirs, nil
}

// idsRecursive lists the ids in file (cgroup.procs or cgroup.threads) of dir and its descendants. A
// directory that vanishes while it is read contributes nothing. Each cgroup's file is read before
// its children are listed: a process that moves into a child made after that listing has been
// counted already, in its parent.
func idsRecursive(r Reserve, dir, file string) ([]int, error) {
	var ids []int
	_, err := subtree(r, dir, func(d string) (err error) {
		ids, err = readPids(r, filepath.Join(d, file), ids)
		return err
	})
	return ids, err
}

// Add moves the process pid into the slice. It is for a process that cannot be started in the slice
// (clone3 refused) and cannot join it itself (its user may not write cgroup.procs), moved while it
// waits to run anything; prefer spawning into the slice (OpenFD) or joining it (JoinArgs).
func (s *Slice) Add(pid int) error {
	return writeFile(nil, s.path, "cgroup.procs", strconv.Itoa(pid))
}
