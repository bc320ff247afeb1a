package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// Standard mountpoints of cgroup2.
const (
	unifiedMount = "/sys/fs/cgroup"
	hybridMount  = "/sys/fs/cgroup/unified"
)

// Mode is the layout of the host's cgroup hierarchies, as far as cgroup2 is concerned.
type Mode int

const (
	// Unavailable means no cgroup2 hierarchy was found.
	Unavailable Mode = iota
	// Unified means cgroup2 is mounted at /sys/fs/cgroup (the only hierarchy).
	Unified
	// Hybrid means cgroup v1 controllers are at /sys/fs/cgroup and cgroup2 at /sys/fs/cgroup/unified.
	Hybrid
	// Mounted means cgroup2 was found at a mountpoint given in [Options.Mountpoint].
	Mounted
)

func (m Mode) String() string {
	switch m {
	case Unified:
		return "unified"
	case Hybrid:
		return "hybrid"
	case Mounted:
		return "mounted"
	}
	return "unavailable"
}

// KillMethod is the strongest way the kernel offers to kill a whole slice. The cgroup package only
// provides the files ([Slice.Kill], [Slice.Freeze]); whoever kills uses the method.
type KillMethod int

const (
	// KillSignal means neither cgroup.kill nor the freezer: every process must be sent SIGKILL, the
	// slice re-read until no new pid appears.
	KillSignal KillMethod = iota
	// KillFreeze means the freezer (cgroup.freeze, Linux 5.2 and later): freeze the slice so that
	// nothing can fork, SIGKILL every process, thaw.
	KillFreeze
	// KillFile means cgroup.kill (Linux 5.14 and later), which also kills children forked while it runs.
	KillFile
)

func (k KillMethod) String() string {
	switch k {
	case KillFile:
		return "cgroup.kill"
	case KillFreeze:
		return "freeze+SIGKILL"
	}
	return "SIGKILL sweep"
}

// Options configures [Detect] and [OpenRoot]. The zero value detects everything and uses a child
// "reaper" of the process's own cgroup.
type Options struct {
	// Mountpoint is where cgroup2 is mounted. Empty means the standard place for the host's mode:
	// /sys/fs/cgroup on unified hosts, /sys/fs/cgroup/unified on hybrid ones.
	Mountpoint string

	// Root is the absolute path of the directory slices are created in; it must lie strictly below
	// the mountpoint. Empty means a child named "reaper" of the process's own cgroup.
	Root string

	// Controllers lists controllers ("memory", "pids", "cpu", ...) to enable for slices so that
	// limits can be set on them. Empty enables none. Enabling a controller in the root's parent
	// moves this process into a leaf first (see Delegated); on the machine's true root cgroup it is
	// refused.
	Controllers []string

	// Delegated says that the process's own cgroup was delegated to it (systemd Delegate=yes, a
	// container's cgroup namespace): [OpenRoot] moves this process into a leaf named "supervisor"
	// of its cgroup, as delegated supervisors should, so that the "no internal processes" rule can
	// never bite when controllers are enabled later. It is implied when Controllers must be enabled
	// in the process's own cgroup. It is never done on the machine's true root cgroup.
	Delegated bool
}

// Info describes what the host offers for cgroup containment. It is a value: log it, show it, compare
// it. Its String method gives a one-line summary.
type Info struct {
	Mode Mode
	// Mountpoint is where cgroup2 is mounted; empty when Mode is Unavailable.
	Mountpoint string
	// Self is the process's own cgroup relative to the mountpoint ("/" for the hierarchy's root);
	// empty when it is unknown.
	Self string
	// Root is the absolute path slices would be created in.
	Root string
	// Writable reports whether Root (or, before it exists, its nearest existing ancestor) can be
	// written by this process.
	Writable bool
	// Reason says, when Usable is false, why cgroup containment cannot be used.
	Reason string
	// Kill is the strongest kill the kernel offers for slices under Root.
	Kill KillMethod
	// Controllers are the controllers offered to Root by its parent (cgroup.controllers of the
	// parent), sorted as the kernel lists them.
	Controllers []string
}

// Usable reports whether slices can be created under Root.
func (i Info) Usable() bool { return i.Mode != Unavailable && i.Writable && i.Reason == "" }

// String returns a one-line summary such as
// "cgroup2 hybrid at /sys/fs/cgroup/unified/reaper, kill via cgroup.kill, controllers: hugetlb".
func (i Info) String() string {
	if i.Mode == Unavailable {
		return "no cgroup2: " + i.Reason
	}
	where := i.Root
	if where == "" {
		where = i.Mountpoint
	}
	ctrl := strings.Join(i.Controllers, " ")
	if ctrl == "" {
		ctrl = "none"
	}
	s := fmt.Sprintf("cgroup2 %s at %s, kill via %s, controllers: %s", i.Mode, where, i.Kill, ctrl)
	if !i.Usable() {
		s += ", not usable: " + i.Reason
	}
	return s
}

// Detect inspects the host without changing anything. Problems do not make it fail: they end up in
// Info.Reason and Info.Usable reports false.
func Detect(opts Options) Info {
	info, _ := detect(opts)
	return info
}

// detect is Detect with the reason as an error that callers can match (unix.EROFS, unix.EACCES).
func detect(opts Options) (Info, error) {
	info, err := detectInfo(opts)
	if err != nil {
		info.Reason = err.Error()
	}
	return info, err
}

