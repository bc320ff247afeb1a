package container

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cgreaper/reaper/internal/testutil"
)

// The host's view of containers: which host processes run in a container's pid namespace, and which
// cgroups podman and reaper made for it. Pids printed inside a container are pids of its namespace;
// everything the tests assert about processes is checked on the host's pids, by start time.

// procs returns the processes running in c's pid namespace, by their pid in that namespace.
func (c container) procs() map[int]testutil.Proc {
	out := map[int]testutil.Proc{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil || ns != c.pidNS {
			continue
		}
		inner, ok := nsPid(pid)
		if !ok {
			continue
		}
		if p, ok := testutil.ProcOf(pid); ok {
			out[inner] = p
		}
	}
	return out
}

// nsPid returns pid's pid in its own (innermost) pid namespace, from the NSpid line of its status.
func nsPid(pid int) (int, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "NSpid:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, false
		}
		n, err := strconv.Atoi(fields[len(fields)-1])
		return n, err == nil
	}
	return 0, false
}

// cgroupHierarchies returns the mountpoints of the host's cgroup hierarchies: /sys/fs/cgroup itself
// on a unified host, each v1 controller and /sys/fs/cgroup/unified on a hybrid one.
func cgroupHierarchies() []string {
	var out []string
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	for line := range strings.Lines(string(mounts)) {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[2] == "cgroup" || f[2] == "cgroup2") && strings.HasPrefix(f[1], "/sys/fs/cgroup") {
			out = append(out, f[1])
		}
	}
	return out
}

// cgroupDirs returns the cgroup directories below parent, in every hierarchy, whose path contains
// s; all of them when s is empty. Deeper directories come before their parents.
func cgroupDirs(parent, s string) []string {
	var out []string
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, parent)
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // vanished, or never there
			}
			if d.IsDir() && strings.Contains(path, s) {
				out = append(out, path)
			}
			return nil
		})
	}
	slices.Reverse(out)
	return out
}

// cgroupsNamed returns the directories of the cgroup2 hierarchy named one of names.
func cgroupsNamed(names []string) []string {
	var out []string
	for _, h := range cgroupHierarchies() {
		if !isCgroup2(h) {
			continue
		}
		filepath.WalkDir(h, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && slices.Contains(names, d.Name()) {
				out = append(out, path)
			}
			return nil
		})
	}
	return out
}

// removeCgroupTree removes parent and every cgroup below it in every hierarchy, deepest first, and
// returns those it could not remove. A cgroup that still holds a process cannot be removed, so
// nothing is killed here.
func removeCgroupTree(parent string) []string {
	var left []string
	for _, dir := range cgroupDirs(parent, "") {
		if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
			left = append(left, fmt.Sprintf("%s (%v)", dir, err))
		}
	}
	return left
}

// mountsUnder returns the mount points below dir.
func mountsUnder(dir string) []string {
	var out []string
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	for line := range strings.Lines(string(mounts)) {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[1], dir+"/") {
			out = append(out, f[1])
		}
	}
	return out
}

// cgroupV2 returns the host path of pid's cgroup in the cgroup2 hierarchy, or "" when the host has
// none or pid is gone.
func cgroupV2(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if rel, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			for _, h := range cgroupHierarchies() {
				if isCgroup2(h) {
					return filepath.Join(h, rel)
				}
			}
		}
	}
	return ""
}

// isCgroup2 reports whether the mountpoint h holds the cgroup2 hierarchy.
func isCgroup2(h string) bool {
	_, err := os.Stat(filepath.Join(h, "cgroup.controllers"))
	return err == nil
}
