package cgroup

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Standard mountpoints of cgroup2, and where mounts are listed.
const (
	unifiedMount  = "/sys/fs/cgroup"
	hybridMount   = "/sys/fs/cgroup/unified"
	mountinfoFile = "/proc/self/mountinfo"
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
	// Mounted means cgroup2 was found at another mountpoint: [Options.Mountpoint], or the mount
	// holding [Options.Root].
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
	// KillFile means cgroup.kill (Linux 5.14 and later), which also kills children forked while it
	// runs. It is the zero value: whoever does not know better asks for the strongest kill.
	KillFile KillMethod = iota
	// KillFreeze means the freezer (cgroup.freeze, Linux 5.2 and later): freeze the slice so that
	// nothing can fork, SIGKILL every process, thaw.
	KillFreeze
	// KillSignal means neither cgroup.kill nor the freezer: every process must be sent SIGKILL, the
	// slice re-read until no new pid appears.
	KillSignal
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
	// Mountpoint is where cgroup2 is mounted. Empty means the mount holding Root, wherever it is
	// mounted, when Root is set; otherwise the standard place for the host's mode: /sys/fs/cgroup on
	// unified hosts, /sys/fs/cgroup/unified on hybrid ones.
	Mountpoint string

	// Root is the absolute, clean path of the directory slices are created in; it must lie
	// strictly below a cgroup2 mountpoint. It and its missing parents are created. Empty means a
	// child named "reaper" of the process's own cgroup, as the mount shows it: slices are never
	// created outside the own cgroup's subtree unless Root says so.
	Root string

	// Controllers lists controllers ("memory", "pids", "cpu", ...) to enable for slices so that
	// limits can be set on them. Empty enables none. They are enabled from the root's nearest
	// existing ancestor down; enabling one in the process's own cgroup moves this process into a
	// leaf first (see Delegated); on the machine's true root cgroup it is refused.
	Controllers []string

	// Delegated says that the process's own cgroup was delegated to it, where that cannot be
	// detected. [OpenRoot] moves this process into a leaf named "supervisor" of its own cgroup when
	// the root lies below the own cgroup and one of these holds: Delegated is set; the own cgroup is
	// the root of this process's cgroup namespace, or systemd marked it delegated (trusted.delegate or
	// user.delegate, Delegate=yes); or Controllers must be enabled in it. Then the "no internal
	// processes" rule never bites. The move is never made on the machine's true root cgroup.
	Delegated bool

	// Companions are processes of this program that live in its cgroup beside it (a guard, the
	// process clients signal, whose child this is): when OpenRoot moves this process into a leaf,
	// it moves them too, or the cgroup it leaves would still hold processes. A companion found in
	// another cgroup stays where it is. Empty means none.
	Companions []int
}