func detectInfo(opts Options) (Info, error) {
	var info Info
	var err error
	info.Mode, info.Mountpoint, err = detectMount(opts.Mountpoint)
	if err != nil {
		return info, err
	}
	self, selfErr := ownCgroup("/proc/self/cgroup")
	if selfErr == nil {
		var root string
		if root, selfErr = mountRoot("/proc/self/mountinfo", info.Mountpoint); selfErr == nil {
			self, selfErr = resolveSelf(info.Mountpoint, root, self, os.Getpid())
		}
	}
	if selfErr == nil {
		if _, err := os.Stat(filepath.Join(info.Mountpoint, self)); err != nil {
			selfErr = fmt.Errorf("own cgroup %s is not visible under %s", self, info.Mountpoint)
		} else {
			info.Self = self
		}
	}
	switch {
	case opts.Root != "":
		info.Root = opts.Root
		if err := checkRootPath(info.Mountpoint, opts.Root); err != nil {
			return info, err
		}
	case selfErr != nil:
		return info, selfErr
	default:
		info.Root = filepath.Join(info.Mountpoint, info.Self, "reaper")
	}
	info.Controllers, _ = readFields(filepath.Join(filepath.Dir(info.Root), "cgroup.controllers"))
	info.Kill = detectKill(info.Mountpoint, info.Root)
	if err := checkWritable(info.Root); err != nil {
		return info, err
	}
	info.Writable = true
	return info, nil
}

// detectMount finds the cgroup2 mountpoint, using containerd's mode detection for the standard places.
func detectMount(mountpoint string) (Mode, string, error) {
	if mountpoint != "" {
		var st unix.Statfs_t
		if err := unix.Statfs(mountpoint, &st); err != nil {
			return Unavailable, "", fmt.Errorf("statfs %s: %w", mountpoint, err)
		}
		if st.Type != unix.CGROUP2_SUPER_MAGIC {
			return Unavailable, "", fmt.Errorf("%s is not a cgroup2 filesystem", mountpoint)
		}
		return Mounted, filepath.Clean(mountpoint), nil
	}
	switch cgroups.Mode() {
	case cgroups.Unified:
		return Unified, unifiedMount, nil
	case cgroups.Hybrid:
		return Hybrid, hybridMount, nil
	case cgroups.Legacy:
		return Unavailable, "", fmt.Errorf("cgroup v1 only (no cgroup2 at %s or %s)", unifiedMount, hybridMount)
	}
	return Unavailable, "", fmt.Errorf("no cgroup filesystem at %s", unifiedMount)
}

// ownCgroup returns the cgroup2 path ("0::<path>") from a /proc/<pid>/cgroup file.
func ownCgroup(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if p, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			s := string(p)
			if strings.HasSuffix(s, " (deleted)") || !strings.HasPrefix(s, "/") {
				return "", fmt.Errorf("own cgroup %q in %s is unusable", s, file)
			}
			return s, nil
		}
	}
	return "", fmt.Errorf("no cgroup2 entry (0::) in %s", file)
}

// checkRootPath refuses a root that is not strictly below the mountpoint.
func checkRootPath(mount, root string) error {
	if !filepath.IsAbs(root) {
		return fmt.Errorf("root %q: not an absolute path", root)
	}
	if filepath.Clean(root) != root {
		return fmt.Errorf("root %q: not a clean path (want %q)", root, filepath.Clean(root))
	}
	rel, err := filepath.Rel(mount, root)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("root %s: not below the cgroup2 mountpoint %s", root, mount)
	}
	for _, c := range strings.Split(rel, "/") {
		if err := ValidateName(c); err != nil {
			return fmt.Errorf("root %s: %w", root, err)
		}
	}
	return nil
}

// nearestExisting returns path or its closest ancestor that exists.
func nearestExisting(path string) string {
	for p := path; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil || p == "/" {
			return p
		}
	}
}

// checkWritable says why path (or its nearest existing ancestor) cannot be written, or nil.
func checkWritable(path string) error {
	p := nearestExisting(path)
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", p, err)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return fmt.Errorf("%s is on a read-only mount: %w", p, unix.EROFS)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("%s is not on a cgroup2 filesystem", p)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("%s is not writable: %w", p, err)
	}
	return nil
}

// isTrueRoot reports whether dir is the root of a cgroup2 hierarchy as the kernel sees it (not a
// namespace root): only that cgroup lacks cgroup.events.
func isTrueRoot(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "cgroup.events"))
	return errors.Is(err, os.ErrNotExist)
}

// detectKill looks for cgroup.kill and cgroup.freeze in root or, before it exists, its nearest
// existing ancestor; where that is the machine's true root (which has neither file), the kernel
// version decides.
func detectKill(mount, root string) KillMethod {
	if p := nearestExisting(root); strings.HasPrefix(p, mount) && !isTrueRoot(p) {
		switch {
		case exists(filepath.Join(p, "cgroup.kill")):
			return KillFile
		case exists(filepath.Join(p, "cgroup.freeze")):
			return KillFreeze
		}
		return KillSignal
	}
	switch major, minor := kernelVersion(); {
	case major > 5 || major == 5 && minor >= 14:
		return KillFile
	case major == 5 && minor >= 2:
		return KillFreeze
	}
	return KillSignal
}

func kernelVersion() (major, minor int) {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return 0, 0
	}
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	return major, minor
}
