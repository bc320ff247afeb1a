package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// supervisorLeaf is the leaf a delegated process moves itself into.
const supervisorLeaf = "supervisor"

// delegate moves this process out of its own cgroup into a leaf where the rule of
// [Options.Delegated] says so, and returns the leaf's path, or "" when it stayed. top is the root's
// nearest existing ancestor, where controllers will be enabled.
func delegate(info Info, opts Options, top string) (string, error) {
	if info.Self == "" {
		return "", nil
	}
	own := filepath.Join(info.Mountpoint, info.Self)
	if own == info.Root || !within(own, info.Root) || isTrueRoot(own) {
		return "", nil // the own cgroup does not become an inner node, or may have processes anyway
	}
	// The controllers still to enable in the own cgroup, where it is top (read once: both the rule
	// and strangersBlock need them).
	var need []string
	if top == own {
		enabled, err := readFields(filepath.Join(own, "cgroup.subtree_control"))
		if err != nil {
			return "", err
		}
		need = missing(opts.Controllers, enabled)
	}
	switch {
	case opts.Delegated, isNamespaceRoot(), delegateMarked(own):
	case top == own:
		if len(need) == 0 {
			return "", nil
		}
	default:
		return "", nil
	}
	if err := strangersBlock(own, need, opts); err != nil {
		return "", err
	}
	return moveToLeaf(own, opts.Companions)
}

// strangersBlock returns the error enableInAncestor would give once this process had moved, where
// the controllers need must be enabled in dir, its own cgroup, and processes other than this one
// and its companions live there (a client that started this process in its own cgroup): then
// moving into a leaf would gain nothing, and would leave this process's companions and a leaf
// behind in a cgroup that is not its own.
func strangersBlock(dir string, need []string, opts Options) error {
	if len(need) == 0 {
		return nil
	}
	pids, err := readPids(nil, filepath.Join(dir, "cgroup.procs"), nil)
	if err != nil {
		return err
	}
	others := slices.DeleteFunc(pids, func(pid int) bool { return pid == os.Getpid() || slices.Contains(opts.Companions, pid) })
	if len(others) == 0 {
		return nil
	}
	return notOursError(need, dir, others)
}

// isNamespaceRoot reports whether this process sits at the root of its cgroup namespace; the caller
// has made sure that the cgroup is not the machine's true root. A container runtime that gives a
// container a cgroup namespace delegates that cgroup to it.
func isNamespaceRoot() bool {
	self, err := ownCgroup("/proc/self/cgroup")
	return err == nil && self == "/"
}

// delegateMarked reports whether systemd marked dir as delegated: it sets the trusted.delegate (and,
// since version 251, user.delegate) attribute to "1" on the cgroup of a unit with Delegate=yes.
func delegateMarked(dir string) bool {
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, attr, buf); err == nil && n == 1 && buf[0] == '1' {
			return true
		}
	}
	return false
}

// moveToLeaf moves this process (all its threads) into dir/supervisor, with the companions that
// share its cgroup, and returns the leaf's path. The companions go first: once this process has
// left, nothing must keep the cgroup from becoming an inner node.
func moveToLeaf(dir string, companions []int) (string, error) {
	leaf := filepath.Join(dir, supervisorLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create cgroup %s: %w", leaf, err)
	}
	procs := filepath.Join(leaf, "cgroup.procs")
	// Compared as /proc shows them (relative to this process's cgroup namespace), not as the
	// mount does.
	mine, _ := ownCgroup("/proc/self/cgroup")
	for _, pid := range append(companions, os.Getpid()) {
		if pid != os.Getpid() {
			if cg, err := ownCgroup("/proc/" + strconv.Itoa(pid) + "/cgroup"); err != nil || cg != mine {
				continue // gone, or elsewhere
			}
		}
		if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0); err != nil {
			if pid != os.Getpid() && errors.Is(err, unix.ESRCH) {
				continue
			}
			return "", fmt.Errorf("move pid %d into %s: %w", pid, leaf, err)
		}
	}
	return leaf, nil
}