// Info describes what the host offers for cgroup containment. It is a value: log it, show it, compare
// it. Its String method gives a one-line summary.
type Info struct {
	Mode Mode
	// Mountpoint is where cgroup2 is mounted; empty when Mode is Unavailable.
	Mountpoint string
	// Self is the process's own cgroup relative to the mountpoint ("/" for the mount's top), as
	// the mount shows it: in a cgroup namespace whose mount shows the host's hierarchy it is the
	// host's path, not the "/" of /proc/self/cgroup. Empty when it is unknown.
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
	// Controllers are the controllers that can be enabled for Root: cgroup.controllers of its
	// parent or, before that exists, of its nearest existing ancestor, as the kernel lists them.
	Controllers []string
	// TopControllers are the controllers the mount's top offers (its cgroup.controllers): no cgroup
	// of the mount, a systemd scope included, can have another.
	TopControllers []string
	// Supervisor is the leaf [OpenRoot] moved this process into (see [Options.Delegated]); empty
	// when it did not move it, and always from [Detect].
	Supervisor string
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
	s := fmt.Sprintf("cgroup2 %s at %s, kill via %s, controllers: %s", i.Mode, where, i.Kill, listOrNone(i.Controllers))
	if i.Supervisor != "" {
		s += ", this process moved into " + i.Supervisor
	}
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
func detect(opts Options) (info Info, err error) {
	defer func() {
		if err != nil {
			info.Reason = err.Error()
		}
	}()
	mounts, err := readMounts(mountinfoFile)
	if err != nil {
		return info, err
	}
	var m mountInfo
	info.Mode, info.Mountpoint, m, err = detectMount(mounts, opts)
	if err != nil {
		return info, err
	}
	self, selfErr := ownCgroup("/proc/self/cgroup")
	if selfErr == nil {
		info.Self, selfErr = resolveSelf(info.Mountpoint, shownRoot(m, info.Mountpoint), self)
	}
	switch {
	case opts.Root != "":
		info.Root = opts.Root
	case selfErr != nil:
		return info, selfErr
	default:
		info.Root = filepath.Join(info.Mountpoint, info.Self, "reaper")
	}
	info.Controllers, _ = readFields(filepath.Join(nearestExisting(filepath.Dir(info.Root)), "cgroup.controllers"))
	info.TopControllers, _ = readFields(filepath.Join(info.Mountpoint, "cgroup.controllers"))
	info.Kill = detectKill(info.Mountpoint, info.Root)
	if err := checkWritable(info.Mountpoint, info.Root); err != nil {
		return info, err
	}
	info.Writable = true
	return info, nil
}

// detectMount finds the cgroup2 hierarchy to use: the one at opts.Mountpoint; else the one holding
// opts.Root, wherever it is mounted; else the one at a standard place. It returns the mount's line
// too, which says what the mount shows.
func detectMount(mounts []mountInfo, opts Options) (Mode, string, mountInfo, error) {
	switch {
	case opts.Mountpoint != "":
		mp := filepath.Clean(opts.Mountpoint)
		if _, err := os.Stat(mp); err != nil {
			return Unavailable, "", mountInfo{}, fmt.Errorf("cgroup2 mountpoint: %w", err)
		}
		m, ok := mountOf(mounts, mp)
		if !ok || m.fstype != "cgroup2" {
			return Unavailable, "", m, fmt.Errorf("%s is not a cgroup2 filesystem (it is %s)", mp, cmp.Or(m.fstype, "unknown"))
		}
		return Mounted, mp, m, nil
	case opts.Root != "":
		return rootMount(mounts, opts.Root)
	}
	for _, c := range []struct {
		path string
		mode Mode
	}{{unifiedMount, Unified}, {hybridMount, Hybrid}} {
		if !exists(c.path) {
			continue
		}
		if m, ok := mountOf(mounts, c.path); ok && m.fstype == "cgroup2" {
			return c.mode, c.path, m, nil
		}
	}
	var v1, v2 []string
	for _, m := range mounts {
		switch {
		case m.fstype != "cgroup" && m.fstype != "cgroup2" || !visible(m):
		case m.fstype == "cgroup":
			v1 = append(v1, m.point)
		default:
			v2 = append(v2, m.point)
		}
	}
	switch {
	case len(v2) > 0:
		return Unavailable, "", mountInfo{}, fmt.Errorf("no cgroup2 at %s or %s; cgroup2 is mounted at %s (set the root below it to use it)",
			unifiedMount, hybridMount, strings.Join(v2, ", "))
	case len(v1) > 0:
		return Unavailable, "", mountInfo{}, fmt.Errorf("cgroup v1 only (%d hierarchies, such as %s; no cgroup2 mounted)", len(v1), v1[0])
	}
	return Unavailable, "", mountInfo{}, fmt.Errorf("no cgroup filesystem (nothing of type cgroup or cgroup2 in %s)", mountinfoFile)
}

// rootMount finds the cgroup2 mount an explicit root lies in, wherever it is mounted, and refuses a
// root that is not an absolute clean path strictly below a cgroup2 mountpoint.
func rootMount(mounts []mountInfo, root string) (Mode, string, mountInfo, error) {
	if !filepath.IsAbs(root) {
		return Unavailable, "", mountInfo{}, fmt.Errorf("root %q: not an absolute path", root)
	}
	if filepath.Clean(root) != root {
		return Unavailable, "", mountInfo{}, fmt.Errorf("root %q: not a clean path (want %q)", root, filepath.Clean(root))
	}
	p := nearestExisting(root)
	m, ok := mountOf(mounts, p)
	switch {
	case !ok:
		return Unavailable, "", m, fmt.Errorf("root %s: no mount in %s holds %s", root, mountinfoFile, p)
	case m.fstype == "cgroup":
		return Unavailable, "", m, fmt.Errorf("root %s is on a cgroup v1 hierarchy (mounted at %s); slices need cgroup2", root, m.point)
	case m.fstype != "cgroup2":
		return Unavailable, "", m, fmt.Errorf("root %s is not on a cgroup filesystem (%s is on %s, mounted at %s)", root, p, m.fstype, m.point)
	}
	if err := checkRootPath(m.point, root); err != nil {
		return Unavailable, m.point, m, err
	}
	mode := Mounted
	switch m.point {
	case unifiedMount:
		mode = Unified
	case hybridMount:
		mode = Hybrid
	}
	return mode, m.point, m, nil
}

// checkRootPath refuses a root (absolute and clean) that is not strictly below the mountpoint or has
// a name that cannot be a cgroup's.
func checkRootPath(mount, root string) error {
	rel, err := filepath.Rel(mount, root)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		if rel == "." {
			return fmt.Errorf("root %s is the cgroup2 mountpoint itself; slices need a directory below it", root)
		}
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

// checkWritable says why path (or its nearest existing ancestor) on the cgroup2 hierarchy mounted at
// mount cannot be written, or nil.
func checkWritable(mount, path string) error {
	p := nearestExisting(path)
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return fmt.Errorf("cgroup2 at %s, not writable: statfs %s: %w", mount, p, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("%s is not on a cgroup2 filesystem", p)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return fmt.Errorf("cgroup2 at %s, not writable: %s is on a read-only mount: %w", mount, p, unix.EROFS)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("cgroup2 at %s, not writable: %s (uid %d): %w", mount, p, os.Geteuid(), err)
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
	if p := nearestExisting(root); within(mount, p) && !isTrueRoot(p) {
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
