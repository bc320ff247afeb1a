package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Root is the cgroup directory under which slices are created. It is safe for concurrent use.
type Root struct {
	// The fields up to mu are fixed at creation.
	info        Info
	controllers []string // enabled in the root's subtree for slices
	// own says the root is the default one, reaper's own child of the process's cgroup: Release
	// removes it when it is empty, whichever instance made it.
	own bool

	// mu guards the field that follows, and serializes making the root with removing it.
	mu      sync.Mutex
	created []string // directories this Root made (the root and missing parents), top first
}

// maxRootAttempts bounds how often Create makes the root again when it vanishes.
const maxRootAttempts = 8

// OpenRoot detects the host (see [Detect]), prepares the root for slices and returns it. It creates
// the root directory and its missing parents; it moves this process into a leaf of its own cgroup
// where [Options.Delegated] says so, and enables opts.Controllers from the root's nearest existing
// ancestor down to the root. It refuses to move anything on, or enable controllers in, the
// machine's true root cgroup. Where the controllers must be enabled in the own cgroup and processes
// other than this one and its [Options.Companions] live there (a client that started this process
// in its own cgroup), it fails with unix.EBUSY before it moves or creates anything.
//
// The error wraps the cause: unix.EROFS for a read-only cgroupfs, unix.EACCES without permission.
func OpenRoot(opts Options) (*Root, error) {
	info, err := detect(opts)
	if err != nil {
		return nil, err
	}
	top := nearestExisting(filepath.Dir(info.Root))
	for _, c := range opts.Controllers {
		if !slices.Contains(info.Controllers, c) {
			return nil, fmt.Errorf("root %s: controller %q is not offered by %s (offered: %s)",
				info.Root, c, top, listOrNone(info.Controllers))
		}
	}
	r := &Root{info: info, controllers: slices.Clone(opts.Controllers), own: opts.Root == ""}
	if r.info.Supervisor, err = delegate(info, opts, top); err != nil {
		return nil, err
	}
	if err := r.prepare(); err != nil {
		return nil, err
	}
	return r, nil
}

// prepare makes the root ready for slices: it enables the controllers in the root's nearest
// existing ancestor, then creates each missing directory down to the root and enables them there.
func (r *Root) prepare() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	root := r.info.Root
	top := nearestExisting(filepath.Dir(root))
	if err := enableInAncestor(top, r.controllers); err != nil {
		return err
	}
	rel, err := filepath.Rel(top, root)
	if err != nil {
		return fmt.Errorf("root %s: %w", root, err)
	}
	dir := top
	for _, name := range strings.Split(rel, "/") {
		dir = filepath.Join(dir, name)
		err := os.Mkdir(dir, 0o755)
		switch {
		case err == nil:
			r.created = append(r.created, dir)
		case !errors.Is(err, os.ErrExist):
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if err := enableControllers(dir, r.controllers); err != nil {
			return err
		}
	}
	return nil
}

// enableInAncestor enables controllers in dir, the root's nearest existing ancestor, where they are
// not enabled yet. Nothing may live in dir then (the "no internal processes" rule): this process has
// left it already if it is its own cgroup, and other processes are not ours to move.
func enableInAncestor(dir string, controllers []string) error {
	enabled, err := readFields(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	need := missing(controllers, enabled)
	if len(need) == 0 {
		return nil
	}
	if isTrueRoot(dir) {
		return fmt.Errorf("refusing to enable %s on the machine's root cgroup %s; use a delegated subtree (--cgroup-root)",
			strings.Join(need, ", "), dir)
	}
	if pids, _ := readPids(nil, filepath.Join(dir, "cgroup.procs"), nil); len(pids) > 0 {
		return notOursError(need, dir, pids)
	}
	return enableControllers(dir, need)
}

// notOursError says that the controllers need cannot be enabled in dir because the processes pids,
// which are not this program's, live there.
func notOursError(need []string, dir string, pids []int) error {
	return fmt.Errorf("enable %s in %s: processes %v live there and are not ours to move (no internal processes rule): %w",
		strings.Join(need, ", "), dir, pids, unix.EBUSY)
}

// missing returns the elements of want that have is lacks.
func missing(want, have []string) []string {
	var out []string
	for _, c := range want {
		if !slices.Contains(have, c) {
			out = append(out, c)
		}
	}
	return out
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

// Release removes, as the root's user closes, what is left of the root that nobody uses: the root
// directory itself when it is the default root (whichever instance made it) or when this Root made
// it, and then the parents this Root made for it, deepest first (see removeEmpty). A root that
// pre-existed an explicit Options.Root is the operator's and stays.
//
// The Root can still be used afterwards: [Root.Create] makes the root again if it is gone, which is
// also how instances sharing a root survive one another.
func (r *Root) Release() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	busy, err := r.removeEmpty(r.created)
	if busy != "" {
		r.created = slices.DeleteFunc(r.created, func(d string) bool { return len(d) > len(busy) })
	} else if err == nil {
		r.created = nil
	}
	return err
}

// Made returns the directories this Root made for the root (the root and the parents that were
// missing), top first: what an instance records, so that a sweep after its death can remove them
// (see RemoveMade).
func (r *Root) Made() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.created)
}

