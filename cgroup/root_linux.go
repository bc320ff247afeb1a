package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// supervisorLeaf is the leaf a delegated process moves itself into.
const supervisorLeaf = "supervisor"

// Root is the cgroup directory under which slices are created. It is safe for concurrent use.
type Root struct {
	info Info
}

// OpenRoot detects the host (see [Detect]), prepares the root for slices and returns it. It creates
// the root directory if needed; when opts asks for controllers or delegation it first moves this
// process into a leaf of its own cgroup and enables the controllers in the root's parent and in the
// root. It refuses to move anything on, or enable controllers in, the machine's true root cgroup.
//
// The error wraps the cause: unix.EROFS for a read-only cgroupfs, unix.EACCES without permission.
func OpenRoot(opts Options) (*Root, error) {
	info, err := detect(opts)
	if err != nil {
		return nil, err
	}
	for _, c := range opts.Controllers {
		if !slices.Contains(info.Controllers, c) {
			return nil, fmt.Errorf("root %s: controller %q is not offered by %s (offered: %s)",
				info.Root, c, filepath.Dir(info.Root), listOrNone(info.Controllers))
		}
	}
	parent := filepath.Dir(info.Root)
	if err := prepareParent(parent, info, opts); err != nil {
		return nil, err
	}
	if err := mkdirAll(info.Mountpoint, info.Root); err != nil {
		return nil, err
	}
	if len(opts.Controllers) > 0 {
		if err := enableControllers(info.Root, opts.Controllers); err != nil {
			return nil, err
		}
	}
	return &Root{info: info}, nil
}

// prepareParent moves this process out of the root's parent into a leaf, where that is needed or
// asked for, and enables the requested controllers in the parent's subtree.
func prepareParent(parent string, info Info, opts Options) error {
	enabled, err := readFields(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	var need []string
	for _, c := range opts.Controllers {
		if !slices.Contains(enabled, c) {
			need = append(need, c)
		}
	}
	if len(need) == 0 && !opts.Delegated {
		return nil
	}
	if isTrueRoot(parent) {
		if len(need) > 0 {
			return fmt.Errorf("refusing to enable %s on the machine's root cgroup %s; use a delegated subtree (--cgroup-root)",
				strings.Join(need, ", "), parent)
		}
		return nil // Delegated on the true root: nothing may be moved there.
	}
	if info.Self != "" && filepath.Join(info.Mountpoint, info.Self) == parent {
		if err := moveSelfToLeaf(parent); err != nil {
			return err
		}
	}
	if len(need) == 0 {
		return nil
	}
	if pids, _ := readPids(filepath.Join(parent, "cgroup.procs"), nil); len(pids) > 0 {
		return fmt.Errorf("enable %s in %s: processes %v live there and are not ours to move (no internal processes rule): %w",
			strings.Join(need, ", "), parent, pids, unix.EBUSY)
	}
	return enableControllers(parent, need)
}

// moveSelfToLeaf moves this process (all its threads) into dir/supervisor.
func moveSelfToLeaf(dir string) error {
	leaf := filepath.Join(dir, supervisorLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", leaf, err)
	}
	procs := filepath.Join(leaf, "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("move pid %d into %s: %w", os.Getpid(), leaf, err)
	}
	return nil
}

// enableControllers writes "+c" for each controller into dir's cgroup.subtree_control, one at a time
// so that the error names the controller that failed.
func enableControllers(dir string, controllers []string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	for _, c := range controllers {
		if err := os.WriteFile(file, []byte("+"+c), 0); err != nil {
			return fmt.Errorf("enable controller %q in %s: %w", c, dir, err)
		}
	}
	return nil
}

// mkdirAll creates dir and its missing parents below mount.
func mkdirAll(mount, dir string) error {
	if dir == mount || exists(dir) {
		return nil
	}
	if err := mkdirAll(mount, filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	return nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

// Info returns what was detected when the root was opened.
func (r *Root) Info() Info { return r.info }

// Path returns the absolute path of the root directory.
func (r *Root) Path() string { return r.info.Root }

// Create makes a new slice directly below the root. It fails (wrapping os.ErrExist) if the slice
// already exists, so two owners never share one.
func (r *Root) Create(name string) (*Slice, error) {
	return create(r.info.Mountpoint, r.info.Root, name)
}

// Open returns an existing slice below the root, for example one left by a previous run.
func (r *Root) Open(name string) (*Slice, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	s := &Slice{mount: r.info.Mountpoint, path: filepath.Join(r.info.Root, name)}
	if fi, err := os.Stat(s.path); err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", s.path, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("open cgroup %s: not a directory", s.path)
	}
	return s, nil
}

// Slices lists the names of the slices below the root, for example to find and kill what a crashed
// predecessor left behind.
func (r *Root) Slices() ([]string, error) {
	return childDirs(r.info.Root)
}

// LookupRoot returns the root that [OpenRoot] would open, without creating, moving or enabling
// anything, for a process that only inspects or cleans up (a sweep after a crash, a listing). It fails
// when the root does not exist or is not usable.
func LookupRoot(opts Options) (*Root, error) {
	info, err := detect(opts)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(info.Root); err != nil {
		return nil, fmt.Errorf("root %s: %w", info.Root, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("root %s: not a directory", info.Root)
	}
	return &Root{info: info}, nil
}

// OpenSlice returns the existing cgroup at path (absolute, on a cgroup2 filesystem) as a slice, for
// a process that learnt the path from another (a guard told by its server). Limits cannot be set on
// it.
func OpenSlice(path string) (*Slice, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return nil, fmt.Errorf("open cgroup %q: not a clean absolute path", path)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", path, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, fmt.Errorf("open cgroup %s: not on a cgroup2 filesystem", path)
	}
	return &Slice{path: path}, nil
}