// RemoveMade removes what another Root made for this root and recorded (see Made), once its user
// is dead and its slice gone: as Release does, each of made that is the root or one of its
// ancestors below the mountpoint (whatever else made names is left alone), and the root itself
// when it is the default one, deepest first, as long as each is empty.
func (r *Root) RemoveMade(made []string) error {
	var dirs []string
	for _, d := range made {
		if d == r.info.Root || d != r.info.Mountpoint && strings.HasPrefix(r.info.Root, d+"/") && strings.HasPrefix(d, r.info.Mountpoint+"/") {
			dirs = append(dirs, d)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := r.removeEmpty(dirs)
	return err
}

// removeEmpty removes dirs, and the root too when it is the default one, deepest first, and
// returns the first that was still in use (holding slices, another live instance's or a crashed
// one's, or processes: the kernel refuses to remove it, which is not an error; its parents stay
// then too). A directory already gone is not an error. r.mu must be held.
func (r *Root) removeEmpty(dirs []string) (busy string, err error) {
	if r.own && !slices.Contains(dirs, r.info.Root) {
		dirs = append(slices.Clone(dirs), r.info.Root)
	}
	dirs = slices.Clone(dirs)
	slices.SortFunc(dirs, func(a, b string) int { return len(a) - len(b) })
	for i := len(dirs) - 1; i >= 0; i-- {
		err := unix.Rmdir(dirs[i])
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.EBUSY), errors.Is(err, unix.ENOTEMPTY):
			return dirs[i], nil
		default:
			return "", fmt.Errorf("remove cgroup %s: %w", dirs[i], err)
		}
	}
	return "", nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

// top returns the root as the parent of its slices.
func (r *Root) top() *Slice {
	return &Slice{mount: r.info.Mountpoint, path: r.info.Root, controllers: r.controllers}
}

// Info returns what was detected when the root was opened.
func (r *Root) Info() Info { return r.info }

// Path returns the absolute path of the root directory.
func (r *Root) Path() string { return r.info.Root }

// Create makes a new slice directly below the root. It fails (wrapping os.ErrExist) if the slice
// already exists, so two owners never share one. If the root is gone (another instance sharing it
// removed it as it closed, see [Root.Release]), Create makes it again and retries.
func (r *Root) Create(name string) (*Slice, error) {
	for attempt := 1; ; attempt++ {
		s, err := create(r.top().Leaf(name))
		if err == nil || !errors.Is(err, os.ErrNotExist) || attempt == maxRootAttempts {
			return s, err
		}
		if err := r.prepare(); err != nil {
			return nil, err
		}
	}
}

// Open returns an existing slice directly below the root, for a process that acts on what it finds
// there (a sweep that kills and removes what a dead predecessor left). It refuses what must never be
// acted on that way, whoever made it: a name that is not a valid slice name, an entry that is not a
// directory, a directory that is a mount point (a cgroup bind-mounted there from elsewhere in the
// hierarchy, or another file system), and a cgroup that holds this process's own (its kill would
// kill the caller).
func (r *Root) Open(name string) (*Slice, error) {
	s, err := r.top().Leaf(name)
	if err != nil {
		return nil, err
	}
	var st, root unix.Statx_t
	const mask = unix.STATX_TYPE | unix.STATX_MNT_ID
	if err := unix.Statx(unix.AT_FDCWD, s.path, unix.AT_SYMLINK_NOFOLLOW, mask, &st); err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", s.path, err)
	}
	if err := unix.Statx(unix.AT_FDCWD, r.info.Root, unix.AT_SYMLINK_NOFOLLOW, mask, &root); err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", r.info.Root, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, fmt.Errorf("open cgroup %s: not a directory", s.path)
	case st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0,
		st.Mask&root.Mask&unix.STATX_MNT_ID != 0 && st.Mnt_id != root.Mnt_id, st.Dev_major != root.Dev_major || st.Dev_minor != root.Dev_minor:
		return nil, fmt.Errorf("open cgroup %s: a mount point, not a cgroup made below %s: %w", s.path, r.info.Root, ErrNotOurs)
	}
	for _, own := range []string{filepath.Join(r.info.Mountpoint, r.info.Self), r.info.Supervisor} {
		if r.info.Self != "" && own != "" && within(s.path, own) {
			return nil, fmt.Errorf("open cgroup %s: it holds this process's own cgroup %s: %w", s.path, own, ErrNotOurs)
		}
	}
	return s, nil
}

// ErrNotOurs is returned by [Root.Open] for a cgroup that must not be acted on as a slice: a mount
// point, or one holding the caller's own cgroup.
var ErrNotOurs = errors.New("not a slice to act on")

// Slices lists the names of the slices below the root, for example to find and kill what a crashed
// predecessor left behind.
func (r *Root) Slices() ([]string, error) {
	return childDirs(nil, r.info.Root)
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
	return &Root{info: info, own: opts.Root == ""}, nil
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
